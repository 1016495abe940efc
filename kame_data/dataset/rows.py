"""The published dataset's row layout: Hugging Face features, Arrow schema, and sample -> row."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import pyarrow as pa

from kame_data.audio import wav_bytes
from kame_data.records import Sample

SAMPLE_RATE = 24000


@lru_cache(maxsize=1)
def features():
    """The `datasets.Features` of a row; audio is an `Audio(sampling_rate=24000)` feature."""
    from datasets import Audio, Features, List, Value

    s, f64, i32 = Value("string"), Value("float64"), Value("int32")
    return Features({
        "id": s, "item_id": s, "source": s, "category": s, "variant": i32,
        "duration": f64, "sample_rate": i32,
        "audio": Audio(sampling_rate=SAMPLE_RATE),
        "turns": List({"role": s, "speaker": s, "text": s, "spoken": s, "start": f64, "end": f64, "voice": s}),
        "words": List({"speaker": s, "word": s, "start": f64, "end": f64}),
        "oracle": List({
            "timestamp_ms": Value("int64"), "conversation_context": s, "prediction": s,
            "total_word_count": i32, "trigger_word": s, "recent_words": List(s),
            "current_spoken_ratio": f64, "channel": i32, "hint": s, "level": i32,
        }),
    })


def arrow_schema() -> pa.Schema:
    """Arrow schema carrying the `huggingface` features metadata, so loaders see `Audio`."""
    return features().arrow_schema


def sample_row(sample: Sample) -> dict[str, Any]:
    r = sample.rendered
    d = r.dialogue
    return {
        "id": d.id, "item_id": d.item_id, "source": d.source, "category": d.category, "variant": d.variant,
        "duration": round(r.duration, 4), "sample_rate": r.sample_rate,
        "audio": {"bytes": wav_bytes(r.audio, r.sample_rate), "path": f"{d.id}.wav"},
        "turns": [{**t.to_dict(), "start": tm.start, "end": tm.end, "voice": tm.voice}
                  for t, tm in zip(d.turns, r.timings)],
        "words": [w.to_dict() for w in r.words],
        "oracle": [e.to_dict() for e in sample.oracle],
    }


def row_metadata(row: dict[str, Any]) -> dict[str, Any]:
    """A row without its audio bytes: what the `sample` schema describes."""
    return {k: v for k, v in row.items() if k != "audio"}
