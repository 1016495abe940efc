"""Per-stage rates for `kame-data plan`'s wall-time projection, measured through `kame-data run`.

Rates are CPU seconds, not wall seconds, so a machine shared with other work still gives the cost
in core-seconds: the CPU time of the run's whole process tree (the CLI and every process under it,
sampled with psutil). Each rate is a slope between a small and a larger run of the same recipe,
so start-up and model loading drop out:

- speech (`--until speak`, one engine for both voices, `speak.workers: 1`): core-seconds per second
  of audio for piper, espeak, hibari, Kokoro and flite, and Whisper QA (espeak
  with QA on minus espeak without), and each engine's speaking rate at its default knobs (words
  per second of speaker A's turns as placed in the audio: `plan`'s audio per dialogue);
- the embedded llama.cpp model (`threads: 1`): core-seconds per oracle call and set-up per instance
  (its instances' CPU, the manifest's `cpu`, over runs of GSM8K and MMLU-Pro rows with the oracle
  interval at 1.0 s and 0.5 s; max_tokens 48; `--only oracle`) and per script rewrite (style llm,
  max_tokens 400);
- the Parquet writer and the template script, which run in the driver: the CPU of the driver
  threads that ran them (the manifest's `cpu`) in two full runs: the writer per second of audio plus
  a fixed part per run, the script per dialogue (`--only driver` measures them alone);
- the post-speech steps quality and acoustics, and what the speak step's answer round-trip,
  turn-taking and a speaker variant add to it (`steps`): full runs with 2 worker processes, the CPU
  of each step's own workers (the manifest's `cpu`), per second of audio; and each step's set-up per
  worker process, the intercept of the same line (`setup_core_s_per_worker`; `--only steps`).

Oracle calls of the other runs go to a loopback OpenAI server with no latency.

Speed probe: this CPU's time on a short workload of each kind of work (kame_data/plan/speed_probe.py),
stored as `probe`, so that `kame-data plan` on another CPU can scale each rate by that CPU's own
times (`--only probe` adds it to rates this CPU measured).

Yields: the share of a source's rows the template script keeps (`--until script` over every fixture
row of each kind, tests/data/sources/), with the reasons of the rest; `plan` multiplies a source's
items by it. `--only yields` measures them alone and keeps the stored rates.

    python benchmarks/calibrate.py [--items 2 8] [--write]   # --write: into kame_data/calibration.json
    python benchmarks/calibrate.py --only yields --write
    python benchmarks/calibrate.py --only yields --split mmlu_pro=test.jsonl --split gsm8k=train.jsonl --write

Whole splits (`--split KIND=FILE`): the paper recipe's source of that kind read from a local copy of
its whole split, through its filters and the script's verdicts on each passing item's first four
variants: the items that pass and the variants the script takes by max_variants, from which `plan`
counts a hub source's dialogues when its rows are not at hand.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kame_data.plan import speed_probe  # noqa: E402
from kame_data.machine import cpu_description, cpu_fingerprint  # noqa: E402
from tests.loopback_server import LoopbackServer  # noqa: E402

CLI = [sys.executable, "-m", "kame_data.cli.main"]
VOICES = {"piper": ({"engine": "piper", "voice": "joe"}, {"engine": "piper", "voice": "joe", "length_scale": 1.1}),
          "espeak": ({"engine": "espeak", "voice": "en-us"}, {"engine": "espeak", "voice": "en-us+f3", "rate": 170}),
          "hibari": ({"engine": "hibari", "voice": "heart"}, {"engine": "hibari", "voice": "heart", "speed": 1.1}),
          "kokoro": ({"engine": "kokoro", "voice": "jf_gongitsune"}, {"engine": "kokoro", "voice": "jm_kumo"}),
          # the Debian package (`make flite`): three voices of the default user pool
          "flite": ({"engine": "flite", "voice": "slt"}, {"engine": "flite", "voice": "rms"})}
# The post-speech steps, and the speak step's optional parts, measured by the CPU of the steps' own
# worker processes (the manifest's `cpu`) in full runs: each part is what it adds to the plain runs.
POST = {"quality": {"enabled": True}, "acoustics": {"enabled": True}}
SPEAK_PARTS = {"answer": {"answer": {"enabled": True}},
               "turns": {"turns": {"backchannels_per_minute": 5, "barge_in_rate": 0.3}},
               "variants": {"user": {**VOICES["espeak"][1], "formant_shift": 1.12, "pitch_median": 190}}}
LLAMA = {"kind": "llamacpp", "threads": 1, "max_tokens": 48, "temperature": 0.7}
# Every fixture row of each source kind the plan knows (real benchmark rows; HSSBench's are our own
# rows in its format, SOURCES.md)
YIELD_ROWS = {"mmlu_pro": "mmlu_pro_test_300.jsonl", "gsm8k": "gsm8k_test_200.jsonl",
              "hssbench": "hssbench_own.jsonl", "mt_bench": "mt_bench_questions.jsonl"}


def tree_cpu(proc: subprocess.Popen, interval: float = 0.1) -> float:
    """CPU seconds (user + system) of a process and all its descendants until it exits: the
    latest reading of each process, summed."""
    seen: dict[int, float] = {}
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for p in procs:
            try:
                t = p.cpu_times()
                seen[p.pid] = t.user + t.system
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        time.sleep(interval)
    return sum(seen.values())


def run(tmp: Path, name: str, items: int, speak: dict, oracle: dict, script: dict | None = None,
        until: str | None = None, extra: dict | None = None, workers: int = 1, kind: str = "gsm8k") -> dict:
    """One `kame-data run` on a source's fixture rows (GSM8K by default): its CPU seconds, audio
    seconds, dialogues and manifest (full runs)."""
    rows = ROOT / "tests" / "data" / "sources" / YIELD_ROWS[kind]
    raw = {"name": name, "seed": 11, "sources": [{"kind": kind, "path": str(rows), "limit": items}],
           "speak": {**speak, "workers": workers}, "oracle": oracle, "publish": {"rows_per_shard": 50}, "batch_size": 4,
           **(extra or {})}
    if script:
        raw["script"] = script
    recipe = tmp / f"{name}-{items}.yaml"
    recipe.write_text(yaml.safe_dump(raw), "utf-8")
    out = tmp / f"{name}-{items}"
    proc = subprocess.Popen(CLI + ["run", str(recipe), "--out", str(out), "-q", "--no-cache"]
                            + (["--until", until] if until else []),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    cpu = tree_cpu(proc)
    err = proc.stderr.read()
    if proc.returncode:
        raise SystemExit(f"{name}: kame-data run failed\n{err[-3000:]}")
    res = {"cpu": cpu, "manifest": {}}
    if until:
        files = {"script": "scripts.jsonl", "speak": "rendered.jsonl", "quality": "rendered.jsonl",
                 "acoustics": "rendered.jsonl", "oracle": "samples.jsonl"}
        recs = [json.loads(x) for x in (out / files[until]).open()]
        res.update(dialogues=len(recs), audio=sum(r.get("duration", 0.0) for r in recs), records=recs)
    else:
        m = res["manifest"] = json.loads((out / "manifest.json").read_text("utf-8"))
        res.update(dialogues=m["counts"]["samples"], audio=m["audio_hours"] * 3600)
    print(f"  {name:<12} {items:>2} items: {res['dialogues']:>2} dialogues, {res['audio']:6.1f} s audio, "
          f"{cpu:7.1f} CPU s", flush=True)
    return res


def script_yields(tmp: Path) -> dict:
    """Per source kind: rows, the share kept as dialogues by the default template script (one
    variant), and each reject reason's share."""
    out = {}
    for kind, name in YIELD_ROWS.items():
        rows_file = ROOT / "tests" / "data" / "sources" / name
        rows = sum(1 for line in rows_file.open(encoding="utf-8") if line.strip())
        recipe = tmp / f"yield-{kind}.yaml"
        recipe.write_text(yaml.safe_dump({"name": f"yield-{kind}", "seed": 11,
                                          "sources": [{"kind": kind, "path": str(rows_file)}]}), "utf-8")
        res = subprocess.run(CLI + ["run", str(recipe), "--out", str(tmp / f"yield-{kind}"), "-q", "--no-cache",
                                    "--until", "script"], capture_output=True, text=True)
        if res.returncode:
            raise SystemExit(f"yield {kind}: kame-data run failed\n{res.stderr[-3000:]}")
        kept = {json.loads(x)["item_id"] for x in (tmp / f"yield-{kind}" / "scripts.jsonl").open(encoding="utf-8") if x.strip()}
        reasons: dict[str, dict[str, int]] = {"sources": {}, "script": {}}
        for line in (tmp / f"yield-{kind}" / "rejects.jsonl").open(encoding="utf-8"):
            if line.strip():
                r = json.loads(line)
                by = reasons.setdefault(r["stage"], {})
                by[r["reason"]] = by.get(r["reason"], 0) + 1
        passed = rows - sum(reasons["sources"].values())  # what a quota or per-category sample draws from
        out[kind] = {"rows": rows, "kept": round(len(kept) / rows, 4),
                     "script_kept": round(len(kept) / max(1, passed), 4),
                     "rejects": {stage: {k: round(v / rows, 4) for k, v in sorted(by.items())}
                                 for stage, by in reasons.items()}}
        print(f"  yield {kind:<9} {len(kept):>3} of {rows} rows kept ({passed} past the sources step); "
              f"rejects {reasons}", flush=True)
    return {"measured": datetime.date.today().isoformat(), "file_rows": "tests/data/sources/",
            "script": "the default template script, one variant", "kinds": out}


def split_yields(splits: dict[str, Path]) -> dict:
    """Per source kind of the paper recipe, its whole split (`--split KIND=FILE`, a local copy of the
    split the recipe names) through the recipe's filters and the script's verdicts on every passing
    item's first four variants (kame_data/plan/yields.py `split_capacity`): what `plan` counts a hub
    source's dialogues from when its rows are not at hand."""
    from dataclasses import replace

    from kame_data.recipe import load_recipe
    from kame_data.runner.config import RunConfig
    from kame_data.plan.yields import split_capacity

    recipe = load_recipe("kame_paper")
    cfg = RunConfig.resolve(recipe)
    command = "python benchmarks/calibrate.py --only yields " + " ".join(f"--split {k}=FILE" for k in splits)
    out = {}
    for spec in recipe.sources:
        if spec.kind not in splits:
            continue
        t = time.perf_counter()
        figures = split_capacity(recipe, replace(spec, path=str(splits[spec.kind]), hub=None), cfg)
        out[spec.kind] = {"measured": datetime.date.today().isoformat(), "command": command,
                          "file": splits[spec.kind].name, "split": f"{spec.hub} {spec.split} split", **figures}
        print(f"  whole split {spec.kind:<9} {figures['rows']:,} rows, {figures['passed']:,} past the filters, "
              f"variants the script takes by max_variants {figures['capacity']} ({time.perf_counter() - t:.0f} s)",
              flush=True)
    return out


def speaking_rate(records: list[dict], speaker: str = "A") -> float:
    """Words per second of `speaker`'s turns as placed in the audio: floor words over the turns'
    spans (a turn's first word to its end), what `plan` divides a turn's words by."""
    words, seconds = 0, 0.0
    for r in records:
        for turn, at in zip(r["turns"], r["timings"]):
            if turn["speaker"] != speaker:
                continue
            words += sum(1 for w in r["words"] if w["speaker"] == speaker and not w.get("backchannel")
                         and at["start"] - 1e-6 <= w["start"] <= at["end"])
            seconds += at["end"] - at["start"]
    return words / seconds if seconds else 0.0


def slope(small: dict, large: dict, key: str, what: str = "cpu") -> float:
    return (large[what] - small[what]) / max(1e-9, large[key] - small[key])


PART_WORKERS = 2


def parts(tmp: Path, speak: dict, oracle: dict, n1: int, n2: int) -> tuple[dict[str, float], dict[str, float]]:
    """Core-s per audio second of quality, acoustics and each optional part of speak (what it adds
    to the speak workers' CPU), each a slope of the steps' worker CPU between two full runs; and per
    step, what each worker process spends once (the intercept of the plain runs' line, per worker:
    start-up, imports, models; the speak step's with espeak voices and Whisper)."""
    cpu: dict[str, dict[str, float]] = {}
    setup: dict[str, float] = {}
    for name, extra in {"plain": {}, **SPEAK_PARTS}.items():
        small, large = (run(tmp, f"part-{name}", n, {**speak, **extra}, oracle, extra=POST, workers=PART_WORKERS)
                        for n in (n1, n2))
        seconds = max(1e-9, large["audio"] - small["audio"])
        cpu[name] = {step: (large["manifest"]["cpu"].get(step, 0.0) - small["manifest"]["cpu"].get(step, 0.0))
                     / seconds for step in ("speak", *POST)}
        if name == "plain":
            setup = {step: (small["manifest"]["cpu"].get(step, 0.0) - cpu[name][step] * small["audio"]) / PART_WORKERS
                     for step in ("speak", *POST)}
    out = {step: cpu["plain"][step] for step in POST}
    out.update({name: cpu[name]["speak"] - cpu["plain"]["speak"] for name in SPEAK_PARTS})
    return ({k: round(max(v, 0.0), 4) for k, v in out.items()},
            {k: round(max(v, 0.0), 2) for k, v in setup.items()})


def speech_rates(tmp: Path, oracle: dict, n1: int, n2: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per engine: core-s per audio second (`--until speak`, one worker) and speaker A's words per
    second (the engine's voice at default knobs)."""
    speech, spoken = {}, {}
    for engine, (a, b) in VOICES.items():
        small, large = (run(tmp, engine, n, {"assistant": a, "user": b}, oracle, until="speak") for n in (n1, n2))
        speech[engine] = slope(small, large, "audio")
        spoken[engine] = speaking_rate(large["records"])
    return speech, spoken


def qa_rate(tmp: Path, espeak: dict, oracle: dict, n1: int, n2: int, plain: float) -> float:
    """Whisper QA's core-s per audio second: espeak with QA on, minus espeak alone (`plain`)."""
    with_qa = slope(*(run(tmp, "espeak-qa", n, {**espeak, "qa": {"enabled": True}}, oracle, until="speak")
                      for n in (n1, n2)), "audio")
    return round(max(with_qa - plain, 0.0), 4)


def driver_rates(tmp: Path, speak: dict, oracle: dict, n: int) -> dict[str, float]:
    """The template script and the writer, which run in the driver, from their CPU (the manifest's
    `cpu`: the driver threads that ran them, not their batch times, which count waits for a core the
    other steps hold) in full runs of `n` and `4 n` items (speak in worker processes, as by default):
    the writer as a slope per second of audio plus what every run spends once (the card, its plots,
    the last footer); the script per dialogue over the larger run (under a second in all: a slope
    of it is noise)."""
    small, large = (run(tmp, "full", k, speak, oracle, workers=PART_WORKERS) for k in (n, 4 * n))
    for r in (small, large):
        print(f"    {r['dialogues']} dialogues: script {r['manifest']['cpu']['script']:.2f} core-s, "
              f"write {r['manifest']['cpu']['write']:.2f} core-s", flush=True)
    write = max((large["manifest"]["cpu"]["write"] - small["manifest"]["cpu"]["write"])
                / max(1e-9, large["audio"] - small["audio"]), 0.0)
    return {"script_template_core_s_per_dialogue": round(large["manifest"]["cpu"]["script"] / max(1, large["dialogues"]), 4),
            "write_s_per_audio_s": round(write, 5),
            "write_fixed_core_s": round(max(small["manifest"]["cpu"]["write"] - write * small["audio"], 0.0), 2)}


def oracle_rates(tmp: Path, speak: dict, items: int) -> dict:
    """The embedded oracle's CPU (its instances', the manifest's `cpu`) as a set-up per instance
    (loading the model, the batching check) plus a cost per call: least squares over runs of
    GSM8K's and MMLU-Pro's rows with the ladder at 1.0 s and 0.5 s (more calls on the same
    dialogues). The prompts' length per call is printed: the prompt shows a bounded window of the
    transcript, so a call costs the same in a short dialogue and a long one."""
    import numpy as np

    from kame_data.llm.llamacpp import plan_instances

    seen = []
    for kind in ("gsm8k", "mmlu_pro"):
        for iv in (1.0, 0.5):
            m = run(tmp, f"llm-oracle-{kind}-{iv}", items, speak, {"interval": iv, "backend": LLAMA}, kind=kind)["manifest"]
            use = m["llm_usage"]["stages"]["oracle"]
            seen.append((m["cpu"]["oracle"], use["requests"], use["prompt_tokens"]))
    cpu, calls = (np.array(c, float) for c in list(zip(*seen))[:2])
    (fixed, per_call), *_ = np.linalg.lstsq(np.stack([np.ones_like(calls), calls], 1), cpu, rcond=None)
    for c, n, p in seen:
        print(f"    oracle: {n} calls, {p / max(1, n):.0f} prompt tokens per call, {c:.1f} core-s "
              f"(fit {fixed + per_call * n:.1f})", flush=True)
    return {"core_s_per_call": round(float(per_call), 3),
            "setup_core_s_per_instance": round(max(float(fixed), 0.0) / plan_instances(None, LLAMA["threads"])[0], 2),
            "max_tokens": LLAMA["max_tokens"], "calls": int(calls.sum()),
            "prompt_tokens_per_call": round(sum(p for *_, p in seen) / max(1, calls.sum())),
            "runs": f"{items} rows of gsm8k and of mmlu_pro, the ladder at 1.0 s and 0.5 s"}


def loopback(srv: LoopbackServer) -> dict:
    """Oracle settings that send every call to the loopback server (no latency)."""
    return {"interval": 0.5, "backend": {"kind": "openai", "model": "loopback", "base_url": srv.base_url,
                                         "concurrency": 64}}


LOAD_AT_START = os.getloadavg()[0]


def _command() -> str:
    """This command line, a --split's file named by its file name only (no machine's folders)."""
    args = [a.split("=", 1)[0] + "=" + Path(a.split("=", 1)[1]).name if "=" in a and Path(a.split("=", 1)[1]).is_file()
            else a for a in sys.argv[1:]]
    return "python benchmarks/calibrate.py " + " ".join(args)


def _split(text: str) -> tuple[str, Path]:
    kind, sep, file = text.partition("=")
    if not sep or not Path(file).is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: give KIND=FILE with an existing file")
    return kind, Path(file)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, nargs=2, default=[2, 8], help="fixture rows of the small and large runs (GSM8K; MMLU-Pro too for the oracle)")
    ap.add_argument("--write", action="store_true", help="store the rates in kame_data/calibration.json")
    ap.add_argument("--out", type=Path, help="store the rates in this file instead (your machine's, for "
                    "`kame-data plan --calibration FILE`)")
    ap.add_argument("--only", choices=["yields", "driver", "speech", "steps", "oracle", "probe"], help="measure only this part "
                    "(driver: the writer and the template script; speech: each engine's cost and speaking rate, and Whisper QA's; "
                    "steps: quality, acoustics, the speak step's parts and each step's set-up per worker; oracle: the "
                    "embedded oracle per call and per prompt token; probe: the speed probe, on the CPU that "
                    "measured the rest); keep "
                    "the stored rest")
    ap.add_argument("--split", action="append", default=[], metavar="KIND=FILE", type=_split,
                    help="with --only yields: a local copy of the whole split kame_paper's KIND source names "
                    "(MMLU-Pro test, GSM8K train, HSSBench), measured through the recipe's filters and the script's "
                    "verdicts for `plan`'s dialogue counts; repeat per kind (kinds not given keep their stored figures)")
    args = ap.parse_args()
    n1, n2 = args.items
    shipped = ROOT / "kame_data" / "calibration.json"
    path = args.out or shipped
    if args.out and not args.out.is_file():
        args.out.write_text(shipped.read_text("utf-8"), "utf-8")  # `--only` parts update the shipped rest
    args.write = args.write or bool(args.out)
    espeak = {"assistant": VOICES["espeak"][0], "user": VOICES["espeak"][1]}
    if args.only:
        with LoopbackServer(latency=0.0) as srv, tempfile.TemporaryDirectory(prefix="kd-cal-") as d:
            if args.only == "yields":
                stored = json.loads(path.read_text("utf-8")).get("yields", {})
                part = {"yields": {**script_yields(Path(d)), "splits": {**stored.get("splits", {}),
                                                                         **split_yields(dict(args.split))}}}
            elif args.only == "probe":
                stored = json.loads(path.read_text("utf-8"))
                if stored.get("cpu") != cpu_description():
                    raise SystemExit(f"the probe must come from the CPU that measured the rates ({stored.get('cpu')}), "
                                     f"not this one ({cpu_description()}): calibrate here in full instead")
                part = {"probe": speed_probe.measure()}
            elif args.only == "driver":
                part = driver_rates(Path(d), espeak, loopback(srv), n2)
            elif args.only == "oracle":
                stored = json.loads(path.read_text("utf-8"))
                part = {"llamacpp": {**stored["llamacpp"], "oracle": oracle_rates(Path(d), espeak, n1)}}
            elif args.only == "steps":
                steps, setup = parts(Path(d), {**espeak, "qa": {"enabled": True}}, loopback(srv), n1, n2)
                part = {"steps": steps, "setup_core_s_per_worker": setup}
            else:
                speech, spoken = speech_rates(Path(d), loopback(srv), n1, n2)
                part = {"speak_core_s_per_audio_s": {e: round(v, 4) for e, v in speech.items()},
                        "words_per_second": {e: round(v, 3) for e, v in spoken.items()},
                        "qa_core_s_per_audio_s": qa_rate(Path(d), espeak, loopback(srv), n1, n2, speech["espeak"])}
        stored = json.loads(path.read_text("utf-8"))
        later = [p for p in stored.get("remeasured", []) if p.get("only") != args.only]
        cal = {**stored, **part, "remeasured": later + [{
            "only": args.only, "measured": datetime.date.today().isoformat(),
            "command": _command(),
            "load_average_at_start": round(LOAD_AT_START, 1), "cpu": cpu_description(),
            "cpu_fingerprint": cpu_fingerprint()}]}
        print(json.dumps(part, indent=2))
        if args.write:
            path.write_text(json.dumps(cal, indent=2) + "\n", "utf-8")
            print(f"wrote {path}")
        return
    with LoopbackServer(latency=0.0) as srv, tempfile.TemporaryDirectory(prefix="kd-cal-") as d:
        tmp = Path(d)
        loop = loopback(srv)
        speech, spoken = speech_rates(tmp, loop, n1, n2)
        qa = qa_rate(tmp, espeak, loop, n1, n2, speech["espeak"])
        steps, setup = parts(tmp, {**espeak, "qa": {"enabled": True}}, loop, n1, n2)
        driver = driver_rates(tmp, espeak, loop, n2)
        oracle = oracle_rates(tmp, espeak, n1)
        s1, s2 = (run(tmp, "llm-script", n, espeak, loop, {"style": "llm", "llm": {"backend": LLAMA}})
                  for n in (1, 3))
        calls = s2["manifest"]["script"]["calls"] - s1["manifest"]["script"]["calls"]
        # Minus the speech of the extra dialogues (espeak) and their template-rate share.
        rewrite = (s2["cpu"] - s1["cpu"] - speech["espeak"] * (s2["audio"] - s1["audio"])) / max(1, calls)
        yields = script_yields(tmp)
    probe = speed_probe.measure()
    stored = json.loads(path.read_text("utf-8")) if path.is_file() else {}
    cal = {
        "measured": datetime.date.today().isoformat(),
        "machine": f"{os.cpu_count()} cores (load average {LOAD_AT_START:.1f} at the start), CPU seconds of each run's process tree",
        "cpu": cpu_description(),
        "cpu_fingerprint": cpu_fingerprint(),
        "command": _command(),
        "speak_core_s_per_audio_s": {e: round(v, 4) for e, v in speech.items()},
        # words per second at the engine's default knobs, on real script turns (plan's audio length)
        "words_per_second": {e: round(v, 3) for e, v in spoken.items()},
        "qa_core_s_per_audio_s": qa,
        "steps": steps,
        "setup_core_s_per_worker": setup,
        **driver,
        "llamacpp": {"oracle": oracle,
                     "script": {"core_s_per_call": round(rewrite, 3), "max_tokens": 400, "calls": calls,
                                # measured by a separate run of kame_paper (see its "fallback"): kept
                                **{k: v for k, v in stored.get("llamacpp", {}).get("script", {}).items()
                                   if k in ("fallback_rate", "fallback")}}},
        "yields": {**yields, "splits": {**stored.get("yields", {}).get("splits", {}), **split_yields(dict(args.split))}},
        "probe": probe,
        # measured on a GPU by benchmarks/gpu_speech_check.py, not here: a CPU calibration keeps it
        **{k: stored[k] for k in ("qa_gpu",) if k in stored},
    }
    print(json.dumps(cal, indent=2))
    if args.write:
        path.write_text(json.dumps(cal, indent=2) + "\n", "utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
