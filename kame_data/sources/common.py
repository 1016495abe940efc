"""Helpers shared by the source adapters."""

from __future__ import annotations

import hashlib
import re


def safe_id(source: str, native: object) -> str:
    """`source-native`, restricted to [A-Za-z0-9_.-] so ids can be used as file names."""
    native = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(native)).strip("._") or "x"
    return f"{source}-{native}"


def text_id(source: str, text: str) -> str:
    """A stable id for sources without native ids: a hash of the question text."""
    return f"{source}-{hashlib.sha1(text.strip().encode('utf-8')).hexdigest()[:12]}"
