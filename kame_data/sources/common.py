"""Helpers shared by the source adapters."""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_NATIVE = 64  # characters of a native id kept as is; ids become file names (`<id>-v0.wav`)


def safe_id(source: str, native: object) -> str:
    """`source-native`, restricted to [A-Za-z0-9_.-] so ids can be used as file names, and
    injective, so distinct rows never become one item (`duplicate_id`).

    A native id that needs no change is kept exactly (row hashes of earlier runs depend on it).
    Otherwise the id is `source-_<cleaned, at most 48 characters>_<12 hex of SHA-256 of the raw
    id>`: the leading `_` is something an unchanged id never starts with (it would have been
    stripped), so a raw id that looks hashed cannot meet a hashed one, and hashed ids differ
    whenever their raw ids do (up to a 48-bit hash collision)."""
    raw = str(native)
    clean = _UNSAFE.sub("_", raw).strip("._")
    if clean == raw and 0 < len(raw) <= MAX_NATIVE:
        return f"{source}-{raw}"
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{source}-_{clean[:48].rstrip('._')}_{digest}" if clean else f"{source}-_{digest}"


def text_id(source: str, text: str) -> str:
    """A stable id for sources without native ids: a hash of the question text."""
    return f"{source}-{hashlib.sha1(text.strip().encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"
