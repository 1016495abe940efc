"""Acoustics for the user channel: a room, a microphone, a level and background noise at a sampled SNR.

A full-duplex model hears its user through a microphone in a room; it hears itself clean. So only
the user channel (B, channel 1) changes, in this order: reverb (the impulse response of a simulated
shoebox room from `pyroomacoustics`, direct path at time zero so word timings stay), a microphone
response and a level change (scipy Butterworth band limits, a gain), then stationary noise scaled so
that the speech power over the user's words is `snr_db` above the noise power. A limiter scales
the whole channel (speech and noise alike, so the SNR holds) if a peak would clip. Everything is
drawn from the recipe seed and the dialogue id; the row stores what was drawn.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any, Sequence

import numpy as np

from kame_data.records import CHANNEL
from kame_data.speech.config import MICS, AcousticsConfig

def colored_noise(n: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    """Unit-power noise whose power falls as 1/f^0 (white), 1/f (pink) or 1/f^2 (brown)."""
    white = rng.standard_normal(n)
    if kind != "white" and n > 1:
        spectrum = np.fft.rfft(white)
        f = np.arange(len(spectrum), dtype=np.float64)
        f[0] = 1.0
        spectrum /= f ** ({"pink": 0.5, "brown": 1.0}[kind])
        spectrum[0] = 0.0
        white = np.fft.irfft(spectrum, n)
    return (white / np.sqrt(np.mean(white ** 2) + 1e-20)).astype(np.float64)


def draw_room(seed: int, index: int, rt60: Sequence[float]) -> dict[str, Any]:
    """Room `index` of the bank: dimensions, RT60, source (the user's mouth) and microphone positions."""
    rng = random.Random(f"{seed}:room:{index}")
    dims = [round(rng.uniform(3.0, 8.0), 2), round(rng.uniform(3.0, 6.0), 2), round(rng.uniform(2.4, 3.5), 2)]
    source = [round(rng.uniform(0.6, d - 0.6), 2) for d in dims[:2]] + [round(rng.uniform(1.1, 1.7), 2)]
    while True:
        mic = [round(rng.uniform(0.5, d - 0.5), 2) for d in dims[:2]] + [round(rng.uniform(0.8, 1.6), 2)]
        distance = float(np.linalg.norm(np.subtract(mic, source)))
        if 0.3 <= distance <= 2.5:
            break
    return {"dims": dims, "rt60": round(rng.uniform(*rt60), 3), "source": source, "mic": mic,
            "distance": round(distance, 2)}


def room_rir(room: dict[str, Any], sample_rate: int) -> np.ndarray:
    """The room's impulse response, direct path at sample 0 and at unit gain; cached on disk."""
    import pyroomacoustics as pra

    from kame_data.speech.cache import cache_root

    key = hashlib.sha256(json.dumps([room, sample_rate, pra.__version__], sort_keys=True).encode()).hexdigest()[:20]
    path = cache_root() / "rirs" / f"{key}.npy"
    if path.is_file():
        return np.load(path)
    absorption, max_order = pra.inverse_sabine(room["rt60"], room["dims"])
    shoebox = pra.ShoeBox(room["dims"], fs=sample_rate, materials=pra.Material(absorption), max_order=max_order)
    shoebox.add_source(room["source"])
    shoebox.add_microphone(room["mic"])
    shoebox.compute_rir()
    rir = np.asarray(shoebox.rir[0][0], np.float64)
    direct = int(np.argmax(np.abs(rir)))
    rir = rir[direct:] / rir[direct]
    from kame_data.atomic import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, rir)
    return rir


def _mic(x: np.ndarray, sr: int, kind: str, jitter: float) -> np.ndarray:
    """The microphone's band limits: Butterworth high- and low-pass filters (scipy), 2nd order
    (12 dB/octave), 4th for the phone's narrow band."""
    from scipy.signal import butter, sosfilt

    low, high = MICS[kind]
    order = 4 if kind == "phone" else 2
    y = x.astype(np.float64)
    if low is not None:
        y = sosfilt(butter(order, low * jitter, "highpass", fs=sr, output="sos"), y)
    if high is not None:
        y = sosfilt(butter(order, min(high * jitter, 0.45 * sr), "lowpass", fs=sr, output="sos"), y)
    return y


def speech_mask(n: int, sr: int, spans: Sequence[tuple[float, float]]) -> np.ndarray:
    mask = np.zeros(n, bool)
    for s, e in spans:
        mask[int(s * sr): max(int(e * sr), int(s * sr) + 1)] = True
    return mask


def augment_user(pcm: np.ndarray, sr: int, spans: Sequence[tuple[float, float]], cfg: AcousticsConfig, seed: int,
                 key: str) -> tuple[np.ndarray, dict[str, Any]]:
    """(stereo int16 with the user channel augmented, the parameters drawn); the assistant channel is
    the same array column, untouched. `spans`: the user's word spans (seconds)."""
    from scipy.signal import fftconvolve

    rng = random.Random(f"{seed}:acoustics:{key}")
    ch = CHANNEL["B"]
    x = pcm[:, ch].astype(np.float64) / 32768
    mask = speech_mask(len(x), sr, spans)
    params: dict[str, Any] = {"room": None}
    level = np.sqrt(np.mean(x[mask] ** 2)) if mask.any() else 0.0
    if rng.random() < cfg.reverb:
        room = draw_room(seed, rng.randrange(max(cfg.rooms, 1)), cfg.rt60)
        x = fftconvolve(x, room_rir(room, sr))[: len(x)]
        wet = np.sqrt(np.mean(x[mask] ** 2)) if mask.any() else 0.0
        x *= level / wet if wet > 0 else 1.0  # the room changes the sound, not the speaker's level
        params["room"] = room
    params["mic"] = rng.choice(cfg.mic)
    x = _mic(x, sr, params["mic"], rng.uniform(0.9, 1.1))
    params["gain_db"] = round(rng.uniform(*cfg.gain_db), 2)
    x *= 10 ** (params["gain_db"] / 20)
    params["noise"] = rng.choice(cfg.noise)
    params["snr_db"] = round(rng.uniform(*cfg.snr_db), 2)
    speech_power = float(np.mean(x[mask] ** 2)) if mask.any() else 0.0
    noise = colored_noise(len(x), params["noise"], np.random.default_rng(rng.getrandbits(64)))
    x = x + noise * np.sqrt(speech_power / 10 ** (params["snr_db"] / 10))
    peak = float(np.max(np.abs(x))) if len(x) else 0.0
    params["limiter_db"] = round(20 * np.log10(0.98 / peak), 2) if peak > 0.98 else 0.0
    if peak > 0.98:
        x *= 0.98 / peak
    out = pcm.copy()
    out[:, ch] = np.rint(np.clip(x * 32768, -32768, 32767)).astype(np.int16)
    return out, params
