"""Per-frame streams the model reads (docs/design.md, "Training streams"), in numpy only.

Frames are 80 ms (Mimi's 12.5 Hz). A speaker's text stream is built in `transcript.py`.
Oracle events are kept at event level, as kame_finetune's `prepare_dataset` stores them (frame,
ratio, skip-forbid flag, ragged prediction and hint tokens), because the reference loader draws its
augmentations (event skipping, time jitter, hint-only examples, whole-stream shift) afresh each
time it turns them into frames (kame_finetune's `utils/data.py`, `DataCollator`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from kame_data.oracle.serve import in_time, reference_frame, served_frame

FRAME_RATE = 12.5
FRAME_MS = 80
TEXT_PAD_ID = 3  # Moshi's `existing_text_padding_id`
END_OF_PAD_ID = 0  # Moshi's `existing_text_end_padding_id`

Encode = Callable[[str], list[int]]


def frame_of_ms(ms: int | float) -> int:
    """The frame an instant falls in: floor(ms / 80), in integers (the served stream's clock)."""
    return served_frame(ms)


def frame_of_seconds(seconds: float) -> int:
    # Via whole milliseconds, so 0.16 s is frame 2 and not 1.9999… -> 1.
    return frame_of_ms(round(seconds * 1000))


def text_frame(seconds: float, arithmetic: str = "reference") -> int:
    """The frame a text token starting at `seconds` falls in. `reference`: seconds floor-divided by
    1/12.5 in floating point, as kame_finetune's tools/tokenize_text.py computes it (2.0 s gives
    frame 24, not 25: 0.08 is stored a little above 0.08); `exact`: via whole milliseconds."""
    if arithmetic == "reference":
        return int(seconds // (1 / FRAME_RATE))
    return frame_of_seconds(seconds)


def event_frame(timestamp_ms: int | float, arithmetic: str = "reference") -> int:
    """The frame an oracle event falls in. `reference`: int(seconds x 12.5) in floating point, as
    kame_finetune's tools/tokenize_oracle.py computes it (2320 ms gives 28, not 29); `exact`:
    floor(ms / 80)."""
    if arithmetic == "reference":
        return reference_frame(timestamp_ms)  # kame_finetune's arithmetic; the served stream counts in integers
    return frame_of_ms(timestamp_ms)


def num_frames(num_samples: int, sample_rate: int = 24000) -> int:
    """Mimi frames for a clip: one per started 80 ms (Mimi pads the last frame)."""
    hop = int(sample_rate / FRAME_RATE)
    return -(-num_samples // hop)


def encode_lines(encode: Encode, text: str, newline_id: int | None) -> list[int]:
    """Oracle text as tokens: lines encoded apart and joined by the newline piece, no BOS
    (kame_finetune's `tokenize_oracle` does the same, so the two token datasets agree)."""
    lines = [encode(line) for line in text.split("\n")]
    if newline_id is None:
        return [t for line in lines for t in line]
    out: list[int] = []
    for i, line in enumerate(lines):
        if i:
            out.append(newline_id)
        out.extend(line)
    return out


def pack_ragged(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """list[list[int]] -> (values int32, offsets int32 of length len+1), as kame_finetune stores them."""
    offsets = np.zeros(len(lists) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum([len(x) for x in lists], dtype=np.int64)
    values = np.fromiter((t for x in lists for t in x), dtype=np.int32, count=int(offsets[-1]))
    return values, offsets


@dataclass(frozen=True)
class OracleEvents:
    """One speaker's oracle events: what its `<speaker>_oracle_*` columns hold.

    `pred_values[pred_offsets[i]:pred_offsets[i+1]]` are event i's prediction tokens, and likewise
    for the hint. Frame positions are on the speaker's own frame timeline (before any model delay).
    """

    frame_pos: np.ndarray  # (E,) int32
    ratio: np.ndarray  # (E,) float32
    skip_forbid: np.ndarray  # (E,) int8
    pred_values: np.ndarray
    pred_offsets: np.ndarray  # (E+1,)
    hint_values: np.ndarray
    hint_offsets: np.ndarray  # (E+1,)
    # The served timing (`oracle.timing: served`, docs/design.md "Oracle arrival"); None: event times.
    # until[i]: the frame where the next reply resets the buffer (-1: none); *_read: per token, 1 when
    # the front-end reads it (it arrived by its frame), aligned with pred_values / hint_values.
    until: np.ndarray | None = None
    pred_read: np.ndarray | None = None
    hint_read: np.ndarray | None = None

    @property
    def served(self) -> bool:
        return self.until is not None

    def __len__(self) -> int:
        return len(self.frame_pos)

    def pred(self, i: int) -> np.ndarray:
        return self.pred_values[self.pred_offsets[i]:self.pred_offsets[i + 1]]

    def hint(self, i: int) -> np.ndarray:
        return self.hint_values[self.hint_offsets[i]:self.hint_offsets[i + 1]]

    def read_mask(self, i: int, hint: bool) -> np.ndarray | None:
        """Event i's per-token read flags (served timing), for its hint or its prediction."""
        if not self.served:
            return None
        values, offsets = (self.hint_read, self.hint_offsets) if hint else (self.pred_read, self.pred_offsets)
        return values[offsets[i]:offsets[i + 1]]

    def subset(self, keep: Sequence[int], shift: int = 0) -> "OracleEvents":
        """The events at indices `keep`, positions moved back by `shift` frames."""
        keep = [int(i) for i in keep]
        pv, po = pack_ragged([self.pred(i) for i in keep])
        hv, ho = pack_ragged([self.hint(i) for i in keep])
        idx = np.asarray(keep, dtype=np.int64)
        served = {}
        if self.served:
            until = self.until[idx].astype(np.int32)
            served = {"until": np.where(until >= 0, until - shift, -1).astype(np.int32),
                      "pred_read": pack_ragged([self.read_mask(i, False) for i in keep])[0].astype(np.int8),
                      "hint_read": pack_ragged([self.read_mask(i, True) for i in keep])[0].astype(np.int8)}
        return OracleEvents((self.frame_pos[idx] - shift).astype(np.int32), self.ratio[idx].astype(np.float32),
                            self.skip_forbid[idx].astype(np.int8), pv, po, hv, ho, **served)

    def columns(self, prefix: str) -> dict[str, list]:
        """kame_finetune's column names and element types for this speaker (`prefix` is e.g. `A_oracle`)."""
        return {
            f"{prefix}_event_frame_pos": self.frame_pos.astype(np.int32).tolist(),
            f"{prefix}_event_ratio": self.ratio.astype(np.float32).tolist(),
            f"{prefix}_event_skip_forbid": self.skip_forbid.astype(np.int8).tolist(),
            f"{prefix}_pred_values": self.pred_values.astype(np.int32).tolist(),
            f"{prefix}_pred_offsets": self.pred_offsets.astype(np.int32).tolist(),
            f"{prefix}_hint_values": self.hint_values.astype(np.int32).tolist(),
            f"{prefix}_hint_offsets": self.hint_offsets.astype(np.int32).tolist(),
            **({f"{prefix}_event_until": self.until.astype(np.int32).tolist(),
                f"{prefix}_pred_read": self.pred_read.astype(np.int8).tolist(),
                f"{prefix}_hint_read": self.hint_read.astype(np.int8).tolist()} if self.served else {}),
        }

    @classmethod
    def from_columns(cls, row: dict, prefix: str) -> "OracleEvents":
        def a(name: str, dtype) -> np.ndarray:
            return np.asarray(row[f"{prefix}_{name}"] or [], dtype=dtype)

        served = {}
        if f"{prefix}_event_until" in row:
            served = {"until": a("event_until", np.int32), "pred_read": a("pred_read", np.int8),
                      "hint_read": a("hint_read", np.int8)}
        return cls(a("event_frame_pos", np.int32), a("event_ratio", np.float32), a("event_skip_forbid", np.int8),
                   a("pred_values", np.int32), a("pred_offsets", np.int32),
                   a("hint_values", np.int32), a("hint_offsets", np.int32), **served)

    @classmethod
    def empty(cls) -> "OracleEvents":
        z = np.zeros(0, np.int32)
        return cls(z, z.astype(np.float32), z.astype(np.int8), z, np.zeros(1, np.int32), z, np.zeros(1, np.int32))


def build_events(events: Sequence[dict], channel: int, speaker: str, words: Sequence[dict],
                 frames: int, encode_text: Callable[[str], list[int]], skip_forbid: str = "reference",
                 arithmetic: str = "reference", arrivals: Sequence[dict] | None = None,
                 char_ends: Callable[[str], list[int]] | None = None) -> tuple[OracleEvents, dict[str, int]]:
    """The events of one channel (the speaker who answers), as kame_finetune tokenises them.

    An event lands at frame `event_frame(timestamp_ms)`; events past the audio, or with neither
    prediction nor hint tokens, are dropped (counted in the returned dict). `skip_forbid` marks
    events augmentation must never skip. `reference` (tools/tokenize_oracle.py): the ladder entry
    right after it has another channel, or there is none. With a ladder for one target channel
    (kame-data's default) that is only the very last event; `turns` also marks an event when
    `speaker` says a word between it and the next event of its channel (the last before its turn).

    `arrivals` (the row's `oracle_arrival`, aligned with `events`): the served timing instead
    (docs/design.md, "Oracle arrival"): an event lands where its reply's first chunk reset the
    buffer, or is dropped (`not_served`) when it never played; each token is marked read when the
    reply piece holding its last character (`char_ends`) arrived by its frame and before the next
    reply was adopted; `until` is the next played reply's frame.
    """
    dropped = {"outside_audio": 0, "no_tokens": 0, **({"not_served": 0} if arrivals is not None else {})}
    idx = [i for i, e in enumerate(events) if int(e["channel"]) == channel]
    played = [i for i in idx if arrivals is not None and arrivals[i]["frame"] is not None and arrivals[i]["piece_ms"]]
    next_first = {a: arrivals[b]["piece_ms"][0] for a, b in zip(played, played[1:])} if arrivals is not None else {}
    until, pred_read, hint_read = [], [], []
    ends = np.sort(np.asarray([w["end"] for w in words if w["speaker"] == speaker], dtype=np.float64))
    pos, ratio, forbid, preds, hints = [], [], [], [], []
    for k, i in enumerate(idx):
        e = events[i]
        nxt = idx[k + 1] if k + 1 < len(idx) else None
        if nxt is None or nxt != i + 1:
            last = True
        elif skip_forbid == "reference":
            last = False
        else:
            t0, t1 = e["timestamp_ms"] / 1000.0, events[nxt]["timestamp_ms"] / 1000.0
            last = bool(np.any((ends > t0) & (ends <= t1)))
        if arrivals is not None and i not in played:
            dropped["not_served"] += 1
            continue
        # served: the frame of its first chunk on the server's sample clock (oracle/serve.py), else the event's
        f = served_frame(arrivals[i]["piece_ms"][0]) if arrivals is not None else event_frame(e["timestamp_ms"], arithmetic)
        if f < 0 or f >= frames:
            dropped["outside_audio"] += 1
            continue
        p = (e.get("prediction") or "").strip()
        h = (e.get("hint") or "").strip()
        pt = encode_text(p) if p else []
        ht = encode_text(h) if h else []
        if not pt and not ht:
            dropped["no_tokens"] += 1
            continue
        if arrivals is not None:
            nxt = next_first.get(i)
            u = served_frame(nxt) if nxt is not None else -1
            until.append(u)
            pred_read.append(_read_flags(p, pt, e.get("prediction") or "", arrivals[i], f, u, nxt, char_ends))
            hint_read.append(_read_flags(h, ht, e.get("prediction") or "", arrivals[i], f, u, nxt, char_ends))
        pos.append(f)
        ratio.append(float(e.get("current_spoken_ratio") or 0.0))
        forbid.append(1 if last else 0)
        preds.append(pt)
        hints.append(ht)
    pv, po = pack_ragged(preds)
    hv, ho = pack_ragged(hints)
    served = {}
    if arrivals is not None:
        served = {"until": np.asarray(until, np.int32), "pred_read": pack_ragged(pred_read)[0].astype(np.int8),
                  "hint_read": pack_ragged(hint_read)[0].astype(np.int8)}
    return OracleEvents(np.asarray(pos, np.int32), np.asarray(ratio, np.float32), np.asarray(forbid, np.int8),
                        pv, po, hv, ho, **served), dropped


def _read_flags(text: str, tokens: list[int], streamed: str, arrival: dict, frame: int, until: int,
                cancel_ms: int | None, char_ends: Callable[[str], list[int]] | None) -> list[int]:
    """Per token of `text`: 1 when the served stream reads it (oracle/serve.py's rules in tokens).
    A token arrives with the piece of the streamed reply holding its last character (by position
    when `text` is not the streamed text, or the tokenizer cannot say where tokens end)."""
    from kame_data.oracle.latency import pieces

    piece_ms = arrival["piece_ms"]
    ends = list(np.cumsum([len(x) for x in pieces(streamed)])) if streamed else []
    pos = char_ends(text) if char_ends is not None and text == streamed.strip() else None
    lead = len(streamed) - len(streamed.lstrip())  # `text` is the stripped reply
    out = []
    for j in range(len(tokens)):
        if pos is not None and len(pos) == len(tokens) and ends:
            k = min(int(np.searchsorted(ends, pos[j] - 1 + lead, side="right")), len(piece_ms) - 1)
        else:
            k = min(len(piece_ms) - 1, (j + 1) * len(piece_ms) // max(1, len(tokens)) - 1) if piece_ms else 0
        t = piece_ms[max(0, k)] if piece_ms else 0
        fj = frame + 1 + j
        ok = (until < 0 or fj < until) and in_time(t, fj) and (cancel_ms is None or t <= cancel_ms)
        out.append(1 if ok else 0)
    return out


@dataclass(frozen=True)
class OracleAugment:
    """The reference loader's augmentations. Skip probability is drawn per example from
    U(skip_min, skip_max); each kept event moves later by U{0..jitter} frames; shift moves the
    whole stream right or left with `shift_prob`. `hint_only` examples show hints alone; with
    `hint_only_warmup` (start, end) every example is hint-only up to optimizer step `start`, then
    with a chance falling linearly to 0 at `end`."""

    skip_min: float = 0.0
    skip_max: float = 0.0
    shift_prob: float = 0.0
    right_shift: tuple[int, int] = (1, 10)
    left_shift: tuple[int, int] = (1, 15)
    jitter: int = 0
    hint_only: bool = False
    hint_only_warmup: tuple[int, int] | None = None

    @property
    def active(self) -> bool:
        return self.skip_max > 0.0 or self.skip_min > 0.0 or self.shift_prob > 0.0 or self.jitter > 0 \
            or self.hint_only

    def hint_only_now(self, step: int, rng: np.random.Generator) -> bool:
        """Whether this example shows hints only, at `step` optimizer steps done (one draw per
        example, and only inside the warm-up ramp, as the reference collator draws it)."""
        if not self.hint_only:
            return False
        if self.hint_only_warmup is None:
            return True
        start, end = self.hint_only_warmup
        if step <= start:
            return True
        if step >= end:
            return False
        return bool(rng.random() < 1.0 - (step - start) / (end - start))


def oracle_frames(ev: OracleEvents, frames: int, start_id: int, pad_id: int = TEXT_PAD_ID,
                  rng: np.random.Generator | None = None, aug: OracleAugment = OracleAugment(),
                  step: int = 0) -> np.ndarray:
    """The per-frame oracle stream: pad everywhere except after each kept event, where its frame
    holds `start_id` and the following frames its tokens, one per frame (the hint's when the
    speaker's turn was fully heard, ratio >= 1.0, and a hint exists; else the prediction's; in a
    hint-only example the hint's or nothing). A later event overwrites the frames it writes (as the
    reference loader does). Events marked `skip_forbid` are never skipped. Random draws come in
    the reference collator's order: skip probability, hint-only, per event skip then jitter, shift.

    Served timing (`ev.served`): an event resets the buffer, so its frames up to the next reply
    (`until`) hold its start token, the tokens the front-end read, and pad for the late ones.
    """
    out = np.full(frames, pad_id, dtype=np.int64)
    skip_p = 0.0
    if rng is not None and (aug.skip_max > 0.0 or aug.skip_min > 0.0):
        skip_p = float(rng.uniform(min(aug.skip_min, aug.skip_max), max(aug.skip_min, aug.skip_max)))
    hint_only = rng is not None and aug.hint_only_now(step, rng)
    for i in np.argsort(ev.frame_pos, kind="stable").tolist():
        f = int(ev.frame_pos[i])
        if f < 0 or f >= frames:
            continue
        if skip_p > 0.0 and not ev.skip_forbid[i] and float(rng.random()) < skip_p:
            continue
        if rng is not None and aug.jitter > 0:
            f += int(rng.integers(0, aug.jitter + 1))
            if f >= frames:
                continue
        hint = ev.hint(i)
        if hint_only:
            seq = hint
        else:
            seq = hint if (float(ev.ratio[i]) >= 1.0 and hint.size) else ev.pred(i)
        if seq.size == 0:
            continue
        if ev.served:
            stop = frames if ev.until[i] < 0 else min(frames, max(f + 1, int(ev.until[i])))
            out[f:stop] = pad_id  # the reset: the older reply is gone
            out[f] = start_id
            mask = ev.read_mask(i, seq is hint)
            n = min(seq.size, stop - f - 1)
            keep = np.nonzero(mask[:n])[0]
            out[f + 1 + keep] = seq[keep]
            continue
        out[f] = start_id
        n = min(seq.size, frames - f - 1)
        out[f + 1:f + 1 + n] = seq[:n]
    if rng is not None and aug.shift_prob > 0.0:
        out = shift_stream(out, rng, aug, pad_id)
    return out


def shift_stream(o: np.ndarray, rng: np.random.Generator, aug: OracleAugment, pad_id: int = TEXT_PAD_ID) -> np.ndarray:
    """With probability `shift_prob`, move the whole stream right (later) or left (earlier) by a
    drawn number of frames, padding the uncovered end: the model must not rely on exact timing."""
    if rng.random() >= aug.shift_prob or o.size <= 1:
        return o
    right = bool(rng.integers(0, 2))
    lo, hi = aug.right_shift if right else aug.left_shift
    s = max(1, min(int(rng.integers(lo, hi + 1)), o.size - 1))
    out = np.full_like(o, pad_id)
    if right:
        out[s:] = o[:-s]
    else:
        out[:-s] = o[s:]
    return out
