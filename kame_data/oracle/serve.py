"""The served stream: which oracle units a KAME-style front-end reads at which 80 ms frame, given
when each reply's units arrive (latency.py). docs/design.md, "Oracle arrival", has the rules and
worked examples; they follow KAME's server (SakanaAI/kame `src/kame/server_oracle.py`, its
LLMStreamMultiplexer and opus_loop; ../shared/STACK.md, "How KAME serves the oracle"):

1. Replies stream side by side. A reply is adopted when its first chunk arrives; adopting it
   cancels every older reply, so what they had not delivered never comes (and an older reply
   never answers after a newer one).
2. At most `streams` replies are live at once (those waiting for their first chunk, and the
   adopted one while it still streams): a request beyond that cancels the oldest waiting reply.
3. The adopted reply resets the oracle buffer: the frame in which its first chunk arrives holds
   the start token, and unit j of the reply belongs to the j-th frame after it.
4. One unit per frame: a unit that has not arrived by the start of its frame is never read (that
   frame reads pad).
5. A reply plays on until the next adopted reply's first chunk, which cuts it.

With every unit arriving at its event's ladder time (the `ideal` model), each reply starts in its
event's frame, as the trainer's event-time stream does (train/streams.oracle_frames).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from kame_data.oracle.latency import LatencyModel, arrivals

FRAME_MS = 80


def reference_frame(ms: int | float) -> int:
    """The frame a time falls in, in kame_finetune's floating-point arithmetic
    (tools/tokenize_oracle.py: int(seconds x 12.5)); train/streams.event_frame uses it."""
    return int(float(ms) / 1000.0 * 12.5)


@dataclass(frozen=True)
class Served:
    """One reply as the front-end plays it. `frame`: where its start token is read (None: it never
    played: not sent, no units, a newer reply adopted first, or cancelled by the stream limit);
    `until`: the first frame of the next reply (None: it plays to the end); `read`: (frame, unit)
    pairs read; `late`: units that arrived after their frame or after a newer reply was adopted
    (and every unit of a reply the stream limit cancelled); `cut`: units whose frame came after the
    next reply's reset."""

    frame: int | None
    until: int | None = None
    read: list[tuple[int, int]] = field(default_factory=list)
    late: int = 0
    cut: int = 0

    def to_dict(self) -> dict:
        return {"frame": self.frame, "until": self.until, "read": len(self.read), "late": self.late, "cut": self.cut}


def serve(sent: Sequence[bool], requested_ms: Sequence[int], unit_ms: Sequence[Sequence[int]],
          streams: int = 0, frame_of: Callable[[float], int] = reference_frame,
          frame_ms: int = FRAME_MS) -> list[Served]:
    """The served stream of one channel's events, in event order: `sent[k]`, `requested_ms[k]` and
    `unit_ms[k]` (when each unit of reply k arrives, non-decreasing) come from its Arrival;
    `streams`: the most live replies (0: no limit; KAME's server allows 7).

    Requests and first chunks are replayed in time order (a request before a first chunk at the
    same instant): a request joins the replies waiting for their first chunk and, beyond the limit,
    cancels the oldest waiting ones (the adopted reply counts while it still streams); a first chunk
    adopts its reply and cancels every older one."""
    n = len(sent)
    first = {k: unit_ms[k][0] for k in range(n) if sent[k] and unit_ms[k]}
    moments = sorted([(requested_ms[k], 0, k) for k in first] + [(t, 1, k) for k, t in first.items()])
    waiting: list[int] = []  # in request order
    cancelled: set[int] = set()
    adopted: list[int] = []
    for t, kind, k in moments:
        if kind == 0:  # a request leaves
            waiting.append(k)
            live = adopted and unit_ms[adopted[-1]][-1] > t
            while streams > 0 and len(waiting) + bool(live) > streams:
                cancelled.add(waiting.pop(0))
        elif k in waiting:  # its first chunk: adopted, every older reply cancelled
            for j in [j for j in waiting if j < k]:
                waiting.remove(j)
                cancelled.add(j)
            waiting.remove(k)
            adopted.append(k)
    out = [Served(frame=None, late=len(unit_ms[k]) if k in cancelled else 0) for k in range(n)]
    for pos, k in enumerate(adopted):
        r = frame_of(first[k])
        nxt = adopted[pos + 1] if pos + 1 < len(adopted) else None
        cancel = first[nxt] if nxt is not None else float("inf")
        until = frame_of(first[nxt]) if nxt is not None else None
        if until is not None and until <= r:
            # the next reply's first chunk lands in the same frame: it overwrites this one whole
            out[k] = Served(frame=None, cut=len(unit_ms[k]))
            continue
        read, late, cut = [], 0, 0
        for j, t in enumerate(unit_ms[k]):
            f = r + 1 + j
            if until is not None and f >= until:
                cut += 1
            elif t > cancel or t > f * frame_ms:
                late += 1
            else:
                read.append((f, j))
        out[k] = Served(frame=r, until=until, read=read, late=late, cut=cut)
    return out


def stream(served: Sequence[Served], frames: int) -> list[tuple[int, int] | None]:
    """Frame by frame: (event, unit) read there, (event, -1) for a start token, None for pad."""
    out: list[tuple[int, int] | None] = [None] * frames
    for k, s in enumerate(served):
        if s.frame is None or s.frame >= frames:
            continue
        out[s.frame] = (k, -1)
        for f, j in s.read:
            if f < frames:
                out[f] = (k, j)
    return out


def timed_events(model: LatencyModel, events: Sequence[tuple[int, int, str]], seed: int,
                 row_id: str) -> list[dict[str, Any]]:
    """Per event (channel, ladder time in ms, reply text), in the same order: its Arrival under
    `model` and how the served stream played it. Each channel's events are one back-end's
    requests, drawn by the seed, the row id and the channel: what the write step stores as a row's
    oracle_arrival and what `kame-data infer --latency` replays."""
    out: list[dict[str, Any]] = [{} for _ in events]
    for channel in sorted({c for c, _, _ in events}):
        idx = [i for i, (c, _, _) in enumerate(events) if c == channel]
        got = arrivals(model, [(events[i][1], events[i][2]) for i in idx], seed, f"{row_id}/{channel}")
        played = serve([a.sent for a in got], [a.requested_ms for a in got], [a.piece_ms for a in got],
                       streams=model.streams)
        for i, a, p in zip(idx, got, played):
            out[i] = {**a.to_dict(), **p.to_dict()}
    return out
