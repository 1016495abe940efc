"""Trained weights in the layouts the KAME tools read (docs/guides/training.md, "Checkpoints").

- **kame** (what `kame-data train` writes): `model.safetensors` with Moshi's `LMModel` keys plus
  `oracle_emb.*`, and `moshi_lm_kwargs.json`, the `LMModel` constructor arguments. SakanaAI/kame's
  `get_moshi_lm` loads the file strictly (its `LMModel` has the oracle embedding built in), and its
  `CheckpointInfo` takes the kwargs file as the model config; kame_finetune's `clean_moshi` writes
  the same pair for inference.
- **moshi** (kyutai-labs/moshi's `get_moshi_lm`, strict): the same keys without `oracle_emb.*`
  (a plain `LMModel` has no oracle stream: the export drops it and says so), and `config.json` in
  the layout of a Kyutai model repository (the LM kwargs plus the names of the weight, tokenizer
  and Mimi files), which moshi's `CheckpointInfo.from_hf_repo(config_path=…)` reads. KAME's loader
  takes it too (it backfills `oracle_emb` from `text_emb`); kame_finetune's `from_pretrained` does
  not (it wants the gating names below).
- **kame-finetune** (kame_finetune's `MoshiForFinetuning.from_pretrained`): the kame pair with
  every gating layer's `linear_in.weight` / `linear_out.weight` named `linear_in_weight` /
  `linear_out_weight`, as that class exposes them for DeepSpeed ZeRO-3.

A run's full-state checkpoints (`OUT/checkpoints/step-N.pt`: weights, optimizer, data position,
RNG states) exist to resume that run; `read_checkpoint` also takes one, so any step can be
exported to the layouts above, which are what other tools read.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kame_data.atomic import atomic_path, write_bytes, write_json
from kame_data.train.errors import TrainError

log = logging.getLogger(__name__)

MODEL_FILE = "model.safetensors"
KWARGS_FILE = "moshi_lm_kwargs.json"
TOKENIZER_FILE = "tokenizer.model"
TRAIN_CONFIG_FILE = "train_config.json"  # the training recipe, beside an export (codec and tokenizer for infer)
MOSHI_CONFIG_FILE = "config.json"  # a Kyutai model repository's config
MIMI_FILE, MIMI_CONFIG_FILE = "mimi.safetensors", "mimi_config.json"  # the tiny codec, which no hub holds
ORACLE_PREFIX = "oracle_emb."
TARGETS = ("kame", "moshi", "kame-finetune")
# Keys moshi's CheckpointInfo takes out of config.json before the rest goes to LMModel.
MOSHI_CONFIG_KEYS = ("moshi_name", "mimi_name", "mimi_config_name", "tokenizer_name", "lora_name", "model_type",
                     "lm_gen_config", "tts_config", "stt_config", "model_id")

# kame_finetune's MoshiForFinetuning exposes each gating layer's two linear weights as parameters of
# the gating module itself: the main transformer has one gating per layer, the depformer one per step.
_GATES = r"^(transformer\.layers\.\d+\.gating|depformer\.layers\.\d+\.gating\.\d+)"
_GATING = re.compile(_GATES + r"\.linear_(in|out)\.weight$")
_EXPOSED = re.compile(_GATES + r"\.linear_(in|out)_weight$")


def to_finetune_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {_GATING.sub(r"\1.linear_\2_weight", k): v for k, v in state.items()}


def from_finetune_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {_EXPOSED.sub(r"\1.linear_\2.weight", k): v for k, v in state.items()}


@dataclass
class Checkpoint:
    """Trained weights in LMModel keys plus `oracle_emb.*`, and what is known of how to run them."""

    state: dict[str, torch.Tensor]
    lm_kwargs: dict[str, Any]
    source: Path
    train_config: dict[str, Any] | None = None  # the recipe it was trained with (codec, tokenizer, seed)
    tokenizer: Path | None = None  # the SentencePiece model its text tokens come from
    step: int | None = None

    @property
    def has_oracle(self) -> bool:
        return any(k.startswith(ORACLE_PREFIX) for k in self.state)


def _is_train_config(d: Any) -> bool:
    return isinstance(d, dict) and "tokenize" in d and "model" in d


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as e:
        raise TrainError(f"{path}: cannot read it as JSON ({e})") from e


def _tokenizer_near(*folders: Path) -> Path | None:
    for folder in folders:
        for p in (folder / TOKENIZER_FILE, folder / "tokens" / TOKENIZER_FILE):
            if p.is_file():
                return p
    return None


def _from_full_state(path: Path) -> Checkpoint:
    """A `step-N.pt` of `kame-data train`: its weights, and the LM kwargs its recipe names."""
    from kame_data.train.model import lm_kwargs_for

    try:
        pkg = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several types for a file that is not a checkpoint
        raise TrainError(f"{path}: not a kame-data training checkpoint ({e})") from e
    if not isinstance(pkg, dict) or "model" not in pkg or not _is_train_config(pkg.get("config")):
        raise TrainError(f"{path}: not a kame-data training checkpoint (no model weights and recipe in it)")
    cfg = pkg["config"]
    run_dir = path.parent.parent  # OUT/checkpoints/step-N.pt
    return Checkpoint(dict(pkg["model"]), lm_kwargs_for(cfg["model"]["preset"], cfg["model"]["overrides"]), path,
                      cfg, _tokenizer_near(run_dir), int(pkg.get("step", 0)))


def read_checkpoint(spec: str | Path) -> Checkpoint:
    """A training OUT folder (its `model.safetensors`, else its latest `checkpoints/step-N.pt`), an
    export folder of any of the three layouts, a `model.safetensors` beside its kwargs file, or a
    `step-N.pt`. Weights come back in LMModel keys (kame_finetune's gating names undone)."""
    from safetensors.torch import load_file

    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".pt":
        return _from_full_state(path)
    if path.is_dir() and not (path / MODEL_FILE).is_file():
        steps = sorted((path / "checkpoints").glob("step-*.pt"))
        if not steps:
            raise TrainError(f"{path}: no {MODEL_FILE} and no checkpoints/step-*.pt in it")
        log.info("%s has no %s: reading its latest checkpoint %s", path, MODEL_FILE, steps[-1].name)
        return _from_full_state(steps[-1])
    weights = path / MODEL_FILE if path.is_dir() else path
    if not weights.is_file():
        raise TrainError(f"{path}: no such checkpoint (a training OUT folder, an export folder, a {MODEL_FILE} "
                         "or a step-N.pt)")
    folder = weights.parent
    train_cfg = None
    for name in (TRAIN_CONFIG_FILE, "config.json"):
        if (folder / name).is_file() and _is_train_config(d := _read_json(folder / name)):
            train_cfg = d
            break
    if (folder / KWARGS_FILE).is_file():
        kwargs = _read_json(folder / KWARGS_FILE)
    elif (folder / MOSHI_CONFIG_FILE).is_file() and not _is_train_config(_read_json(folder / MOSHI_CONFIG_FILE)):
        kwargs = {k: v for k, v in _read_json(folder / MOSHI_CONFIG_FILE).items() if k not in MOSHI_CONFIG_KEYS}
    elif train_cfg is not None:  # an OUT written before the kwargs file was
        from kame_data.train.model import lm_kwargs_for

        kwargs = lm_kwargs_for(train_cfg["model"]["preset"], train_cfg["model"]["overrides"])
    else:
        raise TrainError(f"{folder}: no {KWARGS_FILE} beside {weights.name} (the model's LMModel arguments)")
    try:
        state = load_file(str(weights))
    except Exception as e:  # safetensors raises its own error types
        raise TrainError(f"{weights}: not a safetensors file ({e})") from e
    return Checkpoint(from_finetune_names(state), kwargs, weights, train_cfg, _tokenizer_near(folder))


def with_oracle(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The weights with `oracle_emb.*`, copied from `text_emb.*` where a file has none (a plain
    Moshi checkpoint), as KAME's loader and kame_finetune's `from_pretrained` backfill it."""
    if any(k.startswith(ORACLE_PREFIX) for k in state):
        return state
    return {**state, **{ORACLE_PREFIX + k.removeprefix("text_emb."): v.clone()
                        for k, v in state.items() if k.startswith("text_emb.")}}


def load_model(ckpt: Checkpoint, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32):
    """The `OracleLM` of a checkpoint, every key loaded strictly (built on the meta device and
    given the tensors, as moshi's loader does)."""
    from moshi.models import loaders

    from kame_data.train.model import OracleLM

    lm = loaders.get_moshi_lm(None, lm_kwargs=ckpt.lm_kwargs, device="meta", dtype=dtype)
    model = OracleLM(lm)
    state = {k: v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)
             for k, v in with_oracle(ckpt.state).items()}
    try:
        lm.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as e:
        raise TrainError(f"{ckpt.source}: the weights do not fit its {KWARGS_FILE} ({str(e).splitlines()[0]})") from e
    return model.to(device)


def _contiguous(state: dict[str, torch.Tensor], dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    return {k: (v.to(dtype) if dtype is not None and v.is_floating_point() else v).detach().contiguous().cpu()
            for k, v in state.items()}


def save_weights(path: Path, state: dict[str, torch.Tensor], dtype: torch.dtype | None = None) -> Path:
    """A safetensors file, written whole or not at all."""
    from safetensors.torch import save_file

    with atomic_path(path) as tmp:
        save_file(_contiguous(state, dtype), str(tmp))
    return path


def _json(path: Path, obj: Any) -> Path:
    write_json(path, obj)
    return path


def write_kwargs(folder: Path, lm_kwargs: dict[str, Any]) -> Path:
    """`moshi_lm_kwargs.json`: what kame_finetune's `from_pretrained` and KAME's `CheckpointInfo`
    pass to `LMModel` (JSON, indent 4, as kame_finetune writes it)."""
    path = folder / KWARGS_FILE
    write_bytes(path, (json.dumps(lm_kwargs, indent=4) + "\n").encode("utf-8"))
    return path


@dataclass
class ExportResult:
    dest: Path
    target: str
    files: list[Path] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # weight keys the target cannot hold


def _write_codec_files(ckpt: Checkpoint, dest: Path, moshi_config: dict[str, Any]) -> list[Path]:
    """The tokenizer, and for the tiny random codec its weights and config (no hub holds them), so
    the export runs as it is; a real Mimi is named by Kyutai's file name."""
    files: list[Path] = []
    if ckpt.tokenizer is not None:
        write_bytes(dest / TOKENIZER_FILE, ckpt.tokenizer.read_bytes())
        files.append(dest / TOKENIZER_FILE)
        moshi_config["tokenizer_name"] = TOKENIZER_FILE
    tok = (ckpt.train_config or {}).get("tokenize", {})
    if tok.get("codec") == "tiny":
        from kame_data.train.tokenize import Codec, tiny_mimi_config

        codec = Codec("tiny", seed=int(ckpt.train_config.get("seed", 0)), bins=int(tok.get("tiny_codec_bins", 64)))
        files.append(save_weights(dest / MIMI_FILE, codec.model.state_dict()))
        files.append(_json(dest / MIMI_CONFIG_FILE, tiny_mimi_config(codec.card)))
        moshi_config.update(mimi_name=MIMI_FILE, mimi_config_name=MIMI_CONFIG_FILE)
    return files


def export_checkpoint(src: str | Path, target: str, dest: str | Path, dtype: torch.dtype | None = None) -> ExportResult:
    """Write `src` (anything `read_checkpoint` takes) into DEST in the layout of `target`."""
    if target not in TARGETS:
        raise TrainError(f"unknown checkpoint layout {target!r} (expected one of {', '.join(TARGETS)})")
    ckpt = read_checkpoint(src)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    result = ExportResult(dest, target)
    state = ckpt.state
    if target == "moshi":
        result.dropped = sorted(k for k in state if k.startswith(ORACLE_PREFIX))
        state = {k: v for k, v in state.items() if not k.startswith(ORACLE_PREFIX)}
        config = {**ckpt.lm_kwargs, "moshi_name": MODEL_FILE, "model_type": "moshi"}
        result.files += _write_codec_files(ckpt, dest, config)
        result.files.append(_json(dest / MOSHI_CONFIG_FILE, config))
    else:
        state = with_oracle(state)
        if target == "kame-finetune":
            state = to_finetune_names(state)
        result.files.append(write_kwargs(dest, ckpt.lm_kwargs))
        if ckpt.tokenizer is not None:
            write_bytes(dest / TOKENIZER_FILE, ckpt.tokenizer.read_bytes())
            result.files.append(dest / TOKENIZER_FILE)
    if ckpt.train_config is not None:
        result.files.append(_json(dest / TRAIN_CONFIG_FILE, ckpt.train_config))
    result.files.insert(0, save_weights(dest / MODEL_FILE, state, dtype))
    if result.dropped:
        log.warning("moshi's LMModel has no oracle stream: dropped %s", ", ".join(result.dropped))
    log.info("exported %s as %s to %s", ckpt.source, target, dest)
    return result
