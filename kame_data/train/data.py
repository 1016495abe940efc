"""Token rows -> model windows -> batches, with an exact, resumable position.

A speaker's example is its text row, its first dep_q codebooks and the other speaker's first
n_q - dep_q codebooks (Moshi's layout: the model's voice, then the user's), plus the oracle events
that predict its replies. Dialogues longer than `max_frames` are cut into near-equal windows
(kame_finetune splits the same way) and events go with the window they fall in; windows shorter
than `min_frames` are dropped, as its `--min_length` drops chunks. (The reference cuts the stream
after its delays and initial step, T + 1 + max delay frames, so its first window carries the
initial step and later ones start mid-delay; here each window is cut from the plain stream and
the model gives every window its own initial step.)

The order of windows, their sharding over ranks and the exact resume live in `sampler.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from kame_data.train.errors import TrainError
from kame_data.train.streams import (
    TEXT_PAD_ID,
    OracleAugment,
    OracleEvents,
    oracle_frames,
)
from kame_data.train.tokenize import events_of

ZERO_TOKEN = -1  # moshi's zero_token_id: embeds to zero and is left out of the loss


@dataclass(frozen=True)
class Window:
    id: str
    codes: np.ndarray  # [1 + n_q, T] int64
    events: OracleEvents


def windows_from_rows(rows: list[dict], speakers: list[str], n_q: int, dep_q: int, max_frames: int,
                      min_frames: int = 0) -> list[Window]:
    other_q = n_q - dep_q
    if dep_q > 8 or other_q > 8 or other_q < 0:
        raise TrainError(f"the model wants {dep_q} + {other_q} codebooks; the token data has 8 per speaker")
    out: list[Window] = []
    for row in rows:
        for sp in speakers:
            other = "B" if sp == "A" else "A"
            main, oth = np.asarray(row[sp], dtype=np.int64), np.asarray(row[other], dtype=np.int64)
            codes = np.concatenate([main[:1 + dep_q], oth[1:1 + other_q]], axis=0)
            ev = events_of(row, sp)
            T = codes.shape[1]
            n = max(1, -(-T // max_frames))
            start = 0
            for k, chunk in enumerate(np.array_split(codes, n, axis=1)):
                end = start + chunk.shape[1]
                if chunk.shape[1] >= min_frames:
                    keep = np.nonzero((ev.frame_pos >= start) & (ev.frame_pos < end))[0]
                    out.append(Window(f"{row['dialogue_id']}/{sp}/{k}", np.ascontiguousarray(chunk),
                                      ev.subset(keep, shift=start)))
                start = end
    return out


@dataclass
class Batch:
    codes: torch.Tensor  # [B, 1 + n_q, T], ZERO_TOKEN past each window's end
    oracle: torch.Tensor  # [B, T]
    ids: list[str]

    def to(self, device) -> "Batch":
        return Batch(self.codes.to(device), self.oracle.to(device), self.ids)


def collate(windows: list[Window], oracle_start_id: int,
            rng: np.random.Generator | list[np.random.Generator] | None,
            aug: OracleAugment, blank_oracle: bool = False, pad_id: int = TEXT_PAD_ID,
            length: int | None = None, step: int = 0) -> Batch:
    """Pad to the longest window, or to `length` (a rank pads to its global batch's longest: the
    last frame of a delayed codebook is scored only when padding follows it); `rng` is one
    generator for the batch or one per window; `step` (optimizer steps done) drives the hint-only
    curriculum."""
    rngs = rng if isinstance(rng, list) else [rng] * len(windows)
    T = max([w.codes.shape[1] for w in windows] + [length or 0])
    K = windows[0].codes.shape[0]
    codes = np.full((len(windows), K, T), ZERO_TOKEN, dtype=np.int64)
    oracle = np.full((len(windows), T), pad_id, dtype=np.int64)
    for i, w in enumerate(windows):
        t = w.codes.shape[1]
        codes[i, :, :t] = w.codes
        if not blank_oracle:
            oracle[i, :t] = oracle_frames(w.events, t, oracle_start_id, pad_id, rngs[i], aug, step)
    return Batch(torch.from_numpy(codes), torch.from_numpy(oracle), [w.id for w in windows])
