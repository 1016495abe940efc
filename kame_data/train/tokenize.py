"""A kame-data dataset -> a token dataset in kame_finetune's `prepare_dataset` layout.

One Parquet row per dialogue: `dialogue_id`; `A` and `B`, each 9 x T (row 0 the speaker's text
stream, rows 1-8 its Mimi codebooks; T Mimi frames); and per speaker the event-level oracle
columns `<S>_oracle_event_frame_pos`, `_event_ratio`, `_event_skip_forbid`, `_pred_values`,
`_pred_offsets`, `_hint_values`, `_hint_offsets`, with the element types of kame_finetune's
`utils/dataset_schema.py` (its optional `_event_use_hint` is left out: selection follows the ratio).
Speaker S's oracle events are those whose `channel` is S's channel (events that predict S's reply).

Beside the shards: `tokens.json` (frame rate, vocabularies, special ids, codec, splits, counts) and
the SentencePiece model used, so training reads the same vocabulary.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kame_data.atomic import atomic_path, write_bytes
from kame_data.audio import decode, resample
from kame_data.dataset.folder import DatasetDir, DatasetError
from kame_data.train.errors import TrainError
from kame_data.train.config import TokenizeConfig, TrainConfig
from kame_data.train.streams import (
    END_OF_PAD_ID,
    FRAME_RATE,
    TEXT_PAD_ID,
    OracleEvents,
    build_events,
    num_frames,
)
from kame_data.train.text_tokenizer import TextTokenizer, load_tokenizer, train_tiny_tokenizer
from kame_data.train.transcript import text_stream, text_stream_by_chars

log = logging.getLogger(__name__)

SPEAKERS = ("A", "B")
NUM_CODEBOOKS = 8
TOKENIZER_FILE = "tokenizer.model"
META_FILE = "tokens.json"
ROWS_PER_SHARD = 256  # dialogues per token shard: a shard is built in memory
ROWS_PER_GROUP = 16  # dialogues per Parquet row group: what the streaming loader reads at once


def token_schema(served: bool = False) -> pa.Schema:
    """kame_finetune's `prepared_dataset_features(use_oracle=True)` as Arrow (without use_hint);
    `served`: plus each speaker's served timing (`event_until`, `pred_read`, `hint_read`)."""
    seq = lambda t: pa.list_(t)  # noqa: E731
    fields = [pa.field("dialogue_id", pa.string()),
              pa.field("A", seq(seq(pa.int64()))), pa.field("B", seq(seq(pa.int64())))]
    extra = (("event_until", pa.int32()), ("pred_read", pa.int8()), ("hint_read", pa.int8())) if served else ()
    for sp in SPEAKERS:
        for name, t in (("event_frame_pos", pa.int32()), ("event_ratio", pa.float32()),
                        ("event_skip_forbid", pa.int8()), ("pred_values", pa.int32()), ("pred_offsets", pa.int32()),
                        ("hint_values", pa.int32()), ("hint_offsets", pa.int32()), *extra):
            fields.append(pa.field(f"{sp}_oracle_{name}", seq(t)))
    return pa.schema(fields)


# ---------------------------------------------------------------------------------------- text


def tiny_mimi_config(bins: int = 64) -> dict:
    """Mimi's architecture (same hop, 12.5 Hz, 8 codebooks kept) at a width that runs on a CPU."""
    from moshi.models import loaders

    cfg = copy.deepcopy(loaders._mimi_config)
    cfg["seanet"].update(dimension=32, n_filters=4)
    cfg["quantizer"].update(dimension=16, n_q=NUM_CODEBOOKS, bins=bins, input_dimension=32, output_dimension=32)
    cfg["transformer"].update(d_model=32, num_heads=2, num_layers=1, dim_feedforward=64, input_dimension=32,
                              output_dimensions=[32], context=50)
    return cfg


class Codec:
    """Mimi, real (Kyutai's weights) or tiny and random; encodes one mono channel to [8, T] codes."""

    def __init__(self, spec: str, seed: int = 0, bins: int = 64, device: str = "cpu"):
        import torch
        from moshi.models import loaders

        self.spec, self.device = spec, device
        if spec == "tiny":
            gen_state = torch.random.get_rng_state()
            torch.manual_seed(seed)
            try:
                self.model = loaders.get_mimi(None, mimi_config=tiny_mimi_config(bins), device=device,
                                              num_codebooks=NUM_CODEBOOKS)
                self._init_codebooks(seed)
            finally:
                torch.random.set_rng_state(gen_state)
        else:
            from kame_data.train.model import resolve_file

            path = resolve_file(spec, loaders.MIMI_NAME)
            self.model = loaders.get_mimi(path, device=device, num_codebooks=NUM_CODEBOOKS)
        self.model.eval()
        self.card = int(self.model.cardinality)
        self.sample_rate = int(self.model.sample_rate)

    def _init_codebooks(self, seed: int) -> None:
        """A fresh Mimi's codebooks are all zero until a forward in train mode fits them to data
        (one residual level per forward), so run forwards on a fixed synthetic signal until all are."""
        import torch
        from moshi.quantization.core_vq import EuclideanCodebook

        books = [m for m in self.model.modules() if isinstance(m, EuclideanCodebook)]
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(1920 * 64) / 24000.0
        x = 0.1 * torch.randn(4, 1, t.numel(), generator=g) + 0.3 * torch.sin(2 * torch.pi * 220 * t * (1 + torch.arange(4)[:, None, None]))
        self.model.train()
        with torch.no_grad():
            for _ in range(len(books) + 1):
                if all(b.initialized for b in books):
                    break
                self.model(x)
        self.model.eval()

    def encode(self, mono: np.ndarray) -> np.ndarray:
        """int16 or float samples at 24 kHz -> int64 [8, ceil(n / 1920)]."""
        import torch

        x = mono.astype(np.float32) / 32768.0 if mono.dtype == np.int16 else mono.astype(np.float32)
        with torch.no_grad():
            codes = self.model.encode(torch.from_numpy(x)[None, None].to(self.device))
        return codes[0].cpu().numpy().astype(np.int64)


# ---------------------------------------------------------------------------------------- dataset


def open_dataset(path: Path) -> DatasetDir:
    """The dataset to train on: a `kame-data run` output, or a bare folder of shards under data/."""
    try:
        return DatasetDir.open(path, check_shards=True, need_manifest=False)
    except DatasetError as e:
        raise TrainError(str(e)) from e


def read_audio(row: dict) -> tuple[np.ndarray, int]:
    """The row's stereo audio as float32 frames × 2, and its sample rate."""
    data, sr = decode(row["audio"]["bytes"])
    if data.shape[1] != 2:
        raise TrainError(f"row {row['id']}: expected stereo audio (A left, B right), got {data.shape[1]} channel(s)")
    return data, sr


@dataclass
class TokenDatasetInfo:
    path: Path
    meta: dict

    @property
    def text_card(self) -> int:
        return int(self.meta["text_vocab_size"])

    def files(self, split: str) -> list[Path]:
        return [self.path / f for f in self.meta["splits"].get(split, {}).get("files", [])]


def tokenize_row(row: dict, codec: Codec, tok: TextTokenizer, channels: dict[str, int],
                 rules: TokenizeConfig | None = None, timing: str = "ideal") -> tuple[dict, dict]:
    """One dataset row -> one token row (see the module docstring) and drop counts. `rules`:
    text placement, frame arithmetic and skip_forbid (default: the reference's); `timing`: `served`
    places events where the row's oracle_arrival says the front-end read them (docs/design.md,
    "Oracle arrival")."""
    rules = rules or TokenizeConfig()
    arrivals = None
    if timing == "served":
        arrivals = row.get("oracle_arrival")
        if arrivals is None:
            raise TrainError(f"row {row['id']}: oracle.timing: served needs the oracle_arrival column; make the "
                             "dataset with a recipe whose oracle.latency is a latency model (e.g. hosted-fast)")
    audio, sr = read_audio(row)
    codes = {}
    for sp in SPEAKERS:
        mono = resample(audio[:, channels[sp]], sr, codec.sample_rate)
        codes[sp] = codec.encode(mono)
    T = min(c.shape[1] for c in codes.values())
    expected = num_frames(int(round(len(audio) * codec.sample_rate / sr)), codec.sample_rate)
    if abs(T - expected) > 1:
        raise TrainError(f"row {row['id']}: codec gave {T} frames, expected {expected}")
    words = sorted(row["words"], key=lambda w: (w["start"], w["end"]))
    out: dict = {"dialogue_id": row["id"]}
    drops = {"outside_audio": 0, "no_tokens": 0, **({"not_served": 0} if arrivals is not None else {})}
    for sp in SPEAKERS:
        mine = [w for w in words if w["speaker"] == sp]
        if rules.text_placement == "chars":
            text = text_stream_by_chars([(w["word"], w["start"], w["end"]) for w in mine], tok.pieces, T,
                                        rules.frame_arithmetic)
        else:
            text = text_stream(((w["word"], w["start"]) for w in mine), tok.encode, T, rules.frame_arithmetic)
        out[sp] = np.concatenate([text[None], codes[sp][:, :T]], axis=0).tolist()
    for sp in SPEAKERS:
        ev, d = build_events(row["oracle"] or [], channels[sp], sp, row["words"], T, tok.encode_text,
                             rules.skip_forbid, rules.frame_arithmetic, arrivals, tok.char_ends)
        out.update(ev.columns(f"{sp}_oracle"))
        for k, v in d.items():
            drops[k] += v
    return out, drops


def _dataset_texts(ds: DatasetDir, splits: list[str]) -> list[str]:
    texts: list[str] = []
    for split in splits:
        for r in ds.rows(["words", "oracle"], split=split):
            texts.append(" ".join(w["word"] for w in r["words"]))
            for e in r["oracle"] or []:
                texts.extend(x for x in (e.get("prediction"), e.get("hint")) if x)
    return texts


def tokenize_dataset(dataset: Path, out: Path, cfg: TrainConfig,
                     progress: Callable[[str, int], object] | None = None) -> TokenDatasetInfo:
    """Tokenise every split of `dataset` that training uses into `out` (reused when `tokens.json`
    says it was made from the same dataset with the same settings). Shards are written under a
    temporary name and renamed, `tokens.json` last."""
    dataset, out = Path(dataset), Path(out)
    ds = open_dataset(dataset)
    wanted = [s for s in dict.fromkeys([cfg.data.train_split, cfg.data.eval_split]) if s]
    if cfg.data.train_split not in ds.splits:
        raise TrainError(f"{dataset}: no '{cfg.data.train_split}' shards under data/ "
                         f"(splits there: {sorted(ds.splits) or 'none'})")
    splits = [s for s in wanted if s in ds.splits]  # a small run may have no eval split
    source = {s: [[sh.path.name, sh.path.stat().st_size, int(sh.path.stat().st_mtime)] for sh in ds.shards(s)]
              for s in splits}
    key = {"tokenize": cfg.tokenize_hash(), "source": source}
    meta_path = out / META_FILE
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text("utf-8"))
        if meta.get("key") == key and all((out / f).is_file() for s in meta["splits"].values() for f in s["files"]):
            log.info("token dataset %s is up to date", out)
            return TokenDatasetInfo(out, meta)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tc = cfg.tokenize
    if tc.text_tokenizer == "tiny":
        tok = train_tiny_tokenizer(_dataset_texts(ds, splits), tc.tiny_vocab_size)
    else:
        tok = load_tokenizer(tc.text_tokenizer)
    codec = Codec(tc.codec, seed=cfg.seed, bins=tc.tiny_codec_bins, device=tc.device)
    write_bytes(out / TOKENIZER_FILE, tok.model_bytes)
    meta_splits: dict[str, dict] = {}
    served = cfg.oracle.timing == "served"
    drops = {"outside_audio": 0, "no_tokens": 0, **({"not_served": 0} if served else {})}
    schema = token_schema(served)
    for split in splits:
        total = ds.num_rows(split)
        n_shards = max(1, -(-total // ROWS_PER_SHARD))
        names = [f"{split}-{i:05d}-of-{n_shards:05d}.parquet" for i in range(n_shards)]
        stats = {"rows": 0, "frames": 0, "events": {sp: 0 for sp in SPEAKERS}}
        bar = progress(f"tok:{split}", total) if progress else None
        rows: list[dict] = []
        written: list[str] = []

        def flush() -> None:
            name = names[len(written)]
            with atomic_path(out / name) as tmp:
                pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp, row_group_size=ROWS_PER_GROUP)
            written.append(name)
            rows.clear()

        for row in ds.rows(split=split):
            r, d = tokenize_row(row, codec, tok, tc.channels, tc, cfg.oracle.timing)
            rows.append(r)
            stats["rows"] += 1
            stats["frames"] += len(r["A"][0])
            for sp in SPEAKERS:
                stats["events"][sp] += len(r[f"{sp}_oracle_event_frame_pos"])
            for k, v in d.items():
                drops[k] += v
            if len(rows) == ROWS_PER_SHARD:
                flush()
            if bar is not None:
                bar.update(1)
        if rows or not written:
            flush()
        if bar is not None:
            bar.close()
        meta_splits[split] = {"files": names, **stats}
    meta = {
        "format": "kame_finetune prepare_dataset (use_oracle=True)",
        "key": key,
        "frame_rate": FRAME_RATE,
        "num_codebooks": NUM_CODEBOOKS,
        "codec": {"spec": tc.codec, "card": codec.card, "sample_rate": codec.sample_rate},
        "text_tokenizer": {"spec": tc.text_tokenizer, "file": TOKENIZER_FILE},
        "text_vocab_size": tok.vocab_size,
        "text_pad_id": TEXT_PAD_ID,
        "end_of_pad_id": END_OF_PAD_ID,
        "channels": dict(tc.channels),
        "text_placement": tc.text_placement,
        "frame_arithmetic": tc.frame_arithmetic,
        "skip_forbid": tc.skip_forbid,
        "splits": meta_splits,
        "dropped_events": drops,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    write_bytes(meta_path, json.dumps(meta, indent=2).encode())
    log.info("tokenised %s into %s in %.1f s: %s", dataset, out, meta["seconds"],
             {s: v["rows"] for s, v in meta_splits.items()})
    return TokenDatasetInfo(out, meta)


def open_token_dataset(path: Path) -> TokenDatasetInfo:
    meta_path = Path(path) / META_FILE
    if not meta_path.is_file():
        raise TrainError(f"{path}: not a token dataset (no {META_FILE})")
    return TokenDatasetInfo(Path(path), json.loads(meta_path.read_text("utf-8")))


def read_token_rows(files: list[Path]) -> list[dict]:
    return [r for f in files for r in pq.read_table(f).to_pylist()]


def events_of(row: dict, speaker: str) -> OracleEvents:
    return OracleEvents.from_columns(row, f"{speaker}_oracle")
