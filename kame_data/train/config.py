"""The training recipe (`recipes/train_tiny.yaml`): dataclasses, YAML loading, a bad key named.

Every default is what SakanaAI/kame_finetune trains with (its `finetune.py` arguments, its DeepSpeed
config `ds_configs/zero3-bfp16-warmlr-act_ckpt.json`, its example run `examples/finetune_accelerate.sh`
and its tokenisers under `tools/`); each way of training differently is a named value of a field.
docs/guides/training.md, "The bundled trainer against kame_finetune", lists them side by side.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kame_data.train.errors import TrainError


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
    # chars: a word's time is shared among its characters and each token starts at its first
    # character's time (kame_finetune's tools/tokenize_text.py); word_start: a word's tokens go in
    # consecutive frames from the word's start.
    text_placement: Literal["chars", "word_start"] = "chars"
    # reference: seconds to frames in floating point as kame_finetune's tokenisers do (a time exactly on
    # a frame boundary can land one frame early); exact: floor of whole milliseconds / 80.
    frame_arithmetic: Literal["reference", "exact"] = "reference"
    # reference: an event is protected from skipping when the next ladder entry belongs to another
    # channel or there is none (tools/tokenize_oracle.py); turns: also when the answering speaker
    # says a word before the next event of its channel.
    skip_forbid: Literal["reference", "turns"] = "reference"


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
    max_frames: int = 512  # longest window in 80 ms frames (kame_finetune's example run: --max_length 512)
    min_frames: int = 128  # windows shorter than this are dropped (its --min_length 128); 0 keeps all
    groups_per_block: int = 4  # token row groups read and shuffled together (memory: one block)


@dataclass
class OracleConfig:
    """The reference loader's augmentations (training only; eval sees the plain stream), with
    kame_finetune's `--oracle_*` defaults."""

    skip_prob: list[float] = field(default_factory=lambda: [0.1, 0.7])  # per example, p ~ U(min, max)
    shift_prob: float = 1.0  # chance that a window's whole stream moves right or left
    right_shift: list[int] = field(default_factory=lambda: [1, 10])
    left_shift: list[int] = field(default_factory=lambda: [1, 15])
    time_jitter: int = 0  # each kept event moves later by U{0..N} frames (the reference suggests 4)
    hint_only: bool = False  # events show only their hint (none: the event is left out)
    # [start, end] optimizer steps: hint-only until start, then less and less often, never from end.
    hint_only_warmup: list[int] | None = None
    blank: bool = False  # feed an all-pad oracle stream (ablation)
    # ideal: events at their ladder times (kame_finetune's); served: where the dataset's oracle_arrival says a
    # KAME front-end read them (its oracle.latency model: reset at the first chunk, late tokens left out).
    timing: Literal["ideal", "served"] = "ideal"


@dataclass
class OptimConfig:
    """AdamW as kame_finetune's DeepSpeed config sets it, with its WarmupLR schedule."""

    lr: float = 3e-5  # the temporal transformer's (and embeddings') peak learning rate
    depformer_lr: float | None = None  # the depth transformer's; None: the same as lr
    weight_decay: float = 0.1
    decay_norms_and_biases: bool = True  # weight decay on every parameter, as the reference; false spares them
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    eps: float = 1e-5
    warmup_steps: int = 100  # linear warm-up from 0 (the reference example's --num_warmup_steps 100)
    schedule: Literal["constant", "cosine"] = "constant"  # after warm-up: stay at lr, or a cosine decay
    min_lr_ratio: float = 0.1  # cosine only: where the decay ends, as a fraction of lr
    grad_clip: float | None = 1.0


@dataclass
class LoopConfig:
    steps: int = 300
    batch_size: int = 8
    grad_accum: int = 1
    text_loss_weight: float = 1.0
    audio_loss_weight: float = 1.0
    text_pad_weight: float = 0.5  # pad frames dominate the text stream (--text_padding_loss_weight)
    # separate: mean over text tokens and end-of-pad + text_pad_weight x mean over pads (the
    # reference); weighted: one mean in which pad and end-of-pad frames weigh text_pad_weight.
    text_pad_norm: Literal["separate", "weighted"] = "separate"
    semantic_weight: float = 100.0  # the first audio codebook's weight in the audio mean (--semantic_loss_weight)
    acoustic_weight: float = 1.0  # the other codebooks' weight (--acoustic_loss_weight)
    eval_every: int = 100
    checkpoint_every: int = 100
    keep_checkpoints: int = 2
    log_every: int = 10
    # bf16-mixed: fp32 weights and AdamW state, bf16 compute (autocast; FSDP casts the gathered
    # weights), the reference's DeepSpeed bf16; bf16: weights and AdamW state in bf16 too (most small
    # updates round away); auto: bf16-mixed on CUDA, fp32 on the CPU.
    precision: Literal["auto", "fp32", "bf16-mixed", "bf16"] = "auto"
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
        if self.oracle.timing != "ideal":  # where events land is part of the token data
            d["oracle_timing"] = self.oracle.timing
        if self.oracle.timing == "served":  # and, served, the rules that read the stream (oracle/serve.py)
            from kame_data.oracle.serve import SERVE_RULES

            d["serve_rules"] = SERVE_RULES
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
    for key, value, allowed in (("tokenize.text_placement", cfg.tokenize.text_placement, ("chars", "word_start")),
                                ("tokenize.frame_arithmetic", cfg.tokenize.frame_arithmetic, ("reference", "exact")),
                                ("tokenize.skip_forbid", cfg.tokenize.skip_forbid, ("reference", "turns")),
                                ("oracle.timing", cfg.oracle.timing, ("ideal", "served")),
                                ("optim.schedule", cfg.optim.schedule, ("constant", "cosine")),
                                ("train.text_pad_norm", cfg.train.text_pad_norm, ("separate", "weighted"))):
        if value not in allowed:
            bad(key, f"expected {' or '.join(allowed)}, got {value!r}")
    if not isinstance(cfg.data.min_frames, int) or not 0 <= cfg.data.min_frames <= cfg.data.max_frames:
        bad("data.min_frames", f"expected an integer from 0 to data.max_frames ({cfg.data.max_frames}), "
                               f"got {cfg.data.min_frames!r}")
    if not isinstance(cfg.oracle.time_jitter, int) or cfg.oracle.time_jitter < 0:
        bad("oracle.time_jitter", f"expected a whole number of frames >= 0, got {cfg.oracle.time_jitter!r}")
    if not 0.0 <= cfg.oracle.shift_prob <= 1.0:
        bad("oracle.shift_prob", f"expected a probability within [0, 1], got {cfg.oracle.shift_prob!r}")
    w = cfg.oracle.hint_only_warmup
    if w is not None:
        if not cfg.oracle.hint_only:
            bad("oracle.hint_only_warmup", "needs oracle.hint_only: true (it ends a hint-only start)")
        if len(w) != 2 or not all(isinstance(x, int) for x in w) or not 0 <= w[0] < w[1]:
            bad("oracle.hint_only_warmup", f"expected [start, end] steps with 0 <= start < end, got {w!r}")
    for key, v in (("train.semantic_weight", cfg.train.semantic_weight), ("train.acoustic_weight", cfg.train.acoustic_weight),
                   ("train.text_pad_weight", cfg.train.text_pad_weight), ("optim.eps", cfg.optim.eps)):
        if not isinstance(v, (int, float)) or v < 0:
            bad(key, f"expected a number >= 0, got {v!r}")
    if cfg.train.semantic_weight + cfg.train.acoustic_weight <= 0:
        bad("train.semantic_weight", "the semantic and acoustic weights cannot both be 0")
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
