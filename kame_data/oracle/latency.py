"""Oracle arrival times: when a simulated back-end's words would reach a KAME front-end.

The ladder (ladder.py) places each event at the instant its partial transcript exists, as if
speech recognition, the network and the LLM took no time. A latency model says how late each
stage of a real back-end is (docs/design.md, "Oracle arrival"): the words are heard after a
streaming-STT delay, asked when the server's multiplexer starts a stream, answered after a round trip and the
time to first token, and streamed at some tokens per second, now and then with a stall. Every draw
is seeded by the recipe seed, the dialogue id and the event's index, so a dataset does not depend
on worker count or order. `serve.py` turns the arrivals into what a front-end reads, frame by frame (SakanaAI/kame
`src/kame/server_oracle.py` is the server it follows: a stream started on each new interim
transcript at least 0.5 s after the last start, a trailing start in between, a final at once;
replies streamed side by side, the first to answer among the newer ones adopted).
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Mapping, Sequence

# One streamed piece of a reply: a word with its leading space, or one punctuation mark. Hosted
# models' rates are in BPE tokens, about 1.3 per English word; pieces are about 1.15 per word, so
# a rate measured in tokens is multiplied by PIECES_PER_TOKEN to give pieces per second.
_PIECE = re.compile(r"\s*[\w'’-]+|\s*[^\w\s]|\s+$")
PIECES_PER_TOKEN = 0.88


def pieces(text: str) -> list[str]:
    """The reply as the pieces it streams in; joined, they give the text back."""
    out = _PIECE.findall(text)
    return out if "".join(out) == text else _fallback(text)


def _fallback(text: str) -> list[str]:
    """Whitespace-led chunks for text the piece pattern does not cover end to end."""
    return re.findall(r"\s*\S+|\s+$", text) or ([text] if text else [])


@dataclass(frozen=True)
class Dist:
    """A non-negative random quantity. `const`: `a`; `uniform`: between `a` and `b`; `gamma`: mean
    `a`, coefficient of variation `b` (right-skewed, as network round trips and time to first token
    are); `lognormal`: median `a`, log-sd `b`."""

    kind: Literal["const", "uniform", "gamma", "lognormal"] = "const"
    a: float = 0.0
    b: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("const", "uniform", "gamma", "lognormal"):
            raise ValueError(f"a latency distribution is const, uniform, gamma or lognormal, not {self.kind!r}")
        if self.a < 0 or self.b < 0 or (self.kind == "uniform" and self.b < self.a):
            raise ValueError(f"{self.kind}({self.a}, {self.b}): parameters must be >= 0 (uniform: low <= high)")

    @classmethod
    def parse(cls, value: Any, what: str) -> "Dist":
        """A number (constant) or `{dist: gamma, mean: 0.5, cv: 0.3}` / `{dist: uniform, low, high}` /
        `{dist: lognormal, median, sigma}` from a recipe."""
        if isinstance(value, Dist):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls("const", float(value))
        if not isinstance(value, Mapping):
            raise ValueError(f"{what}: a number or a mapping with `dist`, not {value!r}")
        names = {"const": ("value", None), "uniform": ("low", "high"), "gamma": ("mean", "cv"),
                 "lognormal": ("median", "sigma")}
        kind = value.get("dist")
        if kind not in names:
            raise ValueError(f"{what}.dist must be one of {sorted(names)}, not {kind!r}")
        first, second = names[kind]
        extra = set(value) - {"dist", first, second}
        if extra or first not in value or (second and second not in value):
            raise ValueError(f"{what}: `{kind}` takes {first}" + (f" and {second}" if second else "")
                             + (f", not {sorted(extra)}" if extra else ""))
        try:
            return cls(kind, float(value[first]), float(value[second]) if second else 0.0)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{what}: {e}") from e

    def draw(self, rng: random.Random) -> float:
        if self.kind == "const":
            return self.a
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        if self.kind == "gamma":
            if self.b == 0 or self.a == 0:
                return self.a
            shape = 1.0 / (self.b * self.b)
            return rng.gammavariate(shape, self.a / shape)
        return self.a * math.exp(rng.gauss(0.0, self.b)) if self.a else 0.0

    @property
    def mean(self) -> float:
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        if self.kind == "lognormal":
            return self.a * math.exp(self.b * self.b / 2)
        return self.a

    def describe(self) -> str:
        return {"const": f"{self.a:g}", "uniform": f"uniform {self.a:g}-{self.b:g}",
                "gamma": f"gamma mean {self.a:g} cv {self.b:g}",
                "lognormal": f"lognormal median {self.a:g} sigma {self.b:g}"}[self.kind]


@dataclass(frozen=True)
class LatencyModel:
    """How late a back-end is, stage by stage (seconds, except the rate). `ideal` is all zeros:
    every event arrives whole at its ladder time, which is what the data held before this model."""

    name: str = "ideal"
    stt_delay: Dist = Dist()  # the streaming STT: a word ending at t is in the transcript at t + this
    tick: float = 0.0  # the older server's check loop period: a request leaves at its next tick (0: at once)
    round_trip: Dist = Dist()  # network, both ways
    first_token: Dist = Dist()  # the LLM's time to first token, on the server
    tokens_per_s: Dist = Dist()  # the LLM's streaming rate, in BPE tokens (0: the whole reply at once)
    chunk: int = 1  # pieces per streamed chunk (0: the whole reply in one chunk)
    stall_chance: float = 0.0  # chance that a reply's stream stops once, part way
    stall: Dist = Dist()  # how long it stops
    restarts: int = 0  # the older single-stream server: at most this many requests (0: no cap) ...
    restart_window: float = 2.0  # ... per this many seconds
    streams: int = 0  # the most replies streaming at once (0: no limit; KAME's server_oracle: 7)
    # KAME's multiplexer (server_oracle.py LLMStreamMultiplexer): a start on each new interim transcript at
    # least this long after the last start, a trailing start otherwise, a final at once (0: the tick policy)
    min_restart_interval: float = 0.0
    source: str = ""  # where the figures come from

    @property
    def ideal(self) -> bool:
        return self == IDEAL

    def expected_delay_s(self) -> float:
        """Expected ladder-time-to-first-chunk, ignoring restarts and superseded events: STT + the
        mean wait for the tick (half of it) + round trip + time to first token."""
        return self.stt_delay.mean + (0.0 if self.min_restart_interval else self.tick / 2) + self.round_trip.mean \
            + self.first_token.mean

    def describe(self) -> dict[str, Any]:
        return {"preset": self.name, "stt_delay_s": self.stt_delay.describe(), "tick_s": self.tick,
                "round_trip_s": self.round_trip.describe(), "first_token_s": self.first_token.describe(),
                "tokens_per_s": self.tokens_per_s.describe(), "chunk": self.chunk,
                "stall_chance": self.stall_chance, "stall_s": self.stall.describe(),
                "restarts": f"{self.restarts} per {self.restart_window:g} s" if self.restarts else "no cap",
                "min_restart_interval_s": self.min_restart_interval,
                "streams": self.streams or "no limit",
                "expected_delay_s": round(self.expected_delay_s(), 4), "source": self.source}


IDEAL = LatencyModel()

# Figures: ../shared/STACK.md "Latency figures for modelling oracle arrival" and "How KAME serves
# the oracle" (docs/concepts/oracle-arrival.md repeats them with their sources).
PRESETS: dict[str, LatencyModel] = {
    "ideal": IDEAL,
    "hosted-fast": LatencyModel(
        name="hosted-fast", min_restart_interval=0.5, streams=7, stt_delay=Dist("const", 0.5), round_trip=Dist("gamma", 0.08, 0.5),
        first_token=Dist("gamma", 0.5, 0.4), tokens_per_s=Dist("uniform", 70, 90),
        source="kyutai stt-1b 0.5 s STT; GPT-4.1 about 0.5 s to first token and 70-90 tokens/s; "
               "KAME server_oracle's multiplexer (0.5 s between starts, 7 streams); gamma round trips"),
    "hosted-slow": LatencyModel(
        name="hosted-slow", min_restart_interval=0.5, streams=7, stt_delay=Dist("const", 0.5), round_trip=Dist("gamma", 0.15, 0.6),
        first_token=Dist("gamma", 2.7, 0.4), tokens_per_s=Dist("uniform", 35, 55),
        source="kyutai stt-1b 0.5 s STT; Claude Opus 4.1 about 2.7 s to first token and 45 tokens/s; "
               "KAME server_oracle's multiplexer (0.5 s between starts, 7 streams); gamma round trips"),
    "stress": LatencyModel(
        name="stress", min_restart_interval=0.5, streams=7, stt_delay=Dist("uniform", 2.5, 3.3), round_trip=Dist("gamma", 0.3, 1.0),
        first_token=Dist("lognormal", 1.5, 0.6), tokens_per_s=Dist("uniform", 8, 20), stall_chance=0.3,
        stall=Dist("gamma", 1.5, 0.8),
        source="stt-2.6b 2.5 s to Whisper-Streaming 3.3 s STT; median time to first token 0.3-4.2 s across "
               "hosted models (hourly probes); slow streams with stalls"),
}

_KEYS = {"stt_delay": "dist", "tick": "num", "round_trip": "dist", "first_token": "dist", "tokens_per_s": "dist",
         "chunk": "int", "stall_chance": "num", "stall": "dist", "restarts": "int", "restart_window": "num",
         "streams": "int", "min_restart_interval": "num"}


def parse_latency(value: Any) -> LatencyModel:
    """The recipe's `oracle.latency`: a preset name, or `{preset: NAME, <parameter>: ...}` (a preset with
    some parameters replaced), or the parameters alone (starting from `ideal`)."""
    if value is None:
        return IDEAL
    if isinstance(value, LatencyModel):
        return value
    if isinstance(value, str):
        value = {"preset": value}
    if not isinstance(value, Mapping):
        raise ValueError(f"oracle.latency: a preset name ({', '.join(PRESETS)}) or a mapping, not {value!r}")
    preset = value.get("preset", "ideal")
    if preset not in PRESETS:
        raise ValueError(f"oracle.latency.preset: one of {', '.join(PRESETS)}, not {preset!r}")
    unknown = set(value) - set(_KEYS) - {"preset"}
    if unknown:
        raise ValueError(f"oracle.latency: unknown key(s) {sorted(unknown)}; known: preset, {', '.join(_KEYS)}")
    changes: dict[str, Any] = {}
    for key, kind in _KEYS.items():
        if key not in value:
            continue
        v = value[key]
        if kind == "dist":
            changes[key] = Dist.parse(v, f"oracle.latency.{key}")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or (kind == "int" and int(v) != v):
            raise ValueError(f"oracle.latency.{key}: a {'whole ' if kind == 'int' else ''}number >= 0, not {v!r}")
        else:
            changes[key] = int(v) if kind == "int" else float(v)
    if changes.get("stall_chance", 0) > 1:
        raise ValueError("oracle.latency.stall_chance: a chance, between 0 and 1")
    if changes.get("tokens_per_s") is not None and changes["tokens_per_s"].mean == 0:
        raise ValueError("oracle.latency.tokens_per_s: a rate above 0")
    model = replace(PRESETS[preset], **changes)
    if model == PRESETS[preset]:  # no change, or changes that restate the preset
        return model
    return replace(model, name=f"{preset}+custom")


@dataclass(frozen=True)
class Arrival:
    """One event's trip through the back-end, in ms on the dialogue's clock. `sent`: False when the
    server never asked (a later event's words reached the same tick, or the restart cap was full);
    then the other times are those it would have had. `piece_ms[j]`: when reply piece j arrives."""

    ideal_ms: int
    heard_ms: int
    requested_ms: int
    first_token_ms: int
    piece_ms: list[int] = field(default_factory=list)
    sent: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"ideal_ms": self.ideal_ms, "heard_ms": self.heard_ms, "requested_ms": self.requested_ms,
                "first_token_ms": self.first_token_ms, "piece_ms": list(self.piece_ms), "sent": self.sent}


def _rng(seed: int, dialogue_id: str, index: int, what: str) -> random.Random:
    key = f"{seed}\x1f{dialogue_id}\x1f{index}\x1f{what}".encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


PARTIAL, FINAL = "partial", "final"


def transcripts(contexts: Sequence[str], ratios: Sequence[float], user: str) -> list[tuple[str, str]]:
    """What the server's speech recognition says at each event, from the event's transcript
    (`conversation_context`, one line per run) and `current_spoken_ratio`: (PARTIAL, words) when the
    user's current run has new words, (FINAL, words) the first time the whole run is heard, ("", words)
    when nothing new reached the server (the assistant spoke last, or the user's words did not change)."""
    out, prev, finished = [], None, False
    for ctx, ratio in zip(contexts, ratios):
        last = ctx.rsplit("\n", 1)[-1]
        if not last.startswith(f"{user}:"):
            out.append(("", ""))
            prev, finished = None, False
            continue
        words = last[len(user) + 1:].strip()
        if ratio >= 1.0 and not (finished and words == prev):
            out.append((FINAL, words))
            finished = True
        elif words != prev and not finished:
            out.append((PARTIAL, words))
        else:
            out.append(("", words))
        prev = words
    return out


def multiplexer_starts(heard: Sequence[float], said: Sequence[tuple[str, str]], interval: float) -> list[float | None]:
    """When each event's request leaves under KAME's LLMStreamMultiplexer (server_oracle.py
    `on_interim_pending`, `on_final_committed`, `_maybe_start_new_stream`), None when it never does.
    A new interim transcript starts a stream when `interval` has passed since the last start; sooner,
    it schedules one trailing start at the end of that interval, which sends the latest interim
    transcript then. A final transcript starts at once, unless exactly its words were the last
    requested; it cancels a pending trailing start."""
    starts: list[float | None] = [None] * len(heard)
    last_start, trailing, latest, asked = -math.inf, None, None, None
    for i, (t, (kind, words)) in enumerate(zip(heard, said)):
        if trailing is not None and trailing <= t and latest is not None:  # fires before this event reaches it
            starts[latest], last_start, asked, trailing = trailing, trailing, said[latest][1], None
        if kind == PARTIAL:
            latest = i
            if t - last_start >= interval - 1e-9:
                starts[i], last_start, asked = t, t, words
            elif trailing is None:
                trailing = last_start + interval
        elif kind == FINAL:
            trailing = None
            if words != asked:
                starts[i], last_start = t, t
            latest, asked = None, None
    if trailing is not None and latest is not None:
        starts[latest] = trailing
    return starts


def arrivals(model: LatencyModel, events: Sequence[tuple], seed: int, dialogue_id: str) -> list[Arrival]:
    """Each event's arrival under `model`: `events` are (ladder time in ms, reply text) of one
    channel, in time order, optionally with (transcript kind, words) from `transcripts` (without:
    every event a new interim transcript). Pure: the same inputs give the same arrivals."""
    out: list[Arrival] = []
    phase = _rng(seed, dialogue_id, -1, "tick").uniform(0.0, model.tick) if model.tick else 0.0
    heard_prev = -math.inf
    sent_at: list[float] = []  # request times of sent events (seconds), for the restart cap
    last_tick = None
    starts = _starts(model, events, seed, dialogue_id)
    for i, (ms, text, *_) in enumerate(events):
        rng = _rng(seed, dialogue_id, i, "event")
        t = ms / 1000.0
        heard = max(heard_prev, t + model.stt_delay.draw(rng))  # the transcript only grows
        heard_prev = heard
        if starts is not None:
            requested = heard if starts[i] is None else starts[i]
        elif model.tick:
            requested = phase + math.ceil((heard - phase) / model.tick - 1e-9) * model.tick
        else:
            requested = heard
        first = requested + model.round_trip.draw(rng) + model.first_token.draw(rng)
        rate = model.tokens_per_s.draw(rng) * PIECES_PER_TOKEN
        n = len(pieces(text))
        stall_at, stall = n, 0.0
        if model.stall_chance and rng.random() < model.stall_chance and n > 1:
            stall_at, stall = rng.randrange(1, n), model.stall.draw(rng)
        times = []
        for j in range(n):
            # a chunk leaves when its last piece is generated (chunk 0: the whole reply at once)
            last = n - 1 if model.chunk <= 0 else min(n - 1, (j // model.chunk + 1) * model.chunk - 1)
            streamed = last / rate if math.isfinite(rate) and rate > 0 else 0.0
            times.append(first + streamed + (stall if last >= stall_at else 0.0))
        if starts is not None:  # the multiplexer: no tick, no cap
            out.append(Arrival(ideal_ms=ms, heard_ms=_ms(heard), requested_ms=_ms(requested),
                               first_token_ms=_ms(first), piece_ms=[_ms(x) for x in times], sent=starts[i] is not None))
            continue
        if out and last_tick is not None and abs(requested - last_tick) < 1e-9 and out[-1].sent:
            # two events heard before the same tick: the server asks once, with the later words
            out[-1] = replace(out[-1], sent=False)
            sent_at.pop()
        recent = [s for s in sent_at if s > requested - model.restart_window + 1e-9]
        sent = not model.restarts or len(recent) < model.restarts
        if sent:
            sent_at.append(requested)
            last_tick = requested
        out.append(Arrival(ideal_ms=ms, heard_ms=_ms(heard), requested_ms=_ms(requested), first_token_ms=_ms(first),
                           piece_ms=[_ms(x) for x in times], sent=sent))
    return out


def _starts(model: LatencyModel, events: Sequence[tuple], seed: int, dialogue_id: str) -> list[float | None] | None:
    """The multiplexer's request times in seconds (None: the tick policy applies), over the times
    the events are heard: each event's STT delay is the first draw of its own generator, so drawing
    it here gives the same times the arrivals get."""
    if not model.min_restart_interval:
        return None
    heard, prev = [], -math.inf
    for i, (ms, *_) in enumerate(events):
        prev = max(prev, ms / 1000.0 + model.stt_delay.draw(_rng(seed, dialogue_id, i, "event")))
        heard.append(prev)
    said = [tuple(e[2:4]) if len(e) >= 4 else (PARTIAL, str(i)) for i, e in enumerate(events)]
    return multiplexer_starts(heard, said, model.min_restart_interval)


def _ms(seconds: float) -> int:
    return int(math.floor(seconds * 1000.0 + 1e-6))
