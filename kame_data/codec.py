"""Records to bytes and back without pickle: checkpoints and records travelling between Ray actors.

A pickle runs whatever code its bytes name, so one planted or damaged file on shared storage
(`--checkpoints s3://…`) could execute code, and a damaged one may load silently with other
content. This codec only rebuilds the record types registered here (the dataclasses of
`records.py`, plus any a step registers for its own records), and every blob carries the SHA-256
of its body, so any changed byte is detected before anything is decoded.

Layout: MAGIC, 32 bytes of SHA-256 over the body, then the body: an 8-byte little-endian length,
a JSON document describing the values, and the raw bytes of every array and bytes value it points
at. JSON keeps floats exact (repr round-trips); arrays keep dtype and shape.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from typing import Any

import numpy as np

from kame_data import records

MAGIC = b"KDREC1\n"
_DIGEST = 32
_HEAD = len(MAGIC) + _DIGEST
# Tags of values JSON cannot hold as they are; a plain dict holding one of these keys is tagged too.
_TAGS = ("$t", "$tuple", "$nd", "$b", "$dict")


class CodecError(ValueError):
    """The bytes are not a record blob this code wrote whole: damaged, truncated, of another
    format, or naming a type that is not a registered record."""


_TYPES: dict[str, type] = {}


def register_record(cls: type) -> type:
    """Let `cls` (a dataclass) travel through checkpoints; usable as a class decorator."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    _TYPES[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


for _cls in (records.FollowUp, records.SourceItem, records.Turn, records.Dialogue, records.Word,
             records.TurnTiming, records.RenderedDialogue, records.OracleEvent, records.Sample, records.Reject):
    register_record(_cls)


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class _Encoder:
    def __init__(self):
        self.buffers: list[bytes] = []
        self.size = 0

    def _buffer(self, data: bytes) -> list[int]:
        self.buffers.append(data)
        at = self.size
        self.size += len(data)
        return [at, len(data)]

    def value(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            name = _type_name(type(v))
            if name not in _TYPES:
                raise TypeError(f"{name} is not a registered record type (codec.register_record)")
            return {"$t": name, "f": {f.name: self.value(getattr(v, f.name)) for f in dataclasses.fields(v)}}
        if isinstance(v, np.ndarray) or isinstance(v, np.generic):
            a = np.asarray(v)
            if a.dtype.hasobject:
                raise TypeError("arrays of Python objects cannot be encoded")
            return {"$nd": [a.dtype.str, list(a.shape), *self._buffer(np.ascontiguousarray(a).tobytes()),
                            isinstance(v, np.generic)]}
        if isinstance(v, (bytes, bytearray, memoryview)):
            return {"$b": self._buffer(bytes(v))}
        if isinstance(v, tuple):
            return {"$tuple": [self.value(x) for x in v]}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            if all(isinstance(k, str) for k in v) and not any(t in v for t in _TAGS):
                return {k: self.value(x) for k, x in v.items()}
            return {"$dict": [[self.value(k), self.value(x)] for k, x in v.items()]}
        raise TypeError(f"cannot encode a {type(v).__name__}")


def encode(obj: Any) -> bytes:
    """`obj` (records, lists, tuples, dicts, numbers, strings, arrays) as one checksummed blob."""
    enc = _Encoder()
    doc = json.dumps(enc.value(obj), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    body = b"".join([struct.pack("<Q", len(doc)), doc, *enc.buffers])
    return MAGIC + hashlib.sha256(body).digest() + body


class _Decoder:
    def __init__(self, data: memoryview):
        self.data = data

    def _slice(self, at: int, n: int) -> memoryview:
        if at < 0 or n < 0 or at + n > len(self.data):
            raise CodecError("a value points outside the blob")
        return self.data[at: at + n]

    def value(self, v: Any) -> Any:
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "$t" in v:
            cls = _TYPES.get(v["$t"])
            if cls is None:
                raise CodecError(f"unknown record type {str(v['$t'])[:80]!r}")
            values = {k: self.value(x) for k, x in v["f"].items()}
            try:
                return cls(**values)
            except TypeError as e:
                raise CodecError(f"{v['$t']}: {e}") from None
        if "$tuple" in v:
            return tuple(self.value(x) for x in v["$tuple"])
        if "$nd" in v:
            dtype, shape, at, n, scalar = v["$nd"]
            dt = np.dtype(dtype)
            if dt.hasobject:
                raise CodecError("object arrays are not accepted")
            a = np.frombuffer(self._slice(at, n), dtype=dt).reshape(shape).copy()
            return a[()] if scalar else a
        if "$b" in v:
            return bytes(self._slice(*v["$b"]))
        if "$dict" in v:
            return {_hashable(self.value(k)): self.value(x) for k, x in v["$dict"]}
        return {k: self.value(x) for k, x in v.items()}


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def decode(blob: bytes) -> Any:
    """The value `encode` was given; CodecError when any byte differs from what it wrote."""
    view = memoryview(blob)
    if len(view) < _HEAD + 8 or bytes(view[: len(MAGIC)]) != MAGIC:
        raise CodecError("not a kame-data record blob (wrong header or too short)")
    body = view[_HEAD:]
    if hashlib.sha256(body).digest() != bytes(view[len(MAGIC): _HEAD]):
        raise CodecError("checksum mismatch: the blob was damaged or changed")
    (n,) = struct.unpack("<Q", body[:8])
    if 8 + n > len(body):
        raise CodecError("truncated blob")
    try:
        doc = json.loads(bytes(body[8: 8 + n]).decode("utf-8"))
        return _Decoder(body[8 + n:]).value(doc)
    except CodecError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, RecursionError) as e:
        raise CodecError(f"unreadable blob: {type(e).__name__}: {e}") from None
