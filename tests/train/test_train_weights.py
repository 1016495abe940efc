"""Trained checkpoints go where KAME's go (docs/guides/training.md, "Checkpoints"): what `kame-data train` writes loads
strictly the way SakanaAI/kame's loader loads, its moshi export in kyutai's own moshi loader, its
kame-finetune export the way kame_finetune's `from_pretrained` loads; a step-N.pt exports as well; a
resumed run continues exactly; gradient checkpointing changes nothing but memory.

The two loaders that are not installed here (kame's fork of moshi, kame_finetune) are reproduced
from their code as read (src/kame/models/loaders.py and lm.py; models/moshi_for_finetuning.py and
oracle_embedding_utils.py), on top of moshi's LMModel, which theirs extends."""

import json
import shutil
import subprocess

import pytest

from kame_data.train import TrainError, missing_dependencies
from tests.conftest import CLI

MISSING = missing_dependencies()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"kame_data.train needs {', '.join(MISSING)}")

if not MISSING:
    import torch
    from moshi.models import loaders
    from moshi.models.lm import LMModel
    from moshi.models.lm_utils import ScaledEmbedding
    from safetensors.torch import load_file
    from torch import nn

    from kame_data.train.model import TINY_LM_KWARGS

ORACLE = "oracle_emb."


def kame_get_moshi_lm(weights, lm_kwargs, dtype):
    """SakanaAI/kame's get_moshi_lm as read: LMModel(**lm_kwargs) on the meta device (kame's LMModel is
    moshi's plus `oracle_emb`, an embedding of the text vocabulary built like `text_emb`), the file's
    tensors with oracle_emb backfilled from text_emb when absent and floats cast to the runtime dtype,
    then load_state_dict(assign=True), strict."""
    lm = LMModel(device="meta", dtype=dtype, **lm_kwargs)
    lm.oracle_emb = ScaledEmbedding(lm.text_card + 1, lm.dim, zero_idx=lm.zero_token_id, device="meta", dtype=dtype)
    state = load_file(str(weights))
    if not any(k.startswith(ORACLE) for k in state):
        state.update({ORACLE + k.removeprefix("text_emb."): v.clone() for k, v in state.items()
                      if k.startswith("text_emb.")})
    lm.load_state_dict({k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()},
                       strict=True, assign=True)
    return lm


def _expose(gating):
    """MoshiForFinetuning's change to a gating layer: its two Linear weights become parameters of the
    gating module (`linear_in_weight`, `linear_out_weight`), the Linear modules go."""
    gating.linear_in_weight = nn.Parameter(gating.linear_in.weight.detach().clone())
    gating.linear_out_weight = nn.Parameter(gating.linear_out.weight.detach().clone())
    del gating.linear_in, gating.linear_out


def finetune_from_pretrained(folder, dtype=None):
    """kame_finetune's MoshiForFinetuning.from_pretrained as read: the class built from
    moshi_lm_kwargs.json (every gating layer of both transformers exposed), model.safetensors loaded
    with strict=False, then refused on any unexpected key or any missing key but a complete
    oracle_emb (which is then backfilled from text_emb)."""
    kwargs = json.loads((folder / "moshi_lm_kwargs.json").read_text())
    dtype = dtype or torch.float32
    lm = LMModel(device="cpu", dtype=dtype, **kwargs)
    lm.oracle_emb = ScaledEmbedding(lm.text_card + 1, lm.dim, zero_idx=lm.zero_token_id, dtype=dtype)
    for layer in lm.transformer.layers:
        _expose(layer.gating)
    for layer in lm.depformer.layers:
        for gating in layer.gating:
            _expose(gating)
    res = lm.load_state_dict(load_file(str(folder / "model.safetensors")), strict=False)
    oracle_missing = {k for k in res.missing_keys if k.startswith(ORACLE)}
    assert not res.unexpected_keys and set(res.missing_keys) == oracle_missing, res
    assert oracle_missing in (set(), {ORACLE + k for k in lm.oracle_emb.state_dict()})
    if oracle_missing:
        lm.oracle_emb.load_state_dict(lm.text_emb.state_dict())
    return lm, kwargs


def _ours(out):
    return load_file(str(out / "model.safetensors"))


def _cli(*args, **kw):
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=600, **kw)


@pytest.mark.slow  # over five seconds (tests/README.md)
def test_train_writes_weights_and_kwargs_that_kames_loader_loads_strictly(tiny_run):
    _, out = tiny_run
    kwargs = json.loads((out / "moshi_lm_kwargs.json").read_text())
    assert kwargs == TINY_LM_KWARGS  # the recipe's preset, every LMModel argument, JSON as kame_finetune writes it
    assert {"n_q", "dep_q", "delays", "text_card"} <= set(kwargs)  # CheckpointInfo.get_mimi reads n_q and dep_q
    assert (out / "tokenizer.model").is_file()
    ours = _ours(out)
    lm = kame_get_moshi_lm(out / "model.safetensors", kwargs, torch.bfloat16)
    assert set(lm.state_dict()) == set(ours) and any(k.startswith(ORACLE) for k in ours)
    for k, v in lm.state_dict().items():
        assert v.shape == ours[k].shape and torch.equal(v, ours[k].to(torch.bfloat16)), k


@pytest.mark.slow  # over five seconds (tests/README.md)
def test_moshi_export_loads_strictly_in_moshis_own_loader(tiny_run, tmp_path, monkeypatch):
    _, out = tiny_run
    with pytest.raises(RuntimeError, match="oracle_emb"):  # why the export exists: a plain LMModel has no oracle
        loaders.get_moshi_lm(str(out / "model.safetensors"), lm_kwargs=TINY_LM_KWARGS, dtype=torch.float32)
    dest = tmp_path / "moshi"
    r = _cli("export-checkpoint", out, "--to", "moshi", dest)
    assert r.returncode == 0, r.stderr
    assert "dropped oracle_emb.weight" in r.stdout
    config = json.loads((dest / "config.json").read_text())
    lm_kwargs = {k: v for k, v in config.items() if k not in ("moshi_name", "mimi_name", "mimi_config_name",
                                                                "tokenizer_name", "model_type")}
    lm = loaders.get_moshi_lm(str(dest / "model.safetensors"), lm_kwargs=lm_kwargs, dtype=torch.float32)  # strict
    ours = _ours(out)
    assert set(lm.state_dict()) == {k for k in ours if not k.startswith(ORACLE)}
    assert all(torch.equal(v, ours[k]) for k, v in lm.state_dict().items())
    # KAME's loader takes it as well, the oracle embedding backfilled from the text embedding.
    assert torch.equal(kame_get_moshi_lm(dest / "model.safetensors", lm_kwargs, torch.float32).oracle_emb.weight,
                       ours["text_emb.weight"])
    # The folder is a Kyutai model repository: moshi's CheckpointInfo builds LM, Mimi and tokenizer offline.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    info = loaders.CheckpointInfo.from_hf_repo(
        "offline/unused", moshi_weights=str(dest / config["moshi_name"]), mimi_weights=str(dest / config["mimi_name"]),
        tokenizer=str(dest / config["tokenizer_name"]), config_path=str(dest / "config.json"),
        mimi_config_path=str(dest / config["mimi_config_name"]))
    assert info.get_moshi(device="cpu", dtype=torch.float32).dep_q == TINY_LM_KWARGS["dep_q"]
    assert info.get_mimi().num_codebooks == 2 and info.get_text_tokenizer().vocab_size() > 0


@pytest.mark.slow  # over five seconds (tests/README.md)
def test_kame_finetune_export_loads_in_from_pretrained(tiny_run, tmp_path):
    _, out = tiny_run
    dest = tmp_path / "kft"
    r = _cli("export-checkpoint", out, "--to", "kame-finetune", dest)
    assert r.returncode == 0, r.stderr
    names = set(load_file(str(dest / "model.safetensors")))
    assert "transformer.layers.0.gating.linear_in_weight" in names
    assert "depformer.layers.0.gating.1.linear_out_weight" in names
    assert not [k for k in names if ".gating." in k and k.endswith(".weight") and "_weight" not in k]
    lm, kwargs = finetune_from_pretrained(dest)
    assert kwargs == TINY_LM_KWARGS
    ours = _ours(out)
    got = lm.state_dict()
    assert torch.equal(got["transformer.layers.1.gating.linear_out_weight"],
                       ours["transformer.layers.1.gating.linear_out.weight"])
    assert torch.equal(got["oracle_emb.weight"], ours["oracle_emb.weight"])
    assert len(got) == len(ours)


@pytest.mark.slow  # over five seconds (tests/README.md)
def test_a_step_checkpoint_exports_and_reads_back(tiny_run, tmp_path):
    from kame_data.train.weights import load_model, read_checkpoint

    _, out = tiny_run
    step = sorted((out / "checkpoints").glob("step-*.pt"))[-1]
    r = _cli("export-checkpoint", step, "--to", "kame", tmp_path / "k")
    assert r.returncode == 0, r.stderr
    a, b = _ours(out), load_file(str(tmp_path / "k" / "model.safetensors"))
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)  # the last step is the run's result
    assert (tmp_path / "k" / "tokenizer.model").is_file() and (tmp_path / "k" / "train_config.json").is_file()
    ckpt = read_checkpoint(tmp_path / "k")
    assert ckpt.train_config["model"]["preset"] == "tiny" and ckpt.tokenizer is not None
    assert load_model(ckpt).oracle_start_id == TINY_LM_KWARGS["text_card"]
    older = tmp_path / "older"  # an OUT from before moshi_lm_kwargs.json: the recipe names the model
    older.mkdir()
    for name in ("model.safetensors", "config.json"):
        shutil.copy(out / name, older / name)
    assert read_checkpoint(older).lm_kwargs == TINY_LM_KWARGS
    bad = tmp_path / "step-0000001.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(TrainError, match="not a kame-data training checkpoint"):
        read_checkpoint(bad)
    r = _cli("export-checkpoint", tmp_path / "nowhere", "--to", "moshi", tmp_path / "x")
    assert r.returncode == 1 and "no such checkpoint" in r.stderr and "Traceback" not in r.stderr


def test_resumed_run_continues_with_identical_losses_and_weights(tmp_path):
    """`kame-data train`'s own path (run.train): a run stopped after its step-2 checkpoint and run
    again resumes there and ends with the losses and weights of the run that never stopped."""
    from kame_data.train.config import config_from_dict
    from kame_data.train.run import train
    from tests.synthetic_tokens import write_token_dataset

    tokens = write_token_dataset(tmp_path / "tokens", 12, seed=2, frames=(60, 200))
    raw = {"data": {"eval_split": None, "max_frames": 64, "min_frames": 16},
           "train": {"steps": 4, "batch_size": 4, "checkpoint_every": 2, "log_every": 1, "threads": 1}}
    train(config_from_dict(raw), tokens, tmp_path / "full")
    cut = tmp_path / "cut"
    (cut / "checkpoints").mkdir(parents=True)
    shutil.copy(tmp_path / "full" / "checkpoints" / "step-0000002.pt", cut / "checkpoints")
    lines = (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()
    (cut / "metrics.jsonl").write_text("".join(x + "\n" for x in lines if json.loads(x)["step"] <= 2))
    result = train(config_from_dict(raw), tokens, cut)
    assert result.resumed_from == 2 and result.steps == 4

    def losses(p):
        recs = map(json.loads, p.read_text().splitlines())
        return [(r["step"], r["loss"], r["text_loss"], r["audio_loss"]) for r in recs]

    assert losses(cut / "metrics.jsonl") == losses(tmp_path / "full" / "metrics.jsonl")
    a, b = _ours(tmp_path / "full"), _ours(cut)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((cut / "moshi_lm_kwargs.json").read_text()) == TINY_LM_KWARGS


def test_gradient_checkpointing_gives_the_same_losses_and_recomputes(tmp_path):
    from kame_data.train.loop import Trainer
    from tests.train.test_train import synthetic_windows, tiny_cfg

    windows, _ = synthetic_windows(8, seed=4, T=48)
    runs = {}
    for on in (False, True):
        trainer = Trainer(tiny_cfg(train={"steps": 3, "batch_size": 4, "gradient_checkpointing": on}),
                          tmp_path / str(on), windows)
        calls = []
        layer = trainer.model.lm.transformer.layers[0]
        forward = layer.forward
        layer.forward = lambda *a, **k: calls.append(1) or forward(*a, **k)  # counts recomputation too
        recs = trainer.run()
        runs[on] = ([r["loss"] for r in recs], dict(trainer.model.lm.named_parameters()), len(calls))
    (plain, w0, n0), (ckpt, w1, n1) = runs[False], runs[True]
    assert plain == pytest.approx(ckpt, rel=1e-5, abs=1e-6)
    assert all(torch.allclose(w0[k], w1[k], rtol=1e-4, atol=1e-6) for k in w0)
    assert (n0, n1) == (3, 6)  # each layer runs again in the backward pass
    # It saves memory, not maths: a run may resume with it switched.
    assert tiny_cfg(train={"gradient_checkpointing": True}).resume_hash() == tiny_cfg().resume_hash()


@pytest.mark.slow
def test_fsdp_with_gradient_checkpointing_trains_like_one_plain_process_and_exports(tmp_path):
    """Two gloo ranks with FSDP and gradient checkpointing take one plain process's steps, and rank 0
    writes the same interchange files (the full state gathered from the shards)."""
    from tests.synthetic_tokens import write_token_dataset
    from tests.train.test_train_dist import recipe, train_cli

    tokens = write_token_dataset(tmp_path / "tokens", 16, seed=3, frames=(60, 300))
    one = train_cli(recipe(tmp_path), tokens, tmp_path / "one", 1)
    two = train_cli(recipe(tmp_path, parallel="fsdp", gradient_checkpointing=True), tokens, tmp_path / "fsdp", 2)
    for a, b in zip(one, two, strict=True):
        for k in ("loss", "text_loss", "audio_loss", "grad_norm"):
            assert b[k] == pytest.approx(a[k], rel=2e-5, abs=1e-6), (a["step"], k, a[k], b[k])
    assert json.loads((tmp_path / "fsdp" / "moshi_lm_kwargs.json").read_text()) == TINY_LM_KWARGS
    lm = kame_get_moshi_lm(tmp_path / "fsdp" / "model.safetensors", TINY_LM_KWARGS, torch.float32)
    a = _ours(tmp_path / "one")
    assert all(torch.allclose(v, a[k], rtol=1e-4, atol=1e-6) for k, v in lm.state_dict().items())
