"""`kame-data train`: tokenise a dataset (or take a prepared token dataset), then train on its
token shards, streamed; one process, or every rank of a `torchrun` job.

OUT holds what KAME's tools read (kame_data/train/weights.py): model.safetensors, moshi_lm_kwargs.json
and tokenizer.model; checkpoints/step-N.pt are for resuming, and `kame-data export-checkpoint` takes
them too."""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kame_data.atomic import write_bytes
from kame_data.train import dist as dist_mod
from kame_data.train.config import TrainConfig, load_train_config
from kame_data.train.loop import CKPT_DIR, METRICS, Progress, Trainer
from kame_data.train.model import lm_kwargs_for
from kame_data.train.sampler import TokenShards
from kame_data.train.tokenize import (
    META_FILE,
    TOKENIZER_FILE,
    TokenDatasetInfo,
    open_dataset,
    open_token_dataset,
    tokenize_dataset,
)
from kame_data.train.weights import write_kwargs

log = logging.getLogger(__name__)


def token_shards(cfg: TrainConfig, tokens: TokenDatasetInfo, split: str) -> TokenShards:
    """A split's windows, read lazily from its token shards."""
    kw = lm_kwargs_for(cfg.model.preset, cfg.model.overrides)
    return TokenShards(tokens.files(split), cfg.data.speakers, kw["n_q"], kw["dep_q"], cfg.data.max_frames,
                       cfg.data.min_frames)


@dataclass
class TrainResult:
    out: Path
    tokens: Path
    steps: int
    resumed_from: int
    last: dict[str, Any] = field(default_factory=dict)
    eval: dict[str, Any] = field(default_factory=dict)
    weights: Path | None = None
    seconds: float = 0.0
    rank: int = 0
    world: int = 1


def _tokens(dataset: Path, out: Path, cfg: TrainConfig, d: dist_mod.Dist, progress: Progress | None):
    """A prepared token dataset as it is; else rank 0 tokenises into OUT/tokens while the others wait."""
    if (dataset / META_FILE).is_file():
        return open_token_dataset(dataset)
    if d.main:
        tokenize_dataset(dataset, out / "tokens", cfg, progress)
    d.barrier()
    return open_token_dataset(out / "tokens")


def train(recipe: str | Path | TrainConfig, dataset: Path, out: Path | None = None, *, max_steps: int | None = None,
          restart: bool = False, progress: Progress | None = None) -> TrainResult:
    """Tokenise `dataset` (a `kame-data run` output) into OUT/tokens, or use it directly when it is a
    token dataset (a folder with tokens.json), then train into OUT: OUT/metrics.jsonl,
    OUT/checkpoints/, OUT/model.safetensors + OUT/moshi_lm_kwargs.json, OUT/tokenizer.model,
    OUT/train.log. A run whose checkpoints exist resumes from the latest unless `restart`. Under torchrun every rank calls this; rank 0 writes."""
    t0 = time.perf_counter()
    cfg = recipe if isinstance(recipe, TrainConfig) else load_train_config(recipe)
    if max_steps is not None:
        cfg.train.steps = max_steps
    dataset = Path(dataset)
    if not (dataset / META_FILE).is_file():
        open_dataset(dataset)  # a clear error before anything is written
    out = Path(out) if out is not None else Path("out") / "train" / cfg.name
    d = dist_mod.from_env(cfg.train.parallel, dist_mod.device_for(cfg.train.device))
    if not d.main:
        progress = None
    elif restart:
        shutil.rmtree(out / CKPT_DIR, ignore_errors=True)
        (out / METRICS).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out / ("train.log" if d.main else f"train.rank{d.rank}.log"), encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger("kame_data")
    old_level = root.level
    root.addHandler(handler)
    if root.getEffectiveLevel() > logging.INFO:
        root.setLevel(logging.INFO)
    try:
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        d.barrier()  # rank 0 has cleared old checkpoints before anyone looks for them
        tokens = _tokens(dataset, out, cfg, d, progress)
        # The tokenizer beside the weights: OUT, or any step-N.pt in it, is exported and run as it is.
        if d.main and (tokens.path / TOKENIZER_FILE).is_file():
            write_bytes(out / TOKENIZER_FILE, (tokens.path / TOKENIZER_FILE).read_bytes())
        train_src = token_shards(cfg, tokens, cfg.data.train_split)
        eval_src = token_shards(cfg, tokens, cfg.data.eval_split) if cfg.data.eval_split in tokens.meta["splits"] \
            else None
        if cfg.data.eval_split and eval_src is None:
            log.warning("no '%s' split in %s: training without eval loss", cfg.data.eval_split, dataset)
        trainer = Trainer(cfg, out, train_src, eval_src, text_vocab=tokens.text_card,
                          codec_card=tokens.meta["codec"]["card"], dist=d)
        resumed = trainer.step if trainer.resume_latest() else 0
        recs = trainer.run(progress=progress)
        weights = trainer.export(out / "model.safetensors")
        ev = trainer.evaluate() if eval_src is not None else {}
        if d.main:
            write_kwargs(out, lm_kwargs_for(cfg.model.preset, cfg.model.overrides))
            (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2), "utf-8")
        return TrainResult(out, tokens.path, trainer.step, resumed, recs[-1] if recs else {}, ev, weights,
                           time.perf_counter() - t0, d.rank, d.world)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
        if d.on and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
