"""Does `kame-data plan` tell the truth? Plan a run of real fixture dialogues on this machine, run it
through `kame-data run`, and print predicted against measured, per stage and in total.

The recipe is the quickstart's (its voices, QA, answer round-trip, quality, acoustics and the
embedded oracle) on real GSM8K and MMLU-Pro rows (tests/data/sources; the same recipe as
benchmarks/speech_cost.py). Before the measured run, a small run (`--until speak`, 2 items) and the
room bank's simulation fill the cache folder with what every later run reuses (voice screening, the
assembled Whisper model, the rooms' impulse responses): the plan predicts work, not a first run's
one-off set-up. The measured run answers every oracle request anew (`--no-cache`).

Measured per stage: its CPU seconds as the manifest's `cpu` has them, what the projection predicts as
the stage's work: the step's own worker processes (speak and post-speech workers, the embedded LLM's
instances), or for a stage computed in the run's own process (template scripts, the writer) the
driver threads that ran it. Then the run's CPU time (every process) against the projection's work in
all, and the plan's wall time against the run's. Run it on an idle machine (nothing else running);
the goal (issue 34) is the total within ±25% and every stage within ±40%.

On a CPU other than the calibration's, `plan` scales the rates by the speed probe
(kame_data/plan/speed_probe.py) and the check says so; `--no-probe` checks the rates as measured.

    python benchmarks/plan_check.py [--items 50] [--calibration FILE] [--no-probe] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from speech_cost import recipe  # noqa: E402

CLI = [sys.executable, "-m", "kame_data.cli.main"]
TOTAL_WITHIN, STAGE_WITHIN = 0.25, 0.40


# Simulates the recipe's bank of rooms into the cache folder, as a first run does once (seconds).
WARM_ROOMS = """
import sys
from kame_data.recipe import load_recipe
from kame_data.runner.config import RunConfig
from kame_data.speech.acoustics import draw_room, room_rir
cfg = RunConfig.resolve(load_recipe(sys.argv[1]))
a = cfg.steps["acoustics"]
for i in range(a.rooms if a.enabled else 0):
    room_rir(draw_room(cfg.seed, i, a.rt60), cfg.speak.sample_rate)
"""


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def kame(args: list[str], env: dict) -> subprocess.CompletedProcess:
    res = subprocess.run(CLI + args, capture_output=True, text=True, env=env)
    if res.returncode:
        raise SystemExit(f"kame-data {' '.join(args[:2])} failed:\n{res.stderr[-3000:]}")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=50, help="source items (about 80%% become dialogues)")
    ap.add_argument("--workers", type=int, default=2, help="speak.workers of the recipe")
    ap.add_argument("--calibration", help="a calibration file (default: the shipped one)")
    ap.add_argument("--no-probe", action="store_true", help="plan with the calibration's rates as measured, not "
                    "scaled to this CPU by the speed probe (when the calibration's CPU is another)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="kd-plan-check-") as d:
        tmp = Path(d)
        env = {**os.environ, "KAME_DATA_CACHE_DIR": str(tmp / "cache")}
        path = recipe(tmp / "plan-check.yaml", args.items, args.workers)
        plan_args = ["plan", str(path), "--cores", str(cores), "--json"]
        if args.calibration:
            plan_args += ["--calibration", args.calibration]
        if args.no_probe:
            plan_args.append("--no-probe")
        plan = json.loads(kame(plan_args, env).stdout)
        print(f"load average {os.getloadavg()[0]:.1f} before the runs (the figures assume an idle machine)",
              flush=True)
        kame(["run", str(path), "--out", str(tmp / "warm-up"), "-q", "--limit", "2", "--until", "speak"], env)
        subprocess.run([sys.executable, "-c", WARM_ROOMS, str(path)], env=env, check=True)
        t, before = time.perf_counter(), children_cpu()
        kame(["run", str(path), "--out", str(tmp / "out"), "-q", "--no-cache"], env)
        wall, cpu = time.perf_counter() - t, children_cpu() - before
        manifest = json.loads((tmp / "out" / "manifest.json").read_text("utf-8"))
    proj = plan["projection"]
    # the rates as plan used them: this CPU's own, or another CPU's (scaled by the speed probe, or not)
    rates = next((n for n in proj["notes"] if "scaled to this CPU" in n or "is not the one the rates" in n),
                 "measured on this CPU")
    print(f"rates: {rates}")
    missed: list[tuple[str, float]] = []
    timings, stage_cpu = manifest["timings"], manifest.get("cpu", {})
    rows, ok = [], True
    audio_min = sum((s["kept"] or 0) * s["seconds_per_dialogue"] for s in plan["sources"]) / 60
    print(f"\n{args.items} items: plan {plan['totals']['kept']:.0f} dialogues, "
          f"{audio_min:.1f} min of audio; the run {manifest['counts']['samples']} "
          f"dialogues, {manifest['audio_hours'] * 60:.1f} min")
    print(f"\n{'stage':<12} {'predicted core-s':>17} {'measured':>9} {'ratio':>6}  basis (measured: the manifest's "
          "cpu)")
    for s in proj["stages"]:
        measured = stage_cpu.get(s["stage"])
        if s["work"] is None or measured is None:
            print(f"{s['stage']:<12} {'?':>17} {measured if measured is not None else '?':>9}")
            continue
        ratio = s["work"] / measured if measured else float("inf")
        within = abs(ratio - 1) <= STAGE_WITHIN
        ok &= within
        if not within:
            missed.append((s["stage"], measured))
        rows.append({"stage": s["stage"], "predicted": s["work"], "measured": measured, "ratio": ratio,
                     "step_time": timings.get(s["stage"])})
        print(f"{s['stage']:<12} {s['work']:17.1f} {measured:9.1f} {ratio:6.2f}{'' if within else ' !'}  {s['basis']}")
    work = sum(s["work"] or 0.0 for s in proj["stages"])
    print(f"{'all, CPU':<12} {work:17.1f} {cpu:9.1f} {work / cpu:6.2f}  every process of the run, user + sys "
          f"(the driver's own: {stage_cpu.get('driver', float('nan')):.1f})")
    ratio = proj["total_s"] / wall
    ok &= abs(ratio - 1) <= TOTAL_WITHIN
    print(f"{'total wall':<12} {proj['total_s']:17.1f} {wall:9.1f} {ratio:6.2f}  on {cores} cores, bounded by "
          f"{proj['bounding_stage']} (predicted)")
    print(f"\n{'within' if ok else 'NOT within'} the goal: total ±{TOTAL_WITHIN:.0%}, every stage ±{STAGE_WITHIN:.0%}")
    if missed:
        share = sum(m for _, m in missed) / max(1e-9, sum(r["measured"] for r in rows))
        print(f"stages outside ±{STAGE_WITHIN:.0%}: {', '.join(n for n, _ in missed)} ({share:.1%} of the measured work)")
    if args.json:
        Path(args.json).write_text(json.dumps({"items": args.items, "stages": rows, "wall": wall, "cpu": cpu,
                                               "predicted_work": work,
                                               "predicted_wall": proj["total_s"], "within": ok, "rates": rates},
                                              indent=2))


if __name__ == "__main__":
    main()
