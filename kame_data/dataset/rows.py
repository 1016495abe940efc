"""The published dataset's row layout: Hugging Face features, Arrow schema, and sample -> row."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import pyarrow as pa

from kame_data.audio import wav_bytes
from kame_data.oracle.latency import IDEAL, LatencyModel
from kame_data.oracle.serve import FRAME_MS, timed_events
from kame_data.records import Sample

SAMPLE_RATE = 24000
ORACLE_COLUMN = "oracle"  # a row's oracle events (kame_data's field names, docs/design.md "Oracle events")
# Each event's trip through a modelled back-end, by index into `oracle`; only under a latency model
# other than `ideal` (docs/design.md, "Oracle arrival"), so an ideal row is what it always was.
ARRIVAL_COLUMN = "oracle_arrival"
# Per-turn speech figures (null where not measured): Whisper's WER, then the quality step's.
TURN_FIGURES = ("wer", "dnsmos", "dnsmos_sig", "dnsmos_bak", "vad_speech_s", "vad_outside_s", "vad_word_share", "lufs")


@lru_cache(maxsize=2)
def features(arrival: bool = False):
    """The `datasets.Features` of a row; audio is an `Audio(sampling_rate=24000)` feature. `arrival`:
    with the oracle_arrival column (a latency model other than ideal)."""
    from datasets import Audio, Features, List, Value

    s, f64, i32, i64 = Value("string"), Value("float64"), Value("int32"), Value("int64")
    extra = {ARRIVAL_COLUMN: List({
        "ideal_ms": i64, "heard_ms": i64, "requested_ms": i64, "first_token_ms": i64, "piece_ms": List(i64),
        "sent": Value("bool"), "frame": i32, "until": i32, "read": i32, "late": i32, "cut": i32,
    })} if arrival else {}
    return Features({
        "id": s, "item_id": s, "source": s, "category": s, "variant": i32,
        "duration": f64, "sample_rate": i32,
        "audio": Audio(sampling_rate=SAMPLE_RATE),
        "turns": List({"role": s, "speaker": s, "text": s, "spoken": s, "start": f64, "end": f64, "voice": s,
                       **{k: f64 for k in TURN_FIGURES}, "clipped": i32, "cut_words": i32}),
        "words": List({"speaker": s, "word": s, "start": f64, "end": f64, "backchannel": Value("bool")}),
        ORACLE_COLUMN: List({
            "timestamp_ms": Value("int64"), "conversation_context": s, "prediction": s,
            "total_word_count": i32, "trigger_word": s, "recent_words": List(s),
            "current_spoken_ratio": f64, "channel": i32, "hint": s, "level": i32,
        }),
        # what the acoustics step did to the user channel; null: it is clean
        "acoustics": {"snr_db": f64, "noise": s, "mic": s, "gain_db": f64, "limiter_db": f64,
                      "room": {"dims": List(f64), "rt60": f64, "source": List(f64), "mic": List(f64), "distance": f64}},
        **extra,
    })


def arrow_schema(arrival: bool = False) -> pa.Schema:
    """Arrow schema carrying the `huggingface` features metadata, so loaders see `Audio`."""
    return features(arrival).arrow_schema


def sample_row(sample: Sample, latency: LatencyModel = IDEAL, seed: int = 0) -> dict[str, Any]:
    r = sample.rendered
    d = r.dialogue
    return {
        "id": d.id, "item_id": d.item_id, "source": d.source, "category": d.category, "variant": d.variant,
        "duration": round(r.duration, 4), "sample_rate": r.sample_rate,
        "audio": {"bytes": wav_bytes(r.audio, r.sample_rate), "path": f"{d.id}.wav"},
        "turns": [{**t.to_dict(), "start": tm.start, "end": tm.end, "voice": tm.voice, **_figures(r, k)}
                  for k, (t, tm) in enumerate(zip(d.turns, r.timings))],
        "words": [w.to_dict() for w in r.words],
        ORACLE_COLUMN: [e.to_dict() for e in sample.oracle],
        "acoustics": r.acoustics or None,
        **({} if latency.ideal else {ARRIVAL_COLUMN: event_arrivals(sample, latency, seed)}),
    }


def event_arrivals(sample: Sample, latency: LatencyModel, seed: int) -> list[dict[str, Any]]:
    """Per oracle event (same order): its arrival under `latency` and how the served stream played it,
    in reply pieces (oracle/serve.timed_events; the trainer replays it in its own tokens)."""
    r = sample.rendered
    frames = round(len(r.audio) * 1000 / r.sample_rate) // FRAME_MS  # the server steps whole frames only
    return timed_events(latency, [(e.channel, e.timestamp_ms, e.prediction, e.conversation_context,
                                   e.current_spoken_ratio) for e in sample.oracle], seed, sample.id, frames)


def _figures(r, k: int) -> dict[str, Any]:
    """Turn k's speech figures; None where a step did not measure them."""
    q = r.turn_quality[k] if k < len(r.turn_quality) else {}
    out: dict[str, Any] = {name: q.get(name) for name in TURN_FIGURES}
    out["wer"] = r.turn_wer[k] if k < len(r.turn_wer) else None
    out["clipped"] = q.get("clipped")
    out["cut_words"] = r.turn_cut_words[k] if k < len(r.turn_cut_words) else 0
    return out


def row_metadata(row: dict[str, Any]) -> dict[str, Any]:
    """A row without its audio bytes: what the `sample` schema describes."""
    return {k: v for k, v in row.items() if k != "audio"}
