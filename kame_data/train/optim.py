"""AdamW and its learning-rate schedule, as kame_finetune sets them.

The reference (SakanaAI/kame_finetune) puts the temporal transformer with the embeddings and the
depth transformer in two parameter groups with their own learning rates (`--tempformer_learning_rate`,
`--depformer_learning_rate`, both 3e-5), weight decay 0.1 on every parameter, and lets DeepSpeed run
AdamW with betas (0.9, 0.95) and eps 1e-5 under WarmupLR, linear warm-up then constant
(ds_configs/zero3-bfp16-warmlr-act_ckpt.json). The weights AdamW updates are fp32 whatever the
compute precision (DeepSpeed bf16 keeps fp32 master weights; `train.precision: bf16-mixed` here).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from kame_data.train.config import TrainConfig

# LMModel's depth transformer: its input projections, embeddings, layers and output heads.
DEPFORMER_PREFIXES = ("depformer_in.", "depformer_emb.", "depformer_text_emb.", "depformer.", "linears.")


def is_depformer(name: str) -> bool:
    """Whether a parameter (named as in the wrapped module: `lm.`, DDP's `module.`) is the depth transformer's."""
    bare = name.removeprefix("module.").removeprefix("lm.")
    return bare.startswith(DEPFORMER_PREFIXES)


def build_optimizer(module: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW over `module`'s parameters: a group per transformer, each with its base learning rate in
    `base_lr` (the schedule scales it), and vector-shaped parameters (norm scales, biases) in groups
    without weight decay when `optim.decay_norms_and_biases` is false."""
    o = cfg.optim
    groups: dict[tuple[bool, bool], list[nn.Parameter]] = {}
    for name, p in module.named_parameters():
        if p.requires_grad:
            decay = o.decay_norms_and_biases or sum(d > 1 for d in p.shape) >= 2  # norm scales are [1, 1, D]
            groups.setdefault((is_depformer(name), decay), []).append(p)
    dep_lr = o.lr if o.depformer_lr is None else o.depformer_lr
    param_groups = [{"params": ps, "base_lr": dep_lr if dep else o.lr, "lr": dep_lr if dep else o.lr,
                     "weight_decay": o.weight_decay if decay else 0.0}
                    for (dep, decay), ps in sorted(groups.items())]
    return torch.optim.AdamW(param_groups, lr=o.lr, betas=tuple(o.betas), eps=o.eps)


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """The schedule at optimizer step `step` (1-based), as a fraction of each group's base rate:
    linear warm-up from 0 over `warmup_steps`, then constant (the reference) or a cosine decay to
    `min_lr_ratio` at the last step."""
    o, total = cfg.optim, cfg.train.steps
    if o.warmup_steps > 0 and step <= o.warmup_steps:
        return step / o.warmup_steps
    if o.schedule == "constant":
        return 1.0
    span = max(1, total - o.warmup_steps)
    progress = min(1.0, (step - o.warmup_steps) / span)
    return o.min_lr_ratio + (1 - o.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def lr_at(step: int, cfg: TrainConfig) -> float:
    """The temporal transformer's learning rate at optimizer step `step` (what the metrics log)."""
    return cfg.optim.lr * lr_factor(step, cfg)


def set_step_lr(opt: torch.optim.Optimizer, step: int, cfg: TrainConfig) -> float:
    """Give every group its rate for `step`; returns the logged one (lr_at)."""
    f = lr_factor(step, cfg)
    for g in opt.param_groups:
        g["lr"] = g["base_lr"] * f
    return lr_at(step, cfg)
