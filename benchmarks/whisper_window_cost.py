"""Where one Whisper QA pass spends its CPU, per 30 s window: the floor under issue 32's "cost beyond
the engines".

It speaks the turns of N fixture dialogues with piper's default voice, hears each dialogue's turns
packed as the renderer packs them (`WhisperAligner.transcribe_many`, one thread), and splits each
window's process CPU time into faster-whisper's parts: log-mel features, the encoder (a fixed 30 s
input whatever the speech fills), greedy decoding with timestamps, and the word-timing pass. Then,
on the same windows' encoder outputs, it decodes two windows in one CTranslate2 call against each
alone, and says whether the tokens are the same: what batching windows could save at most.

    python benchmarks/whisper_window_cost.py [--dialogues 12]

Run it on an idle machine: the figures are CPU seconds, but a busy machine still slows them.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kame_data.machine import cpu_description  # noqa: E402
from kame_data.speech.voice import VoiceConfig, open_engine  # noqa: E402
from kame_data.speech.whisper import WhisperAligner, _packs  # noqa: E402
from tests.synthetic import fixture_dialogues  # noqa: E402

PARTS = ("features", "encode", "decode", "words")


def _timed(spent: collections.Counter, key: str, fn):
    def run(*args, **kwargs):
        t = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[key] += time.process_time() - t
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dialogues", type=int, default=12)
    args = ap.parse_args()

    engine = open_engine(VoiceConfig(), threads=1)
    aligner = WhisperAligner(threads=1)
    model = aligner.model
    spent: collections.Counter = collections.Counter()
    encoded: list = []
    model.encode = _timed(spent, "encode", lambda f, _e=model.encode: encoded.append(_e(f)) or encoded[-1])
    model.generate_with_fallback = _timed(spent, "decode", model.generate_with_fallback)
    model.add_word_timestamps = _timed(spent, "words", model.add_word_timestamps)
    cls = type(model.feature_extractor)
    cls.__call__ = _timed(spent, "features", cls.__call__)

    clips = []
    for d in fixture_dialogues(args.dialogues):
        turns = []
        for t in d.dialogue.turns:
            said = engine.synthesize(t.spoken)
            turns.append((np.asarray(said.audio, np.float32) / (32768.0 if said.audio.dtype == np.int16 else 1.0),
                          said.sample_rate))
        clips.append(turns)
    aligner.transcribe_many(clips[0])  # warm-up
    spent.clear()
    encoded.clear()
    audio_s = sum(len(a) / sr for turns in clips for a, sr in turns)
    windows = sum(len(_packs([len(a) / sr for a, sr in turns])) for turns in clips)
    t = time.process_time()
    for turns in clips:
        aligner.transcribe_many(turns)
    total = time.process_time() - t
    print(f"{cpu_description()}; Whisper base int8, one thread; {args.dialogues} dialogues, {audio_s:.0f} s of speech, "
          f"{windows} packed passes, {len(encoded)} encoder windows ({audio_s / (30 * len(encoded)):.0%} full)")
    print(f"{'part':<10} {'CPU s per window':>17} {'share':>7}")
    for k in PARTS:
        print(f"{k:<10} {spent[k] / len(encoded):>17.3f} {spent[k] / total:>7.0%}")
    print(f"{'all':<10} {total / len(encoded):>17.3f}   = {total / audio_s:.4f} core-s per second of speech")

    # Two windows' decoding in one call, on the encoder outputs above.
    import ctranslate2
    from faster_whisper.tokenizer import Tokenizer

    ct2 = model.model
    tokenizer = Tokenizer(model.hf_tokenizer, ct2.is_multilingual, task="transcribe", language="en")
    prompt = model.get_prompt(tokenizer, [], without_timestamps=False)
    options = dict(beam_size=1, max_length=448, return_scores=True, suppress_blank=True, suppress_tokens=[-1])
    outputs = [np.array(e) for e in encoded]
    pairs = [(outputs[i], outputs[i + 1]) for i in range(0, len(outputs) - 1, 2)]
    alone = paired = 0.0
    same = True
    for a, b in pairs:
        t = time.process_time()
        one = [ct2.generate(ctranslate2.StorageView.from_array(x), [prompt], **options)[0] for x in (a, b)]
        alone += time.process_time() - t
        t = time.process_time()
        two = ct2.generate(ctranslate2.StorageView.from_array(np.concatenate([a, b])), [prompt] * 2, **options)
        paired += time.process_time() - t
        same &= all(x.sequences_ids == y.sequences_ids for x, y in zip(one, two))
    print(f"decoding two windows in one call: {paired / (2 * len(pairs)):.3f} CPU s per window against "
          f"{alone / (2 * len(pairs)):.3f} alone (x{alone / paired:.2f}); tokens {'the same' if same else 'DIFFER'}; "
          f"at most {(alone - paired) / (2 * len(pairs)) / (total / len(encoded)):.0%} of a window's cost")


if __name__ == "__main__":
    main()
