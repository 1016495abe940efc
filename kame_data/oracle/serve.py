"""The served stream: which oracle units a KAME-style front-end reads at which 80 ms frame, given
when each reply's units arrive (latency.py). docs/design.md, "Oracle arrival", has the rules and
worked examples; they follow KAME's server, whose code is the authority (SakanaAI/kame
`src/kame/server_oracle.py`: LLMStreamMultiplexer and opus_loop; `src/kame/models/lm.py`:
LMGen.update_oracle_tokens_streaming and LMGen._step):

1. Replies stream side by side. A reply is adopted when its first chunk arrives; adopting it
   cancels every older reply, so what they had not delivered never comes (and an older reply
   never answers after a newer one).
2. At most `streams` replies are live at once (those waiting for their first chunk, and the
   adopted one while it still streams): a request beyond that cancels the oldest waiting reply.
3. Frames are whole numbers on the server's sample clock: the frame of t ms is t // 80
   (`served_frame`). opus_loop drains the oracle events, then steps every complete 1920-sample
   frame; step s reads frame s's audio, so it runs once [80 s, 80 (s + 1)) ms is complete.
4. The adopted reply resets the buffer at the step of its first chunk's frame, r = t // 80 (the
   start token); its unit j is read at step r + 1 + j if it arrived before that step ran, i.e.
   before 80 (r + 2 + j) ms (`in_time`), and never otherwise (the units after it keep their steps).
5. A reply plays on until the next adopted reply's first chunk, which cuts it.
6. A reply whose reset would come after the dialogue's last frame never plays: no frame, nothing read.

With every unit arriving at its event's ladder time (the `ideal` model), each reply starts in its
event's frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from kame_data.oracle.latency import LatencyModel, arrivals, transcripts
from kame_data.records import CHANNEL

FRAME_MS = 80
# The served stream's rules (above); a row's oracle_arrival and the manifest record it. 2: frames in
# whole numbers, a unit in time until its step runs, replies after the audio never play (was 1).
SERVE_RULES = 2


def served_frame(ms: int | float) -> int:
    """The frame a time falls in on the server's sample clock: whole milliseconds over 80, in
    integers (2320 ms is frame 29; reference_frame's floating point gives 28)."""
    return int(ms) // FRAME_MS


def in_time(arrived_ms: int | float, step: int) -> bool:
    """Whether a unit that arrived at `arrived_ms` is in the buffer when step `step` runs: the step
    runs once its frame's audio, [80 step, 80 (step + 1)) ms, is complete."""
    return arrived_ms < (step + 1) * FRAME_MS


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
    next reply's reset or past the audio's last frame."""

    frame: int | None
    until: int | None = None
    read: list[tuple[int, int]] = field(default_factory=list)
    late: int = 0
    cut: int = 0

    def to_dict(self) -> dict:
        return {"frame": self.frame, "until": self.until, "read": len(self.read), "late": self.late, "cut": self.cut}


def serve(sent: Sequence[bool], requested_ms: Sequence[int], unit_ms: Sequence[Sequence[int]],
          streams: int = 0, frames: int | None = None) -> list[Served]:
    """The served stream of one channel's events, in event order: `sent[k]`, `requested_ms[k]` and
    `unit_ms[k]` (when each unit of reply k arrives, non-decreasing) come from its Arrival;
    `streams`: the most live replies (0: no limit; KAME's server allows 7); `frames`: the
    dialogue's frames (a reply whose reset comes at or after the last never plays; None: no end).

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
        r = served_frame(first[k])
        nxt = adopted[pos + 1] if pos + 1 < len(adopted) else None
        cancel = first[nxt] if nxt is not None else float("inf")
        until = served_frame(first[nxt]) if nxt is not None else None
        if frames is not None and until is not None and until >= frames:
            until = None  # the next reply comes after the audio: this one plays to the end
        if frames is not None and r >= frames:
            out[k] = Served(frame=None)  # after the audio: it never plays
            continue
        if until is not None and until <= r:
            # the next reply's first chunk lands in the same frame: it overwrites this one whole
            out[k] = Served(frame=None, cut=len(unit_ms[k]))
            continue
        read, late, cut = [], 0, 0
        end = until if until is not None else frames  # the next reply's reset, or the end of the audio
        for j, t in enumerate(unit_ms[k]):
            f = r + 1 + j
            if end is not None and f >= end:
                cut += 1
            elif t > cancel or not in_time(t, f):
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


def timed_events(model: LatencyModel, events: Sequence[tuple], seed: int,
                 row_id: str, frames: int | None = None) -> list[dict[str, Any]]:
    """Per event (channel, ladder time in ms, reply text, and optionally its conversation_context
    and current_spoken_ratio, from which the server's transcripts come), in the same order: its
    Arrival under `model` and how the served stream played it. Each channel's events are one
    back-end's requests, drawn by the seed, the row id and the channel: what the write step stores
    as a row's oracle_arrival and what `kame-data infer --latency` replays. `frames`: the dialogue's
    length in frames (replies after it never play)."""
    out: list[dict[str, Any]] = [{} for _ in events]
    for channel in sorted({e[0] for e in events}):
        idx = [i for i, e in enumerate(events) if e[0] == channel]
        timed = [(events[i][1], events[i][2]) for i in idx]
        if all(len(events[i]) >= 5 for i in idx):  # the user's words, as the server's recognition gives them
            user = next(s for s, c in CHANNEL.items() if c != channel)
            said = transcripts([events[i][3] for i in idx], [float(events[i][4]) for i in idx], user)
            timed = [(ms, text, kind, words) for (ms, text), (kind, words) in zip(timed, said)]
        got = arrivals(model, timed, seed, f"{row_id}/{channel}")
        played = serve([a.sent for a in got], [a.requested_ms for a in got], [a.piece_ms for a in got],
                       streams=model.streams, frames=frames)
        for i, a, p in zip(idx, got, played):
            out[i] = {**a.to_dict(), **p.to_dict()}
    return out
