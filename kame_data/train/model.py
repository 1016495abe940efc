"""Moshi's `LMModel` with an oracle stream: a fourth input whose embedding is added to the text
embedding at every step (docs/design.md, "Training streams").

Imports only torch and `moshi.models` (no sphn, sounddevice, bitsandbytes), so the GPU benchmark
runs where moshi was installed with --no-deps.

The oracle embedding is a copy of the text embedding (same vocabulary: text tokens plus the
start token text_card), registered on the LMModel as `oracle_emb`, so checkpoints carry the
same keys as kame_finetune's. A forward hook on `text_emb` adds it: LMModel.forward is not
reimplemented, and a plain LMModel checkpoint still loads.
"""

from __future__ import annotations

import copy
import logging
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
from moshi.models import loaders
from moshi.models.lm import LMModel, LMOutput
from torch import nn

from kame_data.train.errors import TrainError

log = logging.getLogger(__name__)

# STACK.md's CPU config: dim 64, 2 layers, text_card 200, n_q 4 = 2 x dep_q, card 64, a 1-layer
# depformer; the rest follows Moshi 7B's choices (rope, SiLU gating, RMS norm, per-step depformer).
TINY_LM_KWARGS: dict[str, Any] = {
    "dim": 64, "text_card": 200, "existing_text_padding_id": 3, "n_q": 4, "dep_q": 2, "card": 64,
    "num_heads": 4, "num_layers": 2, "hidden_scale": 4.125, "causal": True, "layer_scale": None,
    "context": 512, "max_period": 10000, "gating": "silu", "norm": "rms_norm_f32", "positional_embedding": "rope",
    "depformer_dim": 64, "depformer_dim_feedforward": 256, "depformer_num_heads": 4, "depformer_num_layers": 1,
    "depformer_layer_scale": None, "depformer_multi_linear": True, "depformer_context": 2,
    "depformer_max_period": 10000, "depformer_gating": "silu", "depformer_pos_emb": "none",
    "depformer_weights_per_step": True, "delays": [0, 0, 1, 0, 1],
}


def lm_kwargs_for(preset: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    base = TINY_LM_KWARGS if preset == "tiny" else loaders._lm_kwargs
    kw = copy.deepcopy(dict(base))
    kw.update(overrides or {})
    return kw


def resolve_file(spec: str, filename: str) -> Path:
    """A local file, a local folder holding `filename`, or a hub repo id (downloaded by huggingface_hub)."""
    p = Path(spec).expanduser()
    if p.is_file():
        return p
    if p.is_dir() and (p / filename).is_file():
        return p / filename
    if p.exists() or spec.count("/") != 1:
        raise TrainError(f"{spec}: not a file, a folder with {filename}, nor a hub repo id")
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(spec, filename))


class OracleLM(nn.Module):
    """An LMModel plus `lm.oracle_emb`; `forward(codes, oracle)` returns moshi's `LMOutput`.

    codes: [B, 1 + n_q, T] (text, then the model's own dep_q codebooks, then the other speaker's);
    oracle: [B, T] one token per frame, on the same frame timeline as codes.
    """

    def __init__(self, lm: LMModel, oracle_pad_id: int | None = None):
        super().__init__()
        self.lm = lm
        if not hasattr(lm, "oracle_emb"):
            lm.oracle_emb = copy.deepcopy(lm.text_emb)  # initialised from the text embedding
        self.oracle_pad_id = lm.existing_text_padding_id if oracle_pad_id is None else oracle_pad_id
        self._oracle_in: torch.Tensor | None = None
        self._hook = lm.text_emb.register_forward_hook(self._add_oracle)

    @property
    def text_card(self) -> int:
        return self.lm.text_card

    @property
    def oracle_start_id(self) -> int:
        return self.lm.text_card

    def _add_oracle(self, module, inputs, output):
        if self._oracle_in is None:
            return output
        if self._oracle_in.shape != inputs[0].shape:
            raise RuntimeError(f"oracle {tuple(self._oracle_in.shape)} does not match text input {tuple(inputs[0].shape)}")
        return output + self.lm.oracle_emb(self._oracle_in).to(output.dtype)

    def align_oracle(self, oracle: torch.Tensor) -> torch.Tensor:
        """The oracle as the text embedding sees it. LMModel.forward delays each stream
        (text by delays[0]), prepends an initial step and drops the last one, so input step s holds
        text frame s-1-delays[0]; the oracle gets the same shift, padded in front (the pad, not the
        start token, so nothing looks like an event at step 0)."""
        B, T = oracle.shape
        lead = min(1 + int(self.lm.delays[0]), T)
        pad = oracle.new_full((B, lead), self.oracle_pad_id)
        return torch.cat([pad, oracle[:, :T - lead]], dim=1)

    def forward(self, codes: torch.Tensor, oracle: torch.Tensor | None = None) -> LMOutput:
        if oracle is not None and oracle.shape != (codes.shape[0], codes.shape[2]):
            raise ValueError(f"oracle must be [B, T] = {(codes.shape[0], codes.shape[2])}, got {tuple(oracle.shape)}")
        self._oracle_in = None if oracle is None else self.align_oracle(oracle)
        try:
            return self.lm(codes)
        finally:
            self._oracle_in = None

    @contextmanager
    def oracle_input(self, tokens: torch.Tensor):
        """Feed `tokens` ([B, 1]) to the oracle embedding at every text-embedding call inside the
        block: the streaming path (moshi's `LMGen`) embeds one frame per step, so the caller
        writes each frame's oracle token into `tokens` in place before the step (a CUDA graph
        replays reading the same tensor)."""
        self._oracle_in = tokens
        try:
            yield tokens
        finally:
            self._oracle_in = None

    def lm_state_dict(self) -> dict[str, torch.Tensor]:
        """LMModel keys plus `oracle_emb.*`, as kame_finetune names them."""
        return self.lm.state_dict()


def build_model(preset: str = "tiny", weights: str | None = None, overrides: dict[str, Any] | None = None,
                device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> OracleLM:
    """Build the LM, random or from weights (a .safetensors path, a folder holding Kyutai's
    model.safetensors, or a hub repo id), and attach the oracle embedding: loaded when the file
    has `oracle_emb.*` (our exports, kame_finetune's), else backfilled from `text_emb`."""
    kw = lm_kwargs_for(preset, overrides)
    if not weights:
        return OracleLM(loaders.get_moshi_lm(None, lm_kwargs=kw, device=device, dtype=dtype)).to(device)
    from safetensors.torch import load_file

    filename = resolve_file(weights, loaders.MOSHI_NAME)
    log.info("loading Moshi weights from %s", filename)
    state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in load_file(str(filename), device=str(device)).items()}
    # Built on the meta device and then given the loaded tensors, as moshi's own loader does.
    lm = loaders.get_moshi_lm(None, lm_kwargs=kw, device="meta", dtype=dtype)
    oracle = {k: state.pop(k) for k in [k for k in state if k.startswith("oracle_emb.")]}
    lm.load_state_dict(state, assign=True)
    model = OracleLM(lm)
    if oracle:
        model.lm.oracle_emb.load_state_dict({k.removeprefix("oracle_emb."): v for k, v in oracle.items()})
    else:
        log.info("no oracle_emb in %s: initialised from text_emb", filename)
    return model.to(device)


def set_gradient_checkpointing(lm: LMModel, enabled: bool = True) -> None:
    """Recompute each transformer layer's activations in the backward pass instead of keeping them
    (moshi's own per-layer switch, `StreamingTransformer.checkpointing`; kame_finetune's
    `enable_activation_checkpointing` does the same for both transformers): memory for compute,
    the same loss and gradients. Not a model setting, so it stays out of moshi_lm_kwargs.json."""
    for transformer in (lm.transformer, lm.depformer):
        if transformer is not None:
            transformer.checkpointing = enabled


def load_lm_state(model: OracleLM, state: dict[str, torch.Tensor]) -> bool:
    """Load LMModel(+oracle) weights; returns True when oracle_emb was missing and was backfilled
    from text_emb. Any other missing or unexpected key is an error."""
    missing, unexpected = model.lm.load_state_dict(state, strict=False)
    oracle_missing = {k for k in missing if k.startswith("oracle_emb.")}
    other = sorted(set(missing) - oracle_missing)
    if other or unexpected:
        raise RuntimeError(f"incompatible LM state: missing {other[:5]}, unexpected {sorted(unexpected)[:5]}")
    if oracle_missing:
        model.lm.oracle_emb.load_state_dict(model.lm.text_emb.state_dict())
        return True
    return False


def compile_context(enabled: bool):
    """moshi torch.compile's a few kernels lazily; on the CPU that is a long first step and a
    recompile per new window length, so training runs eager unless asked."""
    if enabled:
        return nullcontext()
    from moshi.utils.compile import no_compile

    return no_compile()
