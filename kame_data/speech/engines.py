"""The table of TTS engines: every engine module's `EngineSpec`, by the name recipes use.

Callers (the voice config, the renderer, `kame-data doctor`, `kame-data plan`) read what an
engine is from here and never spell an engine's name; adding an engine is its module plus one
entry below. Importing the engine modules is cheap: each loads its libraries and models only when
an engine is opened.
"""

from __future__ import annotations

from kame_data.speech import coqui_engine, espeak_engine, flite_engine, hibari_engine, kokoro_engine, piper_engine
from kame_data.speech.engine_spec import EngineSpec

# In the order `kame-data doctor` checks them.
ENGINES: dict[str, EngineSpec] = {spec.name: spec for spec in (
    piper_engine.SPEC,
    hibari_engine.SPEC,
    kokoro_engine.SPEC,
    flite_engine.SPEC,
    espeak_engine.SPEC,
    coqui_engine.SPEC,
)}

DEFAULT_ENGINE = piper_engine.SPEC.name  # the engine of a voice that names none


def engine_spec(name: str) -> EngineSpec:
    """The spec of engine `name`; a clear error for a name the table does not have."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown TTS engine {name!r} (available: {', '.join(ENGINES)})") from None


def missing(name: str) -> str | None:
    """Why engine `name` cannot run on this machine (an optional system package it lacks), else None."""
    spec = ENGINES.get(name)
    check = spec.check if spec else None
    return check.missing() if check and check.missing else None


def knobs_of(name: str) -> tuple[str, ...]:
    """The knobs engine `name` reads (none for a name the table does not have)."""
    spec = ENGINES.get(name)
    return spec.knobs if spec else ()
