"""The folder where kame-data keeps what it derives or assembles on this machine (the LLM answer
cache, the Whisper model, re-encoded model weights, voices, screening results, rooms).

A leaf below every package, so that `llm` and `speech` find the same folder without importing
each other.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """KAME_DATA_CACHE_DIR, else $XDG_CACHE_HOME/kame-data, else ~/.cache/kame-data."""
    root = os.environ.get("KAME_DATA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kame-data")
    return Path(root)
