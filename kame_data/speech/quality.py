"""Quality measured on every turn of the clean render, and thresholds that reject a dialogue.

Per turn (its window in its speaker's channel, before any acoustics): DNSMOS (Microsoft's
non-intrusive MOS, ONNX models shipped in `speechmos`: overall, signal, background), speech
and silence from Silero VAD (the ONNX model faster-whisper ships, run on onnxruntime without
torch) checked against the word timings (speech outside the words, word time without speech),
clipped samples, and loudness (ITU-R BS.1770 through `pyloudnorm`). Reject reasons:
`silent_turn`, `words_without_speech`, `speech_outside_words`, `clipped`, `low_dnsmos`, `loudness`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kame_data.accelerator import onnx_providers
from kame_data.audio import resample
from kame_data.costs import piece
from kame_data.records import CHANNEL, RenderedDialogue
from kame_data.speech.config import QualityConfig

VAD_RATE = 16000
WINDOW_PAD = 0.25  # seconds around a turn's first and last word


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        elif e > s:
            out.append((s, e))
    return out


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


class QualityMeter:
    """DNSMOS and VAD models, loaded once per process on one thread each."""

    def __init__(self, cfg: QualityConfig):
        self.cfg = cfg
        self.dnsmos = _load_dnsmos() if cfg.dnsmos else None

    def speech(self, audio16: np.ndarray) -> list[tuple[float, float]]:
        from faster_whisper.vad import VadOptions, get_speech_timestamps

        opts = VadOptions(threshold=self.cfg.vad_threshold, min_speech_duration_ms=60, min_silence_duration_ms=120,
                          speech_pad_ms=0)
        return [(s["start"] / VAD_RATE, s["end"] / VAD_RATE)
                for s in get_speech_timestamps(audio16, opts, sampling_rate=VAD_RATE)]

    def turn(self, x: np.ndarray, sr: int, words: list[tuple[float, float]], tight: tuple[float, float]) -> dict[str, Any]:
        """Figures of one turn. `x`: the stretch of its channel that belongs to it (up to halfway to the
        speaker's neighbouring turns; float, full scale 1.0), `words` spans relative to `x`, `tight`
        the turn itself (first word - pad, last word + pad) where level and DNSMOS are measured."""
        core = x[int(tight[0] * sr): int(tight[1] * sr)]
        peak = float(np.max(np.abs(core))) if len(core) else 0.0
        out: dict[str, Any] = {"clipped": int(np.count_nonzero(np.abs(core) >= 32767 / 32768)), "peak": round(peak, 4)}
        with piece("quality.rest"):
            x16 = resample(x.astype(np.float32), sr, VAD_RATE)
        with piece("quality.vad"):
            speech = self.speech(x16) if peak > 1e-4 else []
        wordsu = _union(words)
        padded = _union([(s - self.cfg.margin, e + self.cfg.margin) for s, e in words])
        speech_s = sum(e - s for s, e in speech)
        word_s = sum(e - s for s, e in wordsu)
        out["vad_speech_s"] = round(speech_s, 3)
        out["vad_outside_s"] = round(speech_s - _overlap(speech, padded), 3)
        out["vad_word_share"] = round(_overlap(speech, wordsu) / word_s, 3) if word_s > 0 else None
        with piece("quality.rest"):
            out["lufs"] = _lufs(core, sr)
        if self.dnsmos is not None and peak > 1e-4:
            with piece("quality.rest"):
                c16 = resample(core.astype(np.float32), sr, VAD_RATE)
            with piece("quality.dnsmos"):
                mos = dnsmos_scores(self.dnsmos, np.clip(c16, -1.0, 1.0), self.cfg.dnsmos_hop)
            out.update(dnsmos=round(mos["ovrl"], 3), dnsmos_sig=round(mos["sig"], 3), dnsmos_bak=round(mos["bak"], 3))
        else:
            out.update(dnsmos=None, dnsmos_sig=None, dnsmos_bak=None)
        return out

    def dialogue(self, r: RenderedDialogue) -> list[dict[str, Any]]:
        """One figures dict per turn of a rendered dialogue (its clean channels). Each channel is
        covered whole: a turn owns its channel up to halfway to its speaker's previous and next turns."""
        sr = r.sample_rate
        figures = []
        turns = list(zip(r.dialogue.turns, r.timings))
        for k, (turn, timing) in enumerate(turns):
            same = [tm for t, tm in turns if t.speaker == turn.speaker]
            i = same.index(timing)
            a = (same[i - 1].end + timing.start) / 2 if i > 0 else 0.0
            b = (timing.end + same[i + 1].start) / 2 if i + 1 < len(same) else r.duration
            x = r.audio[int(a * sr): int(b * sr), CHANNEL[turn.speaker]].astype(np.float32) / 32768
            spans = [(max(w.start, a) - a, min(w.end, b) - a) for w in r.words
                     if w.speaker == turn.speaker and w.end > a and w.start < b]
            tight = (max(timing.start - WINDOW_PAD, a) - a, min(timing.end + WINDOW_PAD, b) - a)
            figures.append(self.turn(x, sr, spans, tight))
        return figures


def failure(figures: list[dict[str, Any]], cfg: QualityConfig) -> tuple[str, str] | None:
    """(reason, detail) for the first turn a threshold refuses, else None."""
    for k, f in enumerate(figures):
        if f["peak"] < 1e-3 or f["vad_speech_s"] == 0:
            return "silent_turn", f"turn {k}: no speech (peak {f['peak']}, VAD speech {f['vad_speech_s']} s)"
        if cfg.max_clipped is not None and f["clipped"] > cfg.max_clipped:
            return "clipped", f"turn {k}: {f['clipped']} samples at full scale > {cfg.max_clipped}"
        share = f["vad_word_share"]
        if cfg.min_word_speech is not None and share is not None and share < cfg.min_word_speech:
            return "words_without_speech", f"turn {k}: VAD hears speech in {share:.0%} of the words' time"
        if cfg.max_speech_outside is not None and f["vad_outside_s"] > cfg.max_speech_outside:
            return "speech_outside_words", f"turn {k}: {f['vad_outside_s']} s of speech outside its words"
        if cfg.min_dnsmos is not None and f["dnsmos"] is not None and f["dnsmos"] < cfg.min_dnsmos:
            return "low_dnsmos", f"turn {k}: DNSMOS {f['dnsmos']} < {cfg.min_dnsmos}"
        lufs = f["lufs"]
        if lufs is not None and ((cfg.min_lufs is not None and lufs < cfg.min_lufs)
                                 or (cfg.max_lufs is not None and lufs > cfg.max_lufs)):
            return "loudness", f"turn {k}: {lufs} LUFS outside [{cfg.min_lufs}, {cfg.max_lufs}]"
    return None


def _lufs(x: np.ndarray, sr: int) -> float | None:
    """Integrated loudness (LUFS), None for clips too short or too quiet to gate."""
    import pyloudnorm

    if len(x) < int(0.4 * sr) + 1:
        return None
    value = pyloudnorm.Meter(sr).integrated_loudness(x.astype(np.float64))
    return round(float(value), 2) if np.isfinite(value) else None


DNSMOS_SECONDS = 9.01  # the P.835 model's input: 144,160 samples at 16 kHz
# Its raw outputs (sig, bak, ovrl) mapped to MOS by the published third-order fits of DNSMOS P.835.
_FIT = {"sig": np.poly1d([-0.08397278, 1.22083953, 0.0052439]),
        "bak": np.poly1d([-0.13166888, 1.60915514, -0.39604546]),
        "ovrl": np.poly1d([-0.06766283, 1.11546468, 0.04602535])}


def dnsmos_windows(n: int, hop_s: float, rate: int = VAD_RATE) -> list[int]:
    """Start samples of the model's windows over `n` samples: every `hop_s` seconds, and one more
    ending with the audio when those leave its end uncovered. A clip no longer than a window has
    the single window 0 (dnsmos_scores repeats it to fill one, as the reference scorer does)."""
    size, hop = int(DNSMOS_SECONDS * rate), max(1, int(hop_s * rate))
    if n <= size:
        return [0]
    starts = list(range(0, n - size + 1, hop))
    if starts[-1] + size < n:
        starts.append(n - size)
    return starts


def dnsmos_scores(session, audio16: np.ndarray, hop_s: float) -> dict[str, float]:
    """DNSMOS P.835 (signal, background, overall MOS) of mono 16 kHz audio in [-1, 1]: the mean over
    windows of the model's mapped outputs. Only the P.835 model runs: the P.808 score the reference
    package also computes (a mel spectrogram and a second network per window, more than half its
    time) is never used here."""
    x = np.asarray(audio16, np.float32)
    size = int(DNSMOS_SECONDS * VAD_RATE)
    starts = dnsmos_windows(len(x), hop_s)
    while len(x) < size:
        x = np.concatenate([x, x])
    raw = np.array([session.run(None, {"input_1": x[s: s + size][np.newaxis, :]})[0][0] for s in starts], np.float64)
    return {name: float(np.mean(fit(raw[:, k]))) for k, (name, fit) in enumerate(_FIT.items())}


def _load_dnsmos():
    """DNSMOS's P.835 ONNX model (shipped in `speechmos`) on one thread (renders stay reproducible
    and worker processes do not fight over cores), or on the GPU (kame_data/accelerator.py)."""
    import os

    import onnxruntime as ort
    from speechmos import dnsmos

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    path = os.path.join(os.path.dirname(dnsmos.__file__), "dnsmos_models", "sig_bak_ovr.onnx")
    return ort.InferenceSession(path, opts, providers=onnx_providers())
