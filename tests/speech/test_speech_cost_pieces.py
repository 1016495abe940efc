"""What the speech path does less of (issue 32), checked against what it did: DNSMOS without the
P.808 pass the reference package also runs (the same scores on a clip of one window), windows that
cover every turn, Whisper hearing several turns in one pass (the same words as heard alone), and
the per-piece CPU accounting benchmarks/speech_cost.py reads."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kame_data.speech.quality import DNSMOS_SECONDS, VAD_RATE, dnsmos_windows
from kame_data.speech.whisper import PACK_GAP, PACK_SECONDS, _packs


@given(st.integers(1, 60 * VAD_RATE), st.floats(0.5, 9.01))
def test_dnsmos_windows_cover_the_turn_and_stay_inside_it(n, hop):
    size = int(DNSMOS_SECONDS * VAD_RATE)
    starts = dnsmos_windows(n, hop)
    if n <= size:
        assert starts == [0]
        return
    assert starts[0] == 0 and starts[-1] + size == n  # the first and last window reach the ends
    assert all(0 <= s <= n - size for s in starts)
    assert all(b - a <= int(hop * VAD_RATE) for a, b in zip(starts, starts[1:]))  # no stretch left out


@given(st.lists(st.floats(0.1, 40.0), max_size=12))
def test_packs_keep_order_and_fit_a_window(durations):
    groups = _packs(durations)
    assert [i for g in groups for i in g] == list(range(len(durations)))
    for g in groups:
        total = sum(durations[i] for i in g) + PACK_GAP * (len(g) - 1)
        assert len(g) == 1 or total <= PACK_SECONDS


@pytest.fixture(scope="module")
def joe():
    from kame_data.speech.voice import VoiceConfig, open_engine

    return open_engine(VoiceConfig(engine="piper", voice="joe"), 1)


def test_dnsmos_of_one_window_is_the_reference_packages(joe):
    from speechmos import dnsmos

    from kame_data.audio import resample
    from kame_data.speech.quality import _load_dnsmos, dnsmos_scores

    syn = joe.synthesize("A store sells pencils at two dollars each, and a notebook costs three dollars more.")
    clip = np.clip(resample(syn.audio, syn.sample_rate, VAD_RATE), -1, 1)
    assert len(clip) < DNSMOS_SECONDS * VAD_RATE
    ours = dnsmos_scores(_load_dnsmos(), clip, 9.01)
    ref = dnsmos.run(clip.astype(np.float64), VAD_RATE)
    assert ours == {"sig": pytest.approx(ref["sig_mos"], abs=1e-9), "bak": pytest.approx(ref["bak_mos"], abs=1e-9),
                    "ovrl": pytest.approx(ref["ovrl_mos"], abs=1e-9)}
    assert 1.0 <= ours["ovrl"] <= 5.0


@pytest.mark.slow  # over five seconds (tests/README.md)
def test_turns_heard_together_are_heard_as_alone(joe):
    from kame_data.speech.whisper import WhisperAligner, normalise_words, transcript

    aligner = WhisperAligner(1)
    texts = ["How many eggs does Janet sell at the market every day?", "She sells nine of them.",
             "The answer is B, the mitochondria.", "Okay, so she bakes muffins with four of them."]
    clips = [(s.audio, s.sample_rate) for s in (joe.synthesize(t) for t in texts)]
    together = aligner.transcribe_many(clips)
    alone = [aligner.transcribe(*c) for c in clips]
    assert [normalise_words(transcript(h)) for h in together] == [normalise_words(transcript(h)) for h in alone]
    for heard, (audio, sr) in zip(together, clips):  # times relative to each clip, inside it
        assert heard and all(0.0 <= w.start <= w.end <= len(audio) / sr for w in heard)
        starts = [w.start for w in heard]
        assert starts == sorted(starts)


def test_pieces_are_counted_only_when_asked(tmp_path, monkeypatch):
    from kame_data import costs

    with costs.piece("nothing"):
        sum(range(1000))
    costs.flush()
    assert not list(tmp_path.glob("costs-*.json"))
    monkeypatch.setenv(costs.ENV, str(tmp_path))
    with costs.piece("busy"):
        sum(i * i for i in range(300_000))
    costs.flush()
    files = list(tmp_path.glob("costs-*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["calls"]["busy"] == 1
    assert costs.read(tmp_path)["busy"] > 0
