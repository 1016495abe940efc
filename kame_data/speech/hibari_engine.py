"""hibari: a small neural voice (bundled female US voice `heart`, 24 kHz), timed by the model itself.

hibari has no alignment API, but its ONNX graph computes each input token's duration: the tensor
`/Clip_output_0`, in frames of 600 samples that sum to the audio exactly (STACK.md). The voice file
is copied once with that tensor as an extra output; the frame parameters go through hibari's own
DSP as its `Hibari.__call__` does (the same sentence split, phonemes and noise seed, so the audio is
bit-identical), and the text's words are mapped onto the phoneme timeline as Kokoro's are
(speech/timing.py), so no Whisper pass is needed to time a hibari voice. Only the bundled voice is
allowed, because hibari downloads any other voice on first use and nothing may be downloaded at run
time.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import zlib
from pathlib import Path

import numpy as np

from kame_data.accelerator import onnx_providers
from kame_data.speech.cache import cache_root
from kame_data.speech.engine_spec import EngineCheck, EngineSpec, Tempo
from kame_data.speech.synthesis import Synthesis
from kame_data.speech.timing import NOT_SOUNDS, align_phonemes, phoneme_sounds, write_timed_model
from kame_data.text import spoken_tokens

log = logging.getLogger(__name__)

DURATIONS = "/Clip_output_0"
FRAME = 600  # samples per duration unit (two of hibari's 300-sample hops)


@functools.cache
def timed_model(source: Path) -> Path:
    """The voice file with its duration tensor as an output, written once per voice file (keyed by
    its sha256, read once per process; atomically, so parallel workers are safe)."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    out = cache_root() / "hibari" / f"{source.stem}-{digest}-timed.onnx"
    if out.is_file():
        return out
    import onnx

    write_timed_model(onnx.load(str(source)), DURATIONS, out)
    log.info("wrote the timed hibari model %s", out)
    return out


class HibariEngine:
    def __init__(self, voice: str, threads: int | None = None, *, speed: float):
        try:
            import onnxruntime as ort
            from hibari import Hibari
            from hibari.voices import VOICES, voice_path
        except ImportError as e:
            raise RuntimeError("hibari voices need `pip install hibari-tts` (kame-data[tts])") from e
        if voice not in VOICES:
            raise RuntimeError(f"hibari has no voice {voice!r}; the bundled one is 'heart'")
        try:
            model = Path(voice_path(voice, download_missing=False))
        except FileNotFoundError as e:
            raise RuntimeError(f"hibari voice {voice!r} is not bundled and would be downloaded; "
                               "use 'heart' (or copy the voice file into hibari's cache by hand)") from e
        self.tts = Hibari(voice=voice, model=str(model), threads=threads or 1)  # its G2P, vocabulary and text split
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = threads or 1
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(timed_model(model)), opts, providers=onnx_providers())
        self.speed = speed
        self.sample_rate = self.tts.sample_rate
        self._phonemes: dict[str, list[str]] = {}

    def _word_phonemes(self, word: str) -> list[str]:
        if word not in self._phonemes:
            self._phonemes[word] = [c for c in self.tts.g2p(word) if c in self.tts.vocab and c not in NOT_SOUNDS]
        return self._phonemes[word]

    def synthesize(self, text: str) -> Synthesis:
        from hibari import dsp

        # The noise seed is a hash of the text, so the same turn sounds the same in any process.
        rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
        pieces, sounds, at = [], [], 0
        for phonemes in self.tts.phonemize(text):
            ids = self.tts.ids(phonemes)
            if len(ids) < 3:
                continue
            *params, frames = self.session.run(None, {"ids": np.asarray([ids], np.int64),
                                                      "speed": np.asarray([self.speed], np.float32)})
            audio = dsp.synth(*(p[0] for p in params), rng)
            chars = [c for c in phonemes if c in self.tts.vocab]
            sounds += [(c, a + at, b + at) for c, a, b in phoneme_sounds(chars, frames, FRAME, len(audio))]
            pieces.append(audio)
            at += len(audio)
        audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        words = [w for w, _ in spoken_tokens(text)]
        return Synthesis(np.asarray(audio, np.float32), self.sample_rate,
                         align_phonemes(words, self._word_phonemes, sounds, self.sample_rate))


SPEC = EngineSpec(
    name="hibari", loader=HibariEngine, knobs=("speed",), timed=True, tempo=Tempo("speed"),
    words_per_second=2.7,  # taken as piper's: no separate measurement (the calibration measures it)
    check=EngineCheck("hibari", ("hibari-tts",), "install the speech extra: pip install 'kame-data[tts]' "
                      "(hibari-tts); only its bundled voice works offline", voice="heart"),
)
