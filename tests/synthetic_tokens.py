"""A token dataset in the trainer's Parquet layout (tokenize.token_schema), written from random
codes and events of paper-like size: what `kame-data train` streams, without rendering audio
first. Used by the distributed-training tests and the loader memory benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kame_data.train.streams import OracleEvents, pack_ragged
from kame_data.train.tokenize import META_FILE, ROWS_PER_GROUP, ROWS_PER_SHARD, token_schema


def events_from_rows(rows) -> OracleEvents:
    """Hand-written oracle events for worked examples. rows: (frame, ratio, forbid, pred tokens, hint tokens)."""
    pv, po = pack_ragged([r[3] for r in rows])
    hv, ho = pack_ragged([r[4] for r in rows])
    return OracleEvents(np.array([r[0] for r in rows], np.int32), np.array([r[1] for r in rows], np.float32),
                        np.array([r[2] for r in rows], np.int8), pv, po, hv, ho)


def _events(rng: np.random.Generator, T: int, n: int, vocab: int) -> OracleEvents:
    frames = np.sort(rng.integers(0, T, n)).astype(np.int32)
    preds = [rng.integers(4, vocab, rng.integers(4, 20)).tolist() for _ in range(n)]
    hints = [rng.integers(4, vocab, rng.integers(0, 20)).tolist() for _ in range(n)]
    pv, po = pack_ragged(preds)
    hv, ho = pack_ragged(hints)
    ratio = rng.uniform(0.0, 1.2, n).astype(np.float32)
    skip = np.zeros(n, np.int8)
    skip[-1:] = 1
    return OracleEvents(frames, ratio, skip, pv, po, hv, ho)


def token_row(i: int, seed: int, frames: tuple[int, int], vocab: int, card: int) -> dict:
    rng = np.random.default_rng([seed, i])
    T = int(rng.integers(*frames))
    row: dict = {"dialogue_id": f"d{i:06d}"}
    for sp in "AB":
        text = np.full(T, 3, np.int64)
        speech = rng.random(T) < 0.4
        text[speech] = rng.integers(4, vocab, int(speech.sum()))
        codes = rng.integers(0, card, (8, T))
        row[sp] = np.concatenate([text[None], codes]).tolist()
        row.update(_events(rng, T, int(rng.integers(5, 40)), vocab).columns(f"{sp}_oracle"))
    return row


def write_token_dataset(out: Path, dialogues: int, seed: int = 0, frames: tuple[int, int] = (300, 700),
                        vocab: int = 200, card: int = 64, split: str = "train") -> Path:
    """`dialogues` rows in shards of ROWS_PER_SHARD (row groups of ROWS_PER_GROUP) plus tokens.json;
    rows are made and written a shard at a time."""
    out.mkdir(parents=True, exist_ok=True)
    n_shards = max(1, -(-dialogues // ROWS_PER_SHARD))
    names = []
    for s in range(n_shards):
        rows = [token_row(i, seed, frames, vocab, card)
                for i in range(s * ROWS_PER_SHARD, min(dialogues, (s + 1) * ROWS_PER_SHARD))]
        name = f"{split}-{s:05d}-of-{n_shards:05d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=token_schema()), out / name, row_group_size=ROWS_PER_GROUP)
        names.append(name)
    meta = {"format": "kame_finetune prepare_dataset (use_oracle=True)", "frame_rate": 12.5, "num_codebooks": 8,
            "codec": {"spec": "synthetic", "card": card, "sample_rate": 24000},
            "text_tokenizer": {"spec": "synthetic"}, "text_vocab_size": vocab, "text_pad_id": 3, "end_of_pad_id": 0,
            "channels": {"A": 0, "B": 1}, "splits": {split: {"files": names, "rows": dialogues}}}
    (out / META_FILE).write_text(json.dumps(meta, indent=2), "utf-8")
    return out
