"""Where kame-data keeps what it derives or assembles on this machine: the Whisper model, voices a
user added, voice-screening results, simulated rooms.

A leaf: engines, the aligner and the catalogue all find their folders here, so none of them has to
import another to learn where the cache is.
"""

from __future__ import annotations

from pathlib import Path

from kame_data.user_cache import cache_root

__all__ = ["cache_root", "voice_cache"]


def voice_cache() -> Path:
    """Where voices a user added live (`kame-data voices add`): one folder per engine below it."""
    return cache_root() / "voices"
