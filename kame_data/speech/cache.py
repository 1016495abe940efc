"""Where kame-data keeps what it derives or assembles on this machine: the Whisper model, voices a
user added, voice-screening results, simulated rooms.

A leaf: engines, the aligner and the catalogue all find their folders here, so none of them has to
import another to learn where the cache is.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """KAME_DATA_CACHE_DIR, else $XDG_CACHE_HOME/kame-data, else ~/.cache/kame-data."""
    root = os.environ.get("KAME_DATA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kame-data")
    return Path(root)


def voice_cache() -> Path:
    """Where voices a user added live (`kame-data voices add`): one folder per engine below it."""
    return cache_root() / "voices"
