"""The trainer's errors and its optional dependencies, in a leaf module: every part of the trainer
imports them from here, so none imports the package that imports it (no circle through __init__)."""

from __future__ import annotations

import importlib.util

INSTALL_HINT = "pip install 'kame-data[train]' && pip install --no-deps moshi==0.2.13"


class TrainError(RuntimeError):
    """Training cannot start or go on; the message says why and what to change."""


class TrainDependencyError(ImportError):
    """PyTorch, moshi or sentencepiece is missing."""


def missing_dependencies() -> list[str]:
    """Top-level modules the trainer needs that cannot be imported here."""
    return [m for m in ("torch", "moshi", "sentencepiece", "einops", "safetensors")
            if importlib.util.find_spec(m) is None]


def require() -> None:
    """Raise `TrainDependencyError` naming the missing modules and the install command."""
    missing = missing_dependencies()
    if missing:
        raise TrainDependencyError(
            f"training needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed. "
            f"Install the train extra with: {INSTALL_HINT}  (moshi 0.2.13 pins torch<2.10 and "
            "huggingface-hub<1.0, which conflict with this package's datasets; its training code runs "
            "without those pins, so it is installed without its dependencies)")
