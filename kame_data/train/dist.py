"""Data parallel training under `torchrun`: process group, DDP or FSDP wrapping, full-state
checkpoints that any number of ranks can resume, and sums across ranks.

`torchrun --nproc_per_node G [--nnodes N …] -m kame_data.cli.main train …` sets RANK, WORLD_SIZE
and LOCAL_RANK; without them the trainer is one plain process. NCCL on CUDA, gloo on the CPU.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist
from torch import nn

from kame_data.train.errors import TrainError


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    parallel: str = "none"  # none | ddp | fsdp

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def on(self) -> bool:
        return self.world > 1

    def barrier(self) -> None:
        if self.on:
            torch_dist.barrier()

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        """The tensor summed over ranks (a detached copy)."""
        t = t.detach().clone()
        if self.on:
            torch_dist.all_reduce(t, op=torch_dist.ReduceOp.SUM)
        return t


def from_env(parallel: str, device: torch.device) -> Dist:
    """Join the process group torchrun describes (a long timeout: rank 0 may be tokenising)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    if parallel not in ("auto", "ddp", "fsdp"):
        raise TrainError(f"train.parallel: expected auto, ddp or fsdp, got {parallel!r}")
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        torch.cuda.set_device(local)
    if not torch_dist.is_initialized():
        torch_dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                      timeout=datetime.timedelta(hours=3))
    return Dist(rank, world, local, "ddp" if parallel == "auto" else parallel)


def device_for(name: str) -> torch.device:
    """`auto`: this rank's GPU under torchrun (LOCAL_RANK), else cuda, else the CPU."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        return torch.device("cpu")
    return torch.device(name)


def wrap(model: nn.Module, d: Dist, device: torch.device, mixed_bf16: bool = False) -> nn.Module:
    """The module the optimizer steps: DDP (a replica per rank) or FSDP2 (`fully_shard`: parameters,
    gradients and optimizer state sharded over the ranks). `mixed_bf16`: FSDP keeps fp32 shards (and
    AdamW state: fp32 master weights, as DeepSpeed bf16 keeps for the reference) but gathers bf16
    copies to compute with, and reduces gradients in fp32; DDP replicas stay fp32 and the loop's
    autocast computes in bf16."""
    if d.parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids, find_unused_parameters=True)
    if d.parallel == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed_bf16 \
            else MixedPrecisionPolicy()
        # moshi's layers cannot take FSDP's class swap (abc.ABC + Generic), so the units are what
        # they hold: attention projections and gated MLPs (which read their weights directly), nearly
        # all the weights; the root takes the embeddings, norms and output heads.
        for name, module in model.named_modules():
            gated = type(module).__name__ == "ActivationGating"
            if gated or (isinstance(module, nn.Linear) and ".self_attn." in name):
                fully_shard(module, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        return model
    return model


def full_state(model: nn.Module, opt: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Unsharded model (LMModel keys) and optimizer state on the CPU, in one format whether the
    model is plain, DDP or FSDP, so any of them resumes any other (under FSDP every rank calls it)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    msd, osd = get_state_dict(model, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return {k.removeprefix("lm."): v for k, v in msd.items()}, osd


def load_full_state(model: nn.Module, opt: torch.optim.Optimizer, msd: dict, osd: dict) -> None:
    """The inverse of `full_state`: every rank passes the full dicts (FSDP keeps its shards)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    set_state_dict(model, opt, model_state_dict={f"lm.{k}": v for k, v in msd.items()}, optim_state_dict=osd,
                   options=StateDictOptions(full_state_dict=True))
