"""Oracle ladder quality and speed, per embedded model, through `kame-data run`.

For each recipe (default: the quickstart, and 72 fixture items of benchmarks/recipes/oracle_fixtures.yaml,
about 60 dialogues) and each embedded model, runs `kame-data run` into OUT/<recipe> with a fresh LLM
cache and the oracle checkpoints removed (the speech stays checkpointed, so only the first run pays for
TTS), then prints per level: events, mean token-F1 and ROUGE-L of the prediction to the true reply,
whether the ladder climbs (a gap of at least 0.03 between neighbours), the share of events that are not
replies (published predictions `replies.classify` flags, plus events dropped after every retry), the
oracle stage's seconds and calls per second.

With `--seeds N` each run is repeated with `oracle.seed` 0..N-1 (other samples of the same requests;
`--first-seed K` starts at K)
and the mean token-F1 per level is printed with its spread across seeds: one draw moves a level by up
to about 0.05 on a few hundred events, so a prompt or model change needs several draws to show.

    python benchmarks/oracle_ladder.py [--out DIR] [--models smollm2-135m gemma3-270m] [--recipes quickstart fixtures]
                                       [--seeds 3] [--first-seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kame_data.dataset.folder import DatasetDir  # noqa: E402
from kame_data.oracle.metrics import rouge_l, token_f1, true_replies  # noqa: E402
from kame_data.oracle.prompts import clue  # noqa: E402
from kame_data.oracle.replies import classify, usable  # noqa: E402
from kame_data.recipe import find_recipe  # noqa: E402

RECIPES = {"quickstart": ("quickstart", None), "fixtures": (str(ROOT / "benchmarks/recipes/oracle_fixtures.yaml"), 72)}
GAP = 0.03


def recipe_for(ref: str, model: str, instances: int | None, out: Path, seed: int = 0) -> Path:
    """The recipe with its oracle backend set to `model` and `oracle.seed`, written beside the run
    (paths made absolute)."""
    src = find_recipe(ref)
    raw = yaml.safe_load(src.read_text("utf-8"))
    for s in raw.get("sources", []):
        if s.get("path"):
            s["path"] = str((src.parent / s["path"]).resolve())
    raw.setdefault("oracle", {})["seed"] = seed
    backend = raw["oracle"].setdefault("backend", {})
    backend["model"] = model
    if instances:
        backend["instances"] = instances
    path = out / f"recipe-{model}-seed{seed}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), "utf-8")
    return path


def run(recipe: Path, out: Path, limit: int | None, cache: Path) -> None:
    shutil.rmtree(out / ".checkpoints" / "oracle", ignore_errors=True)  # measure the oracle stage afresh
    shutil.rmtree(cache, ignore_errors=True)
    cmd = [sys.executable, "-m", "kame_data.cli.main", "run", str(recipe), "--out", str(out), "--quiet"]
    if limit:
        cmd += ["--limit", str(limit)]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "KAME_DATA_CACHE_DIR": str(cache)})
    if r.returncode:
        raise SystemExit(f"kame-data run failed:\n{r.stderr[-3000:]}")


def measure(out: Path) -> dict:
    ds = DatasetDir.open(out)
    f1, rouge = defaultdict(list), defaultdict(list)
    non_replies = steps = 0
    examples: list[str] = []
    for row in ds.rows(["id", "words", "oracle"]):
        events = row["oracle"]
        for e, truth in zip(events, true_replies(row["words"], events)):
            f1[e["level"]].append(token_f1(e["prediction"], truth))
            rouge[e["level"]].append(rouge_l(e["prediction"], truth))
            if e["level"] < 5:
                steps += 1
                kind = classify(e["prediction"], e["conversation_context"], clue(truth, e["level"]))
                non_replies += not usable(kind)  # a poor reply (replies.SOFT) is still a reply
                if not usable(kind) and len(examples) < 3:
                    examples.append(f"{kind}: {e['prediction']!r}")
    dropped = sum(1 for r in ds.rejects() if r.get("reason") == "empty_prediction")
    m = ds.manifest
    llm = m.get("llm") or {}
    seconds = (m.get("wall") or {}).get("oracle") or m["timings"].get("oracle", 0.0)
    return {"f1": {k: statistics.mean(v) for k, v in sorted(f1.items())},
            "rouge": {k: statistics.mean(v) for k, v in sorted(rouge.items())},
            "events": {k: len(v) for k, v in sorted(f1.items())}, "dialogues": m["counts"]["samples"],
            "non_reply": (non_replies + dropped) / max(1, steps + dropped), "dropped": dropped,
            "examples": examples, "seconds": seconds, "calls": llm.get("calls", 0),
            "predictions": llm.get("predictions", {}), "model": llm.get("model", "?")}


def climbs(means: dict[int, float]) -> bool:
    levels = sorted(means)
    return levels == list(range(6)) and all(means[b] - means[a] >= GAP for a, b in zip(levels, levels[1:]))


def report(name: str, model: str, r: dict) -> None:
    print(f"\n{name} / {model} ({r['model']}): {r['dialogues']} dialogues, oracle stage {r['seconds']:.1f} s, "
          f"{r['calls']} calls, {r['calls'] / max(r['seconds'], 1e-9):.2f} calls/s")
    print("  level   events  token-F1  ROUGE-L")
    for level in r["f1"]:
        print(f"  {level:>5}  {r['events'][level]:>7}  {r['f1'][level]:8.3f}  {r['rouge'][level]:7.3f}")
    print(f"  climbs with gaps >= {GAP}: token-F1 {'yes' if climbs(r['f1']) else 'NO'}, "
          f"ROUGE-L {'yes' if climbs(r['rouge']) else 'NO'}")
    print(f"  non-replies: {r['non_reply']:.1%} of simulated events ({r['dropped']} dropped after every retry); "
          f"attempts: {json.dumps(r['predictions'])}")
    for ex in r["examples"]:
        print(f"    e.g. {ex}")


def over_draws(draws: list[dict]) -> dict:
    """Mean token-F1 per level over the draws, and each level's spread (highest minus lowest draw)."""
    levels = sorted(set.intersection(*(set(d["f1"]) for d in draws)))
    return {"f1_mean": {k: statistics.mean(d["f1"][k] for d in draws) for k in levels},
            "f1_spread": {k: max(d["f1"][k] for d in draws) - min(d["f1"][k] for d in draws) for k in levels},
            "seconds_mean": statistics.mean(d["seconds"] for d in draws),
            "calls_mean": statistics.mean(d["calls"] for d in draws)}


def report_draws(name: str, model: str, r: dict) -> None:
    print(f"\n{name} / {model}: {len(r['draws'])} draws, oracle stage {r['seconds_mean']:.1f} s and "
          f"{r['calls_mean']:.0f} calls on average")
    print("  level  mean token-F1  spread")
    for level, mean in r["f1_mean"].items():
        print(f"  {level:>5}  {mean:13.3f}  {r['f1_spread'][level]:6.3f}")
    print(f"  climbs with gaps >= {GAP} (means): {'yes' if climbs(r['f1_mean']) else 'NO'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / ".oracle-ladder")
    ap.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    ap.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    ap.add_argument("--instances", type=int, default=None, help="model instances (default: one per core)")
    ap.add_argument("--seeds", type=int, default=1, help="draws per run (oracle.seed 0..N-1), averaged per level")
    ap.add_argument("--first-seed", type=int, default=0,
                    help="start the draws at this oracle.seed (more draws beside an earlier run's)")
    args = ap.parse_args()
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the start (others' work slows timings)")
    results = {}
    for name in args.recipes:
        ref, limit = RECIPES[name]
        out = args.out / name
        out.mkdir(parents=True, exist_ok=True)
        for model in args.models:
            draws = []
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                run(recipe_for(ref, model, args.instances, args.out, seed), out, limit, args.out / "cache")
                draws.append(measure(out))
                report(name if args.seeds == 1 else f"{name} (oracle.seed {seed})", model, draws[-1])
            results[name, model] = draws[0] if args.seeds == 1 else {"draws": draws, **over_draws(draws)}
            if args.seeds > 1:
                report_draws(name, model, results[name, model])
    (args.out / "results.json").write_text(json.dumps({f"{k[0]}/{k[1]}": v for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    main()
