"""The streaming, data-parallel trainer: token shards read a block at a time, ranks splitting one
global stream, exact resume, and two `gloo` processes under torchrun training like one process."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from kame_data.train import missing_dependencies
from tests.conftest import ROOT

MISSING = missing_dependencies()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"kame_data.train needs {', '.join(MISSING)}")

if not MISSING:
    import pyarrow.parquet as pq

    from kame_data.train.config import config_from_dict
    from kame_data.train.data import windows_from_rows
    from kame_data.train.sampler import Loader, TokenShards, eval_batches
    from kame_data.train.streams import OracleAugment
    from tests.synthetic_tokens import write_token_dataset

AUG = OracleAugment(0.1, 0.7, 0.5, (1, 10), (1, 15))
ARGS = (["A"], 4, 2, 128)  # speakers, n_q, dep_q, max_frames of the tiny model


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    return write_token_dataset(tmp_path_factory.mktemp("tok") / "tokens", 40, seed=3, frames=(60, 300))


def shards(tokens):
    return TokenShards(sorted(tokens.glob("train-*.parquet")), *ARGS)


def test_shards_stream_the_windows_of_the_whole_split(tokens):
    src = shards(tokens)
    rows = [r for f in sorted(tokens.glob("train-*.parquet")) for r in pq.read_table(f).to_pylist()]
    everything = {w.id: w for w in windows_from_rows(rows, *ARGS)}
    assert src.num_groups() == 3 and src.rows == 40  # row groups of 16 dialogues
    streamed = [w for g in range(src.num_groups()) for w in src.windows([g])]
    assert sorted(w.id for w in streamed) == sorted(everything)
    for w in streamed:
        assert np.array_equal(w.codes, everything[w.id].codes)
        assert np.array_equal(w.events.frame_pos, everything[w.id].events.frame_pos)


def batches(loader, n):
    return [loader.next_batch() for _ in range(n)]


def test_two_ranks_split_exactly_the_global_batch_of_one(tokens):
    """Across block and epoch boundaries, with augmentation on: rank 0 + rank 1 = one process."""
    src = shards(tokens)
    one = batches(Loader(src, 8, 5, 200, AUG, groups_per_block=2), 25)
    r0 = batches(Loader(src, 8, 5, 200, AUG, rank=0, world=2, groups_per_block=2), 25)
    r1 = batches(Loader(src, 8, 5, 200, AUG, rank=1, world=2, groups_per_block=2), 25)
    ids = set()
    for b, a0, a1 in zip(one, r0, r1):
        assert b.ids == a0.ids + a1.ids
        ids.update(b.ids)
        for part, sl in ((a0, slice(0, 4)), (a1, slice(4, 8))):
            t = part.codes.shape[2]
            assert (b.codes[sl, :, :t] == part.codes).all() and (b.oracle[sl, :t] == part.oracle).all()
    n_windows = sum(len(src.windows([g])) for g in range(src.num_groups()))
    assert 25 * 8 > 2 * n_windows and len(ids) == n_windows  # two epochs and more: every window seen


def test_loader_resumes_exactly_and_orders_each_epoch_anew(tokens):
    src = shards(tokens)
    full = batches(Loader(src, 4, 1, 200, AUG, groups_per_block=2), 60)
    cut = Loader(src, 4, 1, 200, AUG, groups_per_block=2)
    batches(cut, 11)
    again = Loader(src, 4, 1, 200, AUG, groups_per_block=2)
    again.load_state(json.loads(json.dumps(cut.state())))  # survives a JSON round trip
    for want, got in zip(full[11:], batches(again, 19)):
        assert want.ids == got.ids and (want.oracle == got.oracle).all()
    n = sum(len(src.windows([g])) for g in range(src.num_groups()))
    order = [i for b in full for i in b.ids]
    assert len(order) >= 2 * n and order[:n] != order[n:2 * n] and sorted(order[:n]) == sorted(order[n:2 * n])


def test_eval_ranks_cover_every_window_once(tokens):
    src = shards(tokens)
    seen = [i for r in range(3) for b in eval_batches(src, 4, 200, rank=r, world=3) for i in b.ids]
    assert sorted(seen) == sorted(i for b in eval_batches(src, 4, 200) for i in b.ids)
    assert len(seen) == len(set(seen))


def test_global_batch_must_divide_among_ranks(tokens):
    from kame_data.train import TrainError

    with pytest.raises(TrainError, match="global batch"):
        Loader(shards(tokens), 6, 0, 200, AUG, rank=0, world=4)


def recipe(tmp, **train):
    raw = {"name": "dist", "seed": 0, "model": {"preset": "tiny"},
           "data": {"eval_split": None, "max_frames": 96, "min_frames": 0, "groups_per_block": 2},
           "oracle": {"skip_prob": [0.1, 0.7], "shift_prob": 0.3},
           "optim": {"lr": 3e-3, "warmup_steps": 2},
           "train": {"steps": 4, "batch_size": 8, "grad_accum": 2, "log_every": 1, "eval_every": 1000,
                     "checkpoint_every": 2, "threads": 1, **train}}
    config_from_dict(raw)  # valid
    path = tmp / f"train-{train.get('parallel', 'auto')}-{train.get('precision', 'auto')}.yaml"
    import yaml

    path.write_text(yaml.safe_dump(raw))
    return path


def train_cli(recipe_path, tokens, out, procs, *extra):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if procs == 1:
        cmd = [sys.executable, "-m", "kame_data.cli.main"]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={procs}",
               "-m", "kame_data.cli.main"]
    r = subprocess.run(cmd + ["train", str(recipe_path), "--dataset", str(tokens), "--out", str(out), "-q", *extra],
                       capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if "loss" in x]


@pytest.mark.slow
def test_two_gloo_processes_train_like_one_process_with_ddp_and_fsdp(tmp_path, tokens):
    path = recipe(tmp_path)
    one = train_cli(path, tokens, tmp_path / "one", 1)
    two = train_cli(path, tokens, tmp_path / "two", 2)
    assert [r["step"] for r in one] == [r["step"] for r in two] == list(range(1, 5))
    for a, b in zip(one, two):
        for k in ("loss", "text_loss", "audio_loss", "grad_norm"):
            assert b[k] == pytest.approx(a[k], rel=2e-5, abs=1e-6), (a["step"], k, a[k], b[k])
    assert "gloo" not in one[0] and (tmp_path / "two" / "train.rank1.log").is_file()
    # FSDP (parameters, gradients and optimizer state sharded over the two ranks) takes the same steps.
    fsdp = train_cli(recipe(tmp_path, parallel="fsdp"), tokens, tmp_path / "fsdp", 2)
    for a, b in zip(one, fsdp):
        for k in ("loss", "text_loss", "audio_loss", "grad_norm"):
            assert b[k] == pytest.approx(a[k], rel=2e-5, abs=1e-6), ("fsdp", a["step"], k, a[k], b[k])
    # The two-process run's checkpoint at step 2 resumes in one process on the same stream.
    (tmp_path / "two" / "checkpoints" / "step-0000004.pt").unlink()
    resumed = train_cli(path, tokens, tmp_path / "two", 1)
    assert [r["step"] for r in resumed] == list(range(1, 5))
    assert [r["loss"] for r in resumed] == pytest.approx([r["loss"] for r in one], rel=2e-5)


@pytest.mark.slow
def test_fsdp_mixed_precision_keeps_fp32_shards_and_trains_like_one_process(tmp_path, tokens):
    """bf16-mixed under FSDP (bf16 copies gathered from fp32 shards) against one process under
    autocast: the same steps up to bf16 rounding, and a checkpoint of fp32 weights and AdamW state."""
    import torch

    one = train_cli(recipe(tmp_path, precision="bf16-mixed"), tokens, tmp_path / "one", 1)
    fsdp = train_cli(recipe(tmp_path, precision="bf16-mixed", parallel="fsdp"), tokens, tmp_path / "fsdp", 2)
    for a, b in zip(one, fsdp):
        for k in ("loss", "text_loss", "audio_loss"):
            assert b[k] == pytest.approx(a[k], rel=2e-3), ("bf16-mixed fsdp", a["step"], k, a[k], b[k])
    assert fsdp[-1]["loss"] < fsdp[0]["loss"]
    state = torch.load(tmp_path / "fsdp" / "checkpoints" / "step-0000004.pt", weights_only=True)
    assert {v.dtype for v in state["model"].values()} == {torch.float32}
    moments = [v for s in state["optim"]["state"].values() for k, v in s.items() if k.startswith("exp_avg")]
    assert moments and {v.dtype for v in moments} == {torch.float32}


def test_train_kame_recipe_is_moshi_7b_on_gpus_with_fsdp():
    from kame_data.train.config import load_train_config
    from kame_data.train.model import lm_kwargs_for

    cfg = load_train_config("train_kame")  # bundled, read without downloading anything
    kw = lm_kwargs_for(cfg.model.preset, cfg.model.overrides)
    assert (kw["dim"], kw["num_layers"], kw["text_card"], kw["n_q"], kw["dep_q"]) == (4096, 32, 32000, 16, 8)
    assert (cfg.train.parallel, cfg.train.precision, cfg.train.device) == ("fsdp", "bf16-mixed", "auto")
    assert cfg.train.batch_size % 8 == 0 and cfg.tokenize.device == "cuda"
