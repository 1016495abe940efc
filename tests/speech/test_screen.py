"""Voice screening (speech/screen.py): a voice and its variants share the base engine's synthesis,
a voice's sentences share one Whisper window, and a sentence misheard in company is heard alone."""

from __future__ import annotations

import pytest

from kame_data.speech.screen import ScreenConfig, screening_groups, voice_wers
from kame_data.speech.voice import open_engine
from kame_data.speech.voices import BUNDLED
from kame_data.speech.whisper import WhisperAligner


def test_groups_keep_variants_with_their_base_and_start_with_the_costliest():
    voices = [BUNDLED[k] for k in ("joe", "heart", "joe-f", "kumo", "heart-m", "heart-low")]
    groups = screening_groups(voices)
    assert sorted(i for g in groups for i in g) == list(range(len(voices)))  # every voice once
    labels = [sorted(voices[i].label for i in g) for g in groups]
    assert labels[0] == ["kumo"]  # Kokoro's synthesis costs most: its group goes first
    assert ["joe", "joe-f"] in labels and ["heart", "heart-m"] in labels  # variants with their base
    assert ["heart-low"] in labels  # an engine knob (hibari's pitch) makes another base voice


class _Counting:
    """A real engine whose syntheses are counted."""

    def __init__(self, engine):
        self.engine, self.texts = engine, []

    def synthesize(self, text):
        self.texts.append(text)
        return self.engine.synthesize(text)


@pytest.fixture(scope="module")
def aligner():
    return WhisperAligner(1)


def _screen(aligner, engines, cfg, mishear=None):
    """voice_wers with the base syntheses and the Whisper passes counted; `mishear(clips, heard)`
    may spoil what a packed pass heard."""
    passes, real, real_many = [], aligner.transcribe, aligner.transcribe_many

    def many(clips):
        heard = real_many(clips)
        return mishear(clips, heard) if mishear else heard

    aligner.transcribe = lambda *a: passes.append(1) or real(*a)
    aligner.transcribe_many = many
    try:
        return voice_wers(engines, aligner, cfg), len(passes)
    finally:
        del aligner.transcribe, aligner.transcribe_many


def test_a_variant_shares_its_base_synthesis_and_their_sentences_a_whisper_window(aligner):
    joe, joe_f = open_engine(BUNDLED["joe"], 1), open_engine(BUNDLED["joe-f"], 1)
    counted = _Counting(joe_f.base)
    joe_f.base = counted
    try:
        both, passes = _screen(aligner, [counted, joe_f], ScreenConfig(sentences=3))
    finally:
        joe_f.base = counted.engine
    assert len(counted.texts) == len(set(counted.texts))  # each sentence synthesised once for both voices
    assert both == [0.0, 0.0], both  # the bundled voices are heard word for word
    # the first two sentences agree, so the third cannot move the median: it is never spoken, and
    # both voices' two sentences share one Whisper pass
    assert len(counted.texts) == 2 and passes == 1
    # sharing the synthesis changes nothing: the variant screened alone gets the same figure
    assert voice_wers([joe_f], aligner, ScreenConfig(sentences=3)) == both[1:]


def test_the_rest_is_heard_when_it_can_move_the_median(aligner):
    joe = _Counting(open_engine(BUNDLED["joe"], 1))

    def drop_a_word(clips, heard):  # the first sentence of a pack loses its last word
        return [heard[0][:-1]] + heard[1:] if len(clips) > 1 else heard

    wers, passes = _screen(aligner, [joe], ScreenConfig(sentences=3, max_wer=0.05), drop_a_word)
    assert len(joe.texts) == 3 and passes == 2  # two sentences in one pass, then the third alone
    # the median of (about 0.1, 0, 0) passes: the sentence above the bound is not heard again alone
    assert wers == [0.0]


def test_a_sentence_misheard_in_company_is_heard_again_alone(aligner):
    """A pack Whisper gets wrong (seen for real: one "Mm-hmm" made it write "mmmm…" for a whole
    window) must not fail a voice whose sentences alone are heard right."""
    joe = open_engine(BUNDLED["joe"], 1)
    wers, passes = _screen(aligner, [joe], ScreenConfig(sentences=3, max_wer=0.05),
                           lambda clips, heard: [[] for _ in clips])  # the whole pack heard as nothing
    assert wers == [0.0] and passes == 3  # the pack, then each of its two sentences alone


def test_the_median_is_known_once_one_value_holds_more_than_half():
    from hypothesis import given, strategies as st

    from kame_data.speech.screen import _median, _median_known

    @given(st.lists(st.sampled_from([0.0, 0.1, 0.25, 1.0]), min_size=1, max_size=9), st.data())
    def check(all_wers, data):
        n = len(all_wers)
        k = data.draw(st.integers(1, n))
        heard = all_wers[:k]
        if _median_known(heard, n):  # then no rest can move the median
            import numpy as np

            assert np.median(all_wers) == _median(heard, n)

    check()
