"""The voice catalogue: named voices, pools of them, where downloaded voices live, and casting.

A recipe names a voice by a catalogue name (`heart-low`), by a mapping (`{engine: piper, voice:
en_US-amy-medium}` or the path of any piper `.onnx`), or a whole pool by name (`bundled-users`).
Piper voices a user downloads once go to the voice cache (`kame-data voices add`), so a recipe can
name them; nothing is ever downloaded at run time.

Casting is seeded per dialogue: a hash of (seed, dialogue id, role) picks the first voice of the
role's pool by weight (each voice's `weight`, times an even share per `balance` group, e.g. per
sex), and the rest of the pool, in order, are the fallbacks QA may move on to.
"""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from kame_data.atomic import atomic_path
from kame_data.speech.engines import VoiceConfig

# Voices that run offline from what `make setup` installs: the two bundled neural voices and
# speaker variants of them (Praat "Change gender"), each kept apart by pitch (at least 3
# semitones) or timbre from the others and from the assistant's Joe (median f0 about 90 Hz).
BUNDLED: dict[str, VoiceConfig] = {v.name: v for v in (
    VoiceConfig("piper", "joe", name="joe", sex="male", accent="us"),
    VoiceConfig("hibari", "heart", name="heart", sex="female", accent="us"),
    VoiceConfig("hibari", "heart", name="heart-low", formant_shift=0.93, pitch_median=155, speed=0.94,
                sex="female", accent="us"),
    VoiceConfig("hibari", "heart", name="heart-high", formant_shift=1.08, pitch_median=250, speed=1.05,
                sex="female", accent="us"),
    VoiceConfig("hibari", "heart", name="heart-m", formant_shift=0.86, pitch_median=115, sex="male", accent="us"),
    VoiceConfig("piper", "joe", name="joe-f", formant_shift=1.17, pitch_median=208, sex="female", accent="us"),
    VoiceConfig("piper", "joe", name="joe-light", formant_shift=1.08, pitch_median=147, length_scale=0.92,
                sex="male", accent="us"),
    VoiceConfig("piper", "joe", name="joe-mid", formant_shift=1.02, pitch_median=122, length_scale=0.95,
                sex="male", accent="us"),
)}
POOLS: dict[str, tuple[str, ...]] = {
    "assistant": ("joe",),  # one consistent voice: the model's own
    "bundled-users": ("heart", "heart-low", "heart-high", "heart-m", "joe-f", "joe-light", "joe-mid"),
}


def voice_cache() -> Path:
    """Where voices a user added live: KAME_DATA_CACHE_DIR (else ~/.cache/kame-data)/voices."""
    from kame_data.speech.whisper import cache_root

    return cache_root() / "voices"


def cached_piper_voices() -> list[str]:
    folder = voice_cache() / "piper"
    return sorted(p.name[: -len(".onnx")] for p in folder.glob("*.onnx")) if folder.is_dir() else []


def piper_files(name: str) -> tuple[Path, Path]:
    """(model, config) of a piper voice: a path to an `.onnx` (config `<model>.json` or `<stem>.json`
    beside it), or the name of a voice in the voice cache."""
    path = Path(name).expanduser()
    if path.suffix != ".onnx":
        path = voice_cache() / "piper" / f"{name}.onnx"
    if not path.is_file():
        known = ", ".join(cached_piper_voices()) or "none yet"
        raise RuntimeError(f"piper voice {name!r} not found: give the path of a local .onnx voice, 'joe', or the "
                           f"name of one added with `kame-data voices add` (in the cache: {known})")
    for config in (Path(str(path) + ".json"), path.with_suffix(".json")):
        if config.is_file():
            return path, config
    raise RuntimeError(f"piper voice {path}: its config ({path.name}.json) is missing beside it")


def add_piper_voice(model: str | Path, name: str | None = None) -> Path:
    """Copy a downloaded piper voice (`.onnx` plus its `.json`) into the voice cache, whole or not at all."""
    src, config = piper_files(str(Path(model).expanduser().resolve()))
    name = name or src.stem
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"voice name {name!r}: use a plain file name")
    dest = voice_cache() / "piper" / f"{name}.onnx"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(Path(str(dest) + ".json")) as tmp:
        shutil.copyfile(config, tmp)
    with atomic_path(dest) as tmp:
        shutil.copyfile(src, tmp)
    return dest


def resolve(value: Any, role: str) -> tuple[VoiceConfig, ...]:
    """A recipe's voice or pool (a mapping, a catalogue name, a pool name, or a list of these)."""
    if isinstance(value, str) and value in POOLS:
        return tuple(BUNDLED[n] for n in POOLS[value])
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    out: list[VoiceConfig] = []
    for v in items:
        if isinstance(v, VoiceConfig):
            out.append(v)
        elif isinstance(v, str):
            if v in POOLS:
                out.extend(BUNDLED[n] for n in POOLS[v])
            elif v in BUNDLED:
                out.append(BUNDLED[v])
            else:
                raise ValueError(f"speak.{role}: no voice or pool named {v!r} (voices: {', '.join(BUNDLED)}; "
                                 f"pools: {', '.join(POOLS)})")
        elif isinstance(v, dict):
            base = BUNDLED[v["name"]] if v.get("name") in BUNDLED and "engine" not in v else None
            out.append(replace(base, **{k: x for k, x in v.items() if k != "name"}) if base else VoiceConfig(**v))
        else:
            raise ValueError(f"speak.{role}: a voice is a name or a mapping, got {v!r}")
    if not out:
        raise ValueError(f"speak.{role}: the voice pool is empty")
    labels = Counter(v.label for v in dict.fromkeys(out))
    clash = [k for k, n in labels.items() if n > 1]
    if clash:
        raise ValueError(f"speak.{role}: two different voices share the label {clash[0]!r}; give each its own `name`")
    return tuple(dict.fromkeys(out))


def cast(pool: Sequence[VoiceConfig], key: str, balance: str = "") -> list[VoiceConfig]:
    """The pool ordered for one dialogue: the voice drawn for it first (by weight), then the rest.

    `key` is hashed to a number in [0, 1); `balance` ("sex", "accent" or "") gives every group of
    that tag the same total chance, however many voices it has."""
    pool = list(pool)
    weights = [max(v.weight, 0.0) for v in pool]
    if balance:
        groups = Counter(getattr(v, balance) for v in pool)
        weights = [w / groups[getattr(v, balance)] for w, v in zip(weights, pool)]
    total = sum(weights)
    if total <= 0:
        raise ValueError("every voice of the pool has weight 0")
    u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2 ** 64 * total
    first = len(pool) - 1
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if u < acc:
            first = i
            break
    return [pool[(first + k) % len(pool)] for k in range(len(pool))]
