"""The normaliser and the template script builder over a million generated inputs: no exception,
no hang, and every output spoken text (letters, single spaces, , . ; : ? ! and apostrophes inside
words: `kame_data.text.unspoken`).

Texts and source items come from the generators of tests/text_strategies.py (the ones the suite's
fixed-seed property tests draw through hypothesis), driven here by `random.Random` for speed, one
seed per chunk so every run tries the same inputs. Each text goes through `to_spoken`; each item
through `script_item` for two variants under four script configurations in turn (the default,
`mmlu_options: all`, `open`, and 40 options with follow-up questions), and must give a Dialogue
whose turns are spoken text or a Reject with a reason. An input that runs past `--hang-seconds`
counts as an exception.

    nice -n 10 python benchmarks/fuzz_text.py [--texts 1000000] [--items 10000] [--workers N] [--seed 0]

Prints progress, then: inputs tried, exceptions (the first few, with their input), outputs that
are not spoken text, the slowest input and the wall time. Exits 1 if there was any exception or
violation.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kame_data.records import Dialogue, Reject  # noqa: E402
from kame_data.script.config import ScriptConfig  # noqa: E402
from kame_data.script.template import script_item  # noqa: E402
from kame_data.text import to_spoken, unspoken  # noqa: E402
from tests.text_strategies import RandomChooser, source_item, text  # noqa: E402

CONFIGS = (ScriptConfig(), ScriptConfig(mmlu_options="all"), ScriptConfig(mmlu_options="open"),
           ScriptConfig(max_options=40, followup_rate=0.5))
EXAMPLES = 5  # kept per kind of finding and per chunk


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang("ran past --hang-seconds")


def _where(e: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "kame_data" in f.filename]
    return " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames[-3:]))


def _check_text(value: str) -> str:
    spoken = to_spoken(value)
    problem = unspoken(spoken)
    return f"{problem} in {spoken[:120]!r}" if problem else ""


def _check_item(item, k: int) -> str:
    cfg = CONFIGS[k % len(CONFIGS)]
    for variant in range(2):
        out = script_item(item, variant, cfg, 0)
        if isinstance(out, Reject):
            if not out.reason:
                return "a reject without a reason"
        elif isinstance(out, Dialogue):
            for turn in out.turns:
                if unspoken(turn.spoken):
                    return f"turn {turn.role}: {unspoken(turn.spoken)} in {turn.spoken[:120]!r}"
        else:
            return f"neither a Dialogue nor a Reject: {type(out).__name__}"
    return ""


def run_chunk(task: tuple[str, int, int, int, float]) -> dict:
    """One chunk of inputs of one kind, from its own seed; counts and the first examples."""
    kind, seed, chunk, size, hang_seconds = task
    chooser = RandomChooser(random.Random(f"{seed}:{kind}:{chunk}"))
    signal.signal(signal.SIGALRM, _alarm)
    found = {"kind": kind, "tried": 0, "exceptions": 0, "violations": 0, "examples": [], "slowest": (0.0, ""),
             "sites": Counter()}
    for k in range(size):
        value = text(chooser) if kind == "text" else source_item(chooser)
        start = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, hang_seconds)
        try:
            problem = _check_text(value) if kind == "text" else _check_item(value, k)
            error = None
        except Exception as e:  # noqa: BLE001 - every exception is a finding
            problem, error = "", e
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        took = time.perf_counter() - start
        found["tried"] += 1
        if took > found["slowest"][0]:
            found["slowest"] = (took, repr(value)[:200])
        if error is not None:
            found["exceptions"] += 1
            found["sites"][f"{type(error).__name__} at {_where(error)}"] += 1
            what = f"{type(error).__name__}: {str(error)[:160]} at {_where(error)}"
        elif problem:
            found["violations"] += 1
            what = problem
        else:
            continue
        if len(found["examples"]) < EXAMPLES:
            found["examples"].append((kind, "exception" if error is not None else "violation", what,
                                      repr(value)[:400]))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=1_000_000, help="texts through to_spoken")
    ap.add_argument("--items", type=int, default=10_000, help="source items through the script builder")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hang-seconds", type=float, default=30.0, help="one input's limit before it counts as a hang")
    args = ap.parse_args()

    text_chunk, item_chunk = 5000, 50
    tasks = [("text", args.seed, c, min(text_chunk, args.texts - c * text_chunk), args.hang_seconds)
             for c in range(-(-args.texts // text_chunk))]
    items = [("item", args.seed, c, min(item_chunk, args.items - c * item_chunk), args.hang_seconds)
             for c in range(-(-args.items // item_chunk))]
    # interleaved, so progress moves on both kinds
    every = max(1, len(tasks) // max(1, len(items)))
    order = []
    for i, t in enumerate(tasks):
        order.append(t)
        if i % every == every - 1 and items:
            order.append(items.pop(0))
    order += items

    totals = {"text": 0, "item": 0}
    exceptions = violations = 0
    examples: list[tuple] = []
    sites: Counter[str] = Counter()
    slowest = {"text": (0.0, ""), "item": (0.0, "")}
    start = time.perf_counter()
    last = 0.0
    print(f"fuzz_text: {args.texts:,} texts and {args.items:,} items on {args.workers} processes (seed {args.seed})",
          flush=True)
    with mp.Pool(args.workers) as pool:
        for found in pool.imap_unordered(run_chunk, order):
            kind = found["kind"]
            totals[kind] += found["tried"]
            exceptions += found["exceptions"]
            violations += found["violations"]
            examples += found["examples"][: max(0, 3 * EXAMPLES - len(examples))]
            sites.update(found["sites"])
            slowest[kind] = max(slowest[kind], found["slowest"])
            now = time.perf_counter() - start
            if now - last >= 15 or sum(totals.values()) == args.texts + args.items:
                last = now
                done = (totals["text"] + 100 * totals["item"]) / max(1, args.texts + 100 * args.items)
                print(f"[{done:4.0%}] texts {totals['text']:,}/{args.texts:,}  items {totals['item']:,}/{args.items:,}"
                      f"  exceptions {exceptions}  violations {violations}  {now:.0f} s", flush=True)
    wall = time.perf_counter() - start
    print()
    print(f"inputs tried:  {totals['text']:,} texts + {totals['item']:,} items ({2 * totals['item']:,} dialogues)"
          f" = {totals['text'] + totals['item']:,}")
    print(f"exceptions:    {exceptions}")
    for site, n in sites.most_common(10):
        print(f"  {n:8,}  {site}")
    print(f"violations:    {violations} (outputs that are not spoken text)")
    print(f"wall time:     {wall:.1f} s on {args.workers} processes"
          f" ({totals['text'] / wall:,.0f} texts/s and {totals['item'] / wall:,.1f} items/s together)")
    print(f"slowest text:  {slowest['text'][0]:.3f} s  {slowest['text'][1][:120]}")
    print(f"slowest item:  {slowest['item'][0]:.3f} s")
    for kind, finding, what, value in examples:
        print(f"  {kind} {finding}: {what}\n    input: {value}")
    sys.exit(1 if exceptions or violations else 0)


if __name__ == "__main__":
    main()
