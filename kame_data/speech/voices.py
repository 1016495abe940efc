"""The voice catalogue: named voices, pools of them, and casting.

A recipe names a voice by a catalogue name (`heart-low`), by a mapping (an engine and its voice,
e.g. a piper voice added with `kame-data voices add` or the path of any piper `.onnx`), or a whole
pool by name (`bundled-users`).

The catalogue is data (voices.json beside this module, shipped in the package): voices that run
offline from what `make setup` installs, the two bundled neural voices and speaker variants of them
(Praat "Change gender"), each kept apart by pitch (at least 3 semitones) or timbre from the others
and from the assistant's Joe (median f0 about 90 Hz); the pools; and each role's voice when a
recipe gives none. Being data, it names engines without any Python module outside the engine table
spelling them.

A pool named by its catalogue name leaves out the voices of an optional engine this machine lacks
(flite is a Debian package: a pip-only machine gets the rest of the pool), with a warning that
says which voices and why; a voice named on its own is kept, and its engine's error says what to
install. So the pool a run records is the pool it casts.

Casting is seeded per dialogue: a hash of (seed, dialogue id, role) picks the first voice of the
role's pool by weight (each voice's `weight`, times an even share per `balance` group, e.g. per
sex), and the rest of the pool, in order, are the fallbacks QA may move on to.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import replace
from importlib import resources
from typing import Any, Sequence

from kame_data.speech.engines import missing
from kame_data.speech.voice import VoiceConfig

log = logging.getLogger(__name__)
_CATALOGUE = json.loads(resources.files("kame_data.speech").joinpath("voices.json").read_text("utf-8"))
BUNDLED: dict[str, VoiceConfig] = {v["name"]: VoiceConfig(**v) for v in _CATALOGUE["voices"]}
POOLS: dict[str, tuple[str, ...]] = {name: tuple(members) for name, members in _CATALOGUE["pools"].items()}


def role_default(role: str) -> VoiceConfig | str:
    """The voice (or the name of the pool) a role gets when a recipe names none."""
    value = _CATALOGUE["role_defaults"][role]
    return value if isinstance(value, str) else VoiceConfig(**value)


def resolve(value: Any, role: str) -> tuple[VoiceConfig, ...]:
    """A recipe's voice or pool (a mapping, a catalogue name, a pool name, or a list of these)."""
    if isinstance(value, str) and value in POOLS:
        return available(value)
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    out: list[VoiceConfig] = []
    for v in items:
        if isinstance(v, VoiceConfig):
            out.append(v)
        elif isinstance(v, str):
            if v in POOLS:
                out.extend(available(v))
            elif v in BUNDLED:
                out.append(BUNDLED[v])
            else:
                raise ValueError(f"speak.{role}: no voice or pool named {v!r} (voices: {', '.join(BUNDLED)}; "
                                 f"pools: {', '.join(POOLS)})")
        elif isinstance(v, dict):
            base = BUNDLED[v["name"]] if v.get("name") in BUNDLED and "engine" not in v else None
            voice = replace(base, **{k: x for k, x in v.items() if k != "name"}) if base else VoiceConfig(**v)
            out.extend(_speakers(voice, role))
        else:
            raise ValueError(f"speak.{role}: a voice is a name or a mapping, got {v!r}")
    if not out:
        raise ValueError(f"speak.{role}: the voice pool is empty")
    labels = Counter(v.label for v in dict.fromkeys(out))
    clash = [k for k, n in labels.items() if n > 1]
    if clash:
        raise ValueError(f"speak.{role}: two different voices share the label {clash[0]!r}; give each its own `name`")
    return tuple(dict.fromkeys(out))


_WARNED: set[str] = set()


def available(pool: str) -> tuple[VoiceConfig, ...]:
    """A catalogue pool's voices whose engines this machine has (a warning, once, names the rest)."""
    voices = [BUNDLED[n] for n in POOLS[pool]]
    lacking = {v.label: missing(v.engine) for v in voices if missing(v.engine)}
    if lacking and pool not in _WARNED:
        _WARNED.add(pool)
        log.warning("voice pool %s: leaving out %s: %s", pool, ", ".join(lacking), "; ".join(sorted(set(lacking.values()))))
    return tuple(v for v in voices if v.label not in lacking)


def _speakers(voice: VoiceConfig, role: str) -> list[VoiceConfig]:
    """The voice, its speaker checked against the model; `speaker: "*"`: one voice per speaker of a
    multi-speaker model, in the model's order (a named voice's label gains `-SPEAKER`)."""
    if not voice.speaker:
        return [voice]
    try:
        speakers = voice.spec.speakers(voice.voice) if voice.spec.speakers else ()
    except RuntimeError as e:
        raise ValueError(f"speak.{role}: {e}") from None
    where = f"speak.{role}: {voice.engine}:{voice.voice}"
    if not speakers:
        raise ValueError(f"{where} has one speaker; drop `speaker: {voice.speaker}`")
    if voice.speaker == "*":
        return [replace(voice, speaker=s, name=f"{voice.name}-{s}" if voice.name else "") for s in speakers]
    if voice.speaker not in speakers:
        some = ", ".join(speakers[:8]) + (", ..." if len(speakers) > 8 else "")
        raise ValueError(f"{where} has no speaker {voice.speaker!r} ({len(speakers)} speakers: {some})")
    return [voice]


def _weights(pool: Sequence[VoiceConfig], balance: str) -> list[float]:
    weights = [max(v.weight, 0.0) for v in pool]
    if balance:
        groups = Counter(getattr(v, balance) for v in pool)
        weights = [w / groups[getattr(v, balance)] for w, v in zip(weights, pool)]
    if sum(weights) <= 0:
        raise ValueError("every voice of the pool has weight 0")
    return weights


def cast_shares(pool: Sequence[VoiceConfig], balance: str = "") -> dict[VoiceConfig, float]:
    """Each voice's expected share of the dialogues it is drawn first for (what `cast` draws)."""
    weights = _weights(list(pool), balance)
    return {v: w / sum(weights) for v, w in zip(pool, weights)}


def cast(pool: Sequence[VoiceConfig], key: str, balance: str = "") -> list[VoiceConfig]:
    """The pool ordered for one dialogue: the voice drawn for it first (by weight), then the rest.

    `key` is hashed to a number in [0, 1); `balance` ("sex", "accent" or "") gives every group of
    that tag the same total chance, however many voices it has."""
    pool = list(pool)
    weights = _weights(pool, balance)
    total = sum(weights)
    u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2 ** 64 * total
    first = len(pool) - 1
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if u < acc:
            first = i
            break
    return [pool[(first + k) % len(pool)] for k in range(len(pool))]
