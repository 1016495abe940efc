"""The training loop: AdamW with warm-up (optim.py), gradient accumulation, fp32 master weights
with bf16 compute, the reference's loss weights (losses.py), eval loss, JSONL metrics, and
checkpoints that resume exactly (weights, optimizer, step, data position, RNG states). Under torchrun it is data parallel
(DDP, or FSDP for the 7B model): each rank computes its slice of the global batch, and losses are
normalised by the global batch's frame counts, so W ranks take the step one process would.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from kame_data.atomic import atomic_path, write_text
from kame_data.train.errors import TrainError
from kame_data.train.config import TrainConfig
from kame_data.train import dist as dist_mod
from kame_data.train.data import Window
from kame_data.train.dist import Dist
from kame_data.train.losses import KINDS, LossRule, combine, loss_parts
from kame_data.train.model import OracleLM, build_model, compile_context, set_gradient_checkpointing
from kame_data.train.optim import build_optimizer, set_step_lr
from kame_data.train.sampler import Loader, WindowSource, eval_batches
from kame_data.train.streams import OracleAugment

log = logging.getLogger(__name__)

Progress = Callable[[str, int], Any]
CKPT_DIR = "checkpoints"
METRICS = "metrics.jsonl"


class Trainer:
    """Owns the model, optimizer, loader and output folder; `run()` trains to `cfg.train.steps`.
    Windows come as a list or as a streamed source (`sampler.TokenShards`)."""

    def __init__(self, cfg: TrainConfig, out_dir: Path, train_windows: list[Window] | WindowSource,
                 eval_windows: list[Window] | WindowSource | None = None, text_vocab: int | None = None,
                 codec_card: int | None = None, dist: Dist | None = None):
        self.cfg, self.out = cfg, Path(out_dir)
        t = cfg.train
        if t.threads:
            torch.set_num_threads(t.threads)
        self.device = dist_mod.device_for(t.device)
        self.dist = dist or Dist()
        precision = t.precision
        if precision == "auto":
            precision = "bf16-mixed" if self.device.type == "cuda" else "fp32"
        self.precision = precision
        param_dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        torch.manual_seed(cfg.seed)
        self.model: OracleLM = build_model(cfg.model.preset, cfg.model.weights, cfg.model.overrides,
                                           device=self.device, dtype=param_dtype)
        lm = self.model.lm
        set_gradient_checkpointing(lm, t.gradient_checkpointing)
        if text_vocab is not None and text_vocab > lm.text_card:
            raise TrainError(f"the text tokenizer has {text_vocab} ids but the model's text_card is {lm.text_card}")
        if codec_card is not None and codec_card > lm.card:
            raise TrainError(f"the codec has {codec_card} codes per codebook but the model's card is {lm.card}")
        self.model.train()
        # What forward and the optimizer see; FSDP under bf16-mixed gathers bf16 copies of fp32 shards.
        self.module = dist_mod.wrap(self.model, self.dist, self.device, mixed_bf16=precision == "bf16-mixed")
        self.opt = build_optimizer(self.module, cfg)
        self.loss_rule = LossRule.of(t)
        o = cfg.oracle
        self.aug = OracleAugment(o.skip_prob[0], o.skip_prob[1], o.shift_prob, tuple(o.right_shift), tuple(o.left_shift),
                                 o.time_jitter, o.hint_only, tuple(o.hint_only_warmup) if o.hint_only_warmup else None)
        self.loader = Loader(train_windows, t.batch_size, cfg.seed, self.model.oracle_start_id, self.aug, o.blank,
                             self.dist.rank, self.dist.world, cfg.data.groups_per_block)
        self.eval_windows = eval_windows or []
        self.step = 0
        self._t0 = time.perf_counter()
        self._elapsed_before = 0.0
        n_params = sum(p.numel() for p in self.model.parameters())
        log.info("model %s: %.2fM parameters on %s (%s), %s x %d; %d token groups for training",
                 cfg.model.preset, n_params / 1e6, self.device, precision, self.dist.parallel, self.dist.world,
                 self.loader.source.num_groups())

    # ------------------------------------------------------------------------------ steps

    def _autocast(self):
        if self.precision == "bf16-mixed":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return nullcontext()

    def _losses(self, batch) -> dict[str, torch.Tensor]:
        """This rank's losses normalised by the global batch: `text`/`audio` to back-propagate (DDP
        averages gradients over ranks, hence the factor world), `*_mean` the global means to log."""
        b = batch.to(self.device)
        with self._autocast(), compile_context(self.cfg.train.compile):
            out = self.module(b.codes, b.oracle)
        P = loss_parts(out, b.codes, self.model.lm.dep_q)
        d = self.dist
        counts = d.sum(P["counts"])  # the global batch's (this rank's alone without torchrun)
        text, audio = combine(P["sums"], counts, self.loss_rule)
        text_mean, audio_mean = combine(d.sum(P["sums"]), counts, self.loss_rule)
        return {"text": text * d.world, "audio": audio * d.world, "text_mean": text_mean, "audio_mean": audio_mean}

    def train_step(self) -> dict[str, float]:
        """One optimizer step over grad_accum micro-batches; returns its metrics."""
        t = self.cfg.train
        step = self.step + 1
        lr = set_step_lr(self.opt, step, self.cfg)
        tot = {"loss": 0.0, "text_loss": 0.0, "audio_loss": 0.0}
        frames = 0
        for micro in range(t.grad_accum):
            batch = self.loader.next_batch(step=self.step)  # optimizer steps done: the hint-only curriculum's clock
            frames += int((batch.codes[:, 0] >= 0).sum())
            last = micro == t.grad_accum - 1
            with nullcontext() if last or self.dist.parallel != "ddp" else self.module.no_sync():
                L = self._losses(batch)
                loss = t.text_loss_weight * L["text"] + t.audio_loss_weight * L["audio"]
                (loss / t.grad_accum).backward()
            text, audio = L["text_mean"].item(), L["audio_mean"].item()
            tot["loss"] += (t.text_loss_weight * text + t.audio_loss_weight * audio) / t.grad_accum
            tot["text_loss"] += text / t.grad_accum
            tot["audio_loss"] += audio / t.grad_accum
        gnorm = torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.cfg.optim.grad_clip or float("inf"))
        gnorm = gnorm.full_tensor() if hasattr(gnorm, "full_tensor") else gnorm  # FSDP: a DTensor
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step = step
        return {"step": step, **tot, "lr": lr, "grad_norm": float(gnorm), "frames": frames}

    @torch.no_grad()
    def evaluate(self, blank_oracle: bool | None = None) -> dict[str, float]:
        """Mean losses over every eval window, with the plain oracle stream (no augmentation)."""
        if not self.eval_windows:
            return {}
        blank = self.cfg.oracle.blank if blank_oracle is None else blank_oracle
        self.model.eval()
        sums = counts = torch.zeros(len(KINDS), dtype=torch.float64)  # per kind of frame, over every window
        d = self.dist
        # FSDP ranks must run the same forwards (each gathers parameters): all evaluate everything.
        rank, world = (0, 1) if d.parallel == "fsdp" else (d.rank, d.world)
        per = max(1, self.cfg.train.batch_size // d.world)
        try:
            for batch in eval_batches(self.eval_windows, per, self.model.oracle_start_id, blank, rank, world):
                b = batch.to(self.device)
                with self._autocast(), compile_context(self.cfg.train.compile):
                    P = loss_parts(self.model(b.codes, b.oracle), b.codes, self.model.lm.dep_q)
                sums = sums + P["sums"].double().cpu()
                counts = counts + P["counts"].double().cpu()
        finally:
            self.model.train()
        if world > 1:  # reduced on the device: NCCL takes no CPU tensors
            sums, counts = d.sum(sums.to(self.device)).cpu(), d.sum(counts.to(self.device)).cpu()
        t = self.cfg.train
        text, audio = (float(x) for x in combine(sums, counts, self.loss_rule))
        return {"eval_loss": t.text_loss_weight * text + t.audio_loss_weight * audio,
                "eval_text_loss": text, "eval_audio_loss": audio}

    # ------------------------------------------------------------------------------ checkpoints

    @property
    def ckpt_dir(self) -> Path:
        return self.out / CKPT_DIR

    def checkpoints(self) -> list[Path]:
        return sorted(self.ckpt_dir.glob("step-*.pt"))

    def save_checkpoint(self) -> Path:
        """Everything an exact resume needs, written by rank 0 under a temporary name then renamed
        (every rank takes part in gathering the state)."""
        model_sd, optim_sd = dist_mod.full_state(self.module, self.opt)
        path = self.ckpt_dir / f"step-{self.step:07d}.pt"
        if not self.dist.main:
            self.dist.barrier()
            return path
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        state = {
            "step": self.step,
            "resume_hash": self.cfg.resume_hash(),
            "config": self.cfg.to_dict(),
            "model": model_sd,
            "optim": optim_sd,
            "loader": self.loader.state(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "elapsed_s": self.elapsed(),
        }
        with atomic_path(path) as tmp:
            torch.save(state, tmp)
        for old in self.checkpoints()[:-max(1, self.cfg.train.keep_checkpoints)]:
            old.unlink()
        log.info("checkpoint %s", path)
        self.dist.barrier()
        return path

    def load_checkpoint(self, path: Path) -> None:
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state["resume_hash"] != self.cfg.resume_hash():
            raise TrainError(f"{path} was written with other training settings; keep the recipe as it was "
                             "or start over with --restart")
        self.loader.load_state(state["loader"])
        dist_mod.load_full_state(self.module, self.opt, state["model"], state["optim"])
        torch.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.step = int(state["step"])
        self._elapsed_before = float(state.get("elapsed_s", 0.0))
        self._t0 = time.perf_counter()
        self._trim_metrics()
        log.info("resumed from %s at step %d", path, self.step)

    def resume_latest(self) -> bool:
        ckpts = self.checkpoints()
        if not ckpts:
            return False
        self.load_checkpoint(ckpts[-1])
        return True

    def elapsed(self) -> float:
        return self._elapsed_before + time.perf_counter() - self._t0

    # ------------------------------------------------------------------------------ metrics

    def _log_metrics(self, rec: dict[str, Any]) -> None:
        if not self.dist.main:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.out / METRICS, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")

    def _trim_metrics(self) -> None:
        """After a resume, drop records past the checkpoint so the log reads as one run."""
        p = self.out / METRICS
        if not p.is_file() or not self.dist.main:
            return
        keep = [ln for ln in p.read_text("utf-8").splitlines() if ln.strip() and json.loads(ln)["step"] <= self.step]
        write_text(p, "".join(ln + "\n" for ln in keep))

    # ------------------------------------------------------------------------------ run

    def run(self, until: int | None = None, progress: Progress | None = None) -> list[dict[str, Any]]:
        """Train to `cfg.train.steps` (or stop after step `until`, checkpointed, as an interruption
        would). Returns the step records of this call."""
        t = self.cfg.train
        stop = min(t.steps, until) if until is not None else t.steps
        bar = progress("train", t.steps) if progress else None
        if bar is not None and self.step:
            bar.update(self.step)
        records: list[dict[str, Any]] = []
        window = {"loss": 0.0, "text_loss": 0.0, "audio_loss": 0.0, "n": 0, "frames": 0, "t": time.perf_counter()}
        try:
            while self.step < stop:
                snapshot = self._snapshot()
                try:
                    m = self.train_step()
                except KeyboardInterrupt:
                    self._restore(snapshot)
                    raise
                records.append(m)
                for k in ("loss", "text_loss", "audio_loss"):
                    window[k] += m[k]
                window["n"] += 1
                window["frames"] += m["frames"]
                if bar is not None:
                    bar.update(1)
                    if hasattr(bar, "set_postfix"):
                        bar.set_postfix(loss=f"{m['loss']:.3f}", lr=f"{m['lr']:.1e}", refresh=False)
                if self.step % t.log_every == 0 or self.step == stop:
                    dt = time.perf_counter() - window["t"]
                    rec = {"step": self.step, **{k: window[k] / window["n"] for k in ("loss", "text_loss", "audio_loss")},
                           "lr": m["lr"], "grad_norm": m["grad_norm"], "frames_per_s": window["frames"] / max(dt, 1e-9),
                           "elapsed_s": round(self.elapsed(), 3)}
                    self._log_metrics(rec)
                    log.info("step %d loss %.4f (text %.4f, audio %.4f) lr %.2e", self.step, rec["loss"],
                             rec["text_loss"], rec["audio_loss"], m["lr"])
                    window = {"loss": 0.0, "text_loss": 0.0, "audio_loss": 0.0, "n": 0, "frames": 0, "t": time.perf_counter()}
                if self.eval_windows and (self.step % t.eval_every == 0 or self.step == t.steps):
                    ev = self.evaluate()
                    self._log_metrics({"step": self.step, **ev, "elapsed_s": round(self.elapsed(), 3)})
                    log.info("step %d eval loss %.4f (text %.4f, audio %.4f)", self.step, ev["eval_loss"],
                             ev["eval_text_loss"], ev["eval_audio_loss"])
                if self.step % t.checkpoint_every == 0 or self.step == stop:
                    self.save_checkpoint()
        except KeyboardInterrupt:
            log.warning("interrupted after step %d; checkpointing so the run can resume", self.step)
            self.save_checkpoint()
            raise
        finally:
            if bar is not None:
                bar.close()
        return records

    def _snapshot(self) -> dict[str, Any]:
        return {"loader": self.loader.state(), "torch_rng": torch.get_rng_state()}

    def _restore(self, snap: dict[str, Any]) -> None:
        """Undo a half-done step (Ctrl-C inside it): the optimizer had not stepped yet."""
        self.opt.zero_grad(set_to_none=True)
        self.loader.load_state(snap["loader"])
        torch.set_rng_state(snap["torch_rng"])

    def export(self, path: Path) -> Path:
        """The trained LM with its oracle embedding as safetensors (kame_finetune's key names)."""
        from safetensors.torch import save_file

        model_sd, _ = dist_mod.full_state(self.module, self.opt)
        if self.dist.main:
            with atomic_path(path) as tmp:
                save_file({k: v.detach().contiguous().cpu() for k, v in model_sd.items()}, str(tmp))
        self.dist.barrier()
        return path
