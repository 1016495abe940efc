"""The training recipe (`recipes/train_tiny.yaml`): dataclasses, YAML loading, a bad key named."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kame_data.train import TrainError


@dataclass
class TokenizeConfig:
    """How a dataset becomes tokens. `tiny` builds a small random Mimi / trains a small
    SentencePiece model on the dataset's own text (tests, CPU smoke runs); anything else is a local
    file or a hub repo id holding Kyutai's Mimi weights / Moshi's tokenizer."""

    codec: str = "tiny"
    text_tokenizer: str = "tiny"
    tiny_vocab_size: int = 200
    tiny_codec_bins: int = 64
    channels: dict[str, int] = field(default_factory=lambda: {"A": 0, "B": 1})
    device: str = "cpu"


@dataclass
class ModelConfig:
    """`tiny`: the CPU config of STACK.md; `moshiko`: Moshi 7B (`moshi.models.loaders._lm_kwargs`),
    from `weights` (a model.safetensors path or hub repo id) or random. `overrides` patch lm kwargs."""

    preset: str = "tiny"
    weights: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class DataConfig:
    train_split: str = "train"
    eval_split: str | None = "validation"
    speakers: list[str] = field(default_factory=lambda: ["A"])  # whose voice the model learns
    max_frames: int = 128  # window length in 80 ms frames
    groups_per_block: int = 4  # token row groups read and shuffled together (memory: one block)


@dataclass
class OracleConfig:
    """The reference loader's augmentations (training only; eval sees the plain stream)."""

    skip_prob: list[float] = field(default_factory=lambda: [0.1, 0.7])
    shift_prob: float = 0.3
    right_shift: list[int] = field(default_factory=lambda: [1, 10])
    left_shift: list[int] = field(default_factory=lambda: [1, 15])
    blank: bool = False  # feed an all-pad oracle stream (ablation)


@dataclass
class OptimConfig:
    lr: float = 3e-3
    weight_decay: float = 0.1
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    warmup_steps: int = 20
    min_lr_ratio: float = 0.1  # cosine decay after warm-up ends at lr * min_lr_ratio
    grad_clip: float | None = 1.0


@dataclass
class LoopConfig:
    steps: int = 300
    batch_size: int = 8
    grad_accum: int = 1
    text_loss_weight: float = 1.0
    audio_loss_weight: float = 1.0
    text_pad_weight: float = 0.5  # pad and end-of-pad frames dominate the text stream
    eval_every: int = 100
    checkpoint_every: int = 100
    keep_checkpoints: int = 2
    log_every: int = 10
    precision: str = "auto"  # auto | fp32 | bf16-mixed | bf16 (auto: bf16-mixed on CUDA, fp32 on CPU)
    device: str = "auto"
    threads: int | None = None  # torch CPU threads; 1 is fastest on a busy 2-core machine
    compile: bool = False  # let moshi torch.compile its kernels (GPU; slow first step)
    parallel: str = "auto"  # under torchrun: auto (= ddp) | ddp | fsdp (shards the 7B model's state)
    gradient_checkpointing: bool = False  # recompute layer activations in backward: less memory, same losses


@dataclass
class TrainConfig:
    name: str = "train"
    seed: int = 0
    tokenize: TokenizeConfig = field(default_factory=TokenizeConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    oracle: OracleConfig = field(default_factory=OracleConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: LoopConfig = field(default_factory=LoopConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def resume_hash(self) -> str:
        """What a checkpoint must agree with to be resumed exactly (logging cadence may change)."""
        d = self.to_dict()
        for k in ("eval_every", "checkpoint_every", "keep_checkpoints", "log_every", "device", "threads", "parallel",
                  "gradient_checkpointing"):
            d["train"].pop(k)
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    def tokenize_hash(self) -> str:
        """What a token dataset must agree with to be reused."""
        d = dataclasses.asdict(self.tokenize)
        d.pop("device")
        d["seed"] = self.seed
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def config_from_dict(raw: dict[str, Any], where: str = "train recipe") -> TrainConfig:
    from kame_data.recipe import build_config

    cfg = build_config(TrainConfig, raw, where, TrainError, sequence=list)
    _check(cfg, where)
    return cfg


def _check(cfg: TrainConfig, where: str) -> None:
    def bad(key: str, why: str) -> None:
        raise TrainError(f"{where}: {key}: {why}")

    from kame_data.recipe import check_name

    check_name(cfg.name, where, TrainError)
    if cfg.model.preset not in ("tiny", "moshiko"):
        bad("model.preset", f"expected 'tiny' or 'moshiko', got {cfg.model.preset!r}")
    if cfg.train.parallel not in ("auto", "ddp", "fsdp"):
        bad("train.parallel", f"expected auto, ddp or fsdp, got {cfg.train.parallel!r}")
    if cfg.train.precision not in ("auto", "fp32", "bf16-mixed", "bf16"):
        bad("train.precision", f"expected auto, fp32, bf16-mixed or bf16, got {cfg.train.precision!r}")
    for key, v in (("train.steps", cfg.train.steps), ("train.batch_size", cfg.train.batch_size),
                   ("train.grad_accum", cfg.train.grad_accum), ("data.max_frames", cfg.data.max_frames),
                   ("data.groups_per_block", cfg.data.groups_per_block),
                   ("train.log_every", cfg.train.log_every), ("train.eval_every", cfg.train.eval_every),
                   ("train.checkpoint_every", cfg.train.checkpoint_every)):
        if not isinstance(v, int) or v < 1:
            bad(key, f"expected a positive integer, got {v!r}")
    if len(cfg.oracle.skip_prob) != 2 or not all(0.0 <= p <= 1.0 for p in cfg.oracle.skip_prob):
        bad("oracle.skip_prob", f"expected [min, max] within [0, 1], got {cfg.oracle.skip_prob!r}")
    for key, r in (("oracle.right_shift", cfg.oracle.right_shift), ("oracle.left_shift", cfg.oracle.left_shift)):
        if len(r) != 2 or not 1 <= r[0] <= r[1]:
            bad(key, f"expected [lo, hi] with 1 <= lo <= hi, got {r!r}")
    if not cfg.data.speakers or any(s not in cfg.tokenize.channels for s in cfg.data.speakers):
        bad("data.speakers", f"expected speakers among {sorted(cfg.tokenize.channels)}, got {cfg.data.speakers!r}")
    if sorted(cfg.tokenize.channels) != ["A", "B"]:
        bad("tokenize.channels", f"expected channels for speakers A and B, got {cfg.tokenize.channels!r}")


def find_train_recipe(ref: str | Path) -> Path:
    """A path, or the name of a bundled recipe (`train_tiny`)."""
    from kame_data.recipe import find_recipe

    return find_recipe(ref, TrainError, "train_tiny")


def load_train_config(ref: str | Path) -> TrainConfig:
    from kame_data.recipe import read_yaml_mapping

    path = find_train_recipe(ref)
    return config_from_dict(read_yaml_mapping(path, TrainError), str(path))
