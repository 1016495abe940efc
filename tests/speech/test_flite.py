"""The flite engine (speech/flite_engine.py) on the real library, and a default pool on a machine
without it (speech/voices.py `available`)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from kame_data.speech import voices
from kame_data.speech.flite_engine import VOICES, missing
from kame_data.speech.voice import VoiceConfig, open_engine
from kame_data.text import spoken_tokens, to_spoken

# CI installs the Debian package (.ci/run), as `make setup` does where it may; a pip-only machine has no flite
needs_flite = pytest.mark.skipif(missing() is not None, reason=str(missing()))


@needs_flite
@pytest.mark.parametrize("voice", ["awb", "rms", "slt", "kal16"])
def test_flite_speaks_at_24_khz_and_times_every_word_itself(voice):
    text = to_spoken("Janet sells 16 duck eggs a day for $2 each. Is it A, Venus; or B, Mars? Okay.")
    syn = open_engine(VoiceConfig(engine="flite", voice=voice), 1).synthesize(text)
    duration = len(syn.audio) / syn.sample_rate
    words = [w for w, _ in spoken_tokens(text)]
    assert syn.sample_rate == 24000 and syn.audio.dtype == np.float32 and 3.0 < duration < 15.0
    assert len(syn.spans) == len(words) and all(a is not None and b is not None for a, b in syn.spans)
    starts = [a for a, _ in syn.spans]
    assert starts == sorted(starts) and all(0 <= a < b <= duration + 1e-6 for a, b in syn.spans)
    assert syn.spans[0][0] < 0.1 and duration - syn.spans[-1][1] < 0.15  # flite's lead-in silence trimmed
    gaps = [b[0] - a[1] for a, b in zip(syn.spans, syn.spans[1:])]
    assert gaps[words.index("each")] > 0.05 and gaps[words.index("each") + 1] < 0.05  # a sentence break, no pause inside a word
    assert VoiceConfig(engine="flite", voice=voice).timed


@needs_flite
def test_flite_is_deterministic_and_its_speed_knob_sets_the_tempo():
    text = to_spoken("Which planet is known as the red planet?")
    a = open_engine(VoiceConfig(engine="flite", voice="slt"), 1).synthesize(text)
    b = open_engine(VoiceConfig(engine="flite", voice="slt"), 1).synthesize(text)
    fast = open_engine(VoiceConfig(engine="flite", voice="slt", speed=1.3), 1).synthesize(text)
    assert np.array_equal(a.audio, b.audio) and a.spans == b.spans
    assert len(fast.audio) < 0.85 * len(a.audio)


def test_flite_knows_its_voices_and_refuses_others():
    assert set(VOICES) >= {"awb", "rms", "slt", "kal16"}
    if missing() is None:
        with pytest.raises(RuntimeError, match="no voice 'joe'"):
            open_engine(VoiceConfig(engine="flite", voice="joe"), 1)
    else:
        with pytest.raises(RuntimeError, match="apt-get install flite"):
            open_engine(VoiceConfig(engine="flite", voice="slt"), 1)


def test_a_default_pool_without_flite_keeps_the_rest_and_says_what_is_missing(monkeypatch, caplog):
    monkeypatch.setattr(voices, "missing", lambda engine: "flite is not installed" if engine == "flite" else None)
    monkeypatch.setattr(voices, "_WARNED", set())
    pool = voices.POOLS["users"]
    assert any(voices.BUNDLED[n].engine == "flite" for n in pool)
    with caplog.at_level(logging.WARNING, logger="kame_data.speech.voices"):
        kept = voices.resolve("users", "user")
    assert [v.label for v in kept] == [n for n in pool if voices.BUNDLED[n].engine != "flite"]
    lost = [n for n in pool if voices.BUNDLED[n].engine == "flite"]
    assert f"leaving out {', '.join(lost)}: flite is not installed" in caplog.text
    # a flite voice named on its own stays: its engine's error says what to install
    assert [v.label for v in voices.resolve(["slt"], "user")] == ["slt"]


def test_the_doctor_skips_flite_where_the_package_is_missing(monkeypatch):
    from dataclasses import replace

    from kame_data import doctor
    from kame_data.speech.engines import ENGINES

    spec = ENGINES["flite"]
    assert spec.check.optional and [c for c in doctor.CHECKS if c.engine == "flite"][0].optional
    monkeypatch.setitem(ENGINES, "flite", replace(spec, check=replace(spec.check, missing=lambda: "flite is not installed")))
    with pytest.raises(doctor.Skip, match="flite is not installed"):
        doctor.check_engine({"engine": "flite"})
