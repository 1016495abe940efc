"""The bundled trainer: oracle wiring in Moshi's LMModel, learning, exact resume, the token
Parquet of the quickstart in kame_finetune's layout, the CLI and the GPU benchmark's CPU path."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from kame_data.train import TrainError, missing_dependencies
from tests.conftest import ROOT

MISSING = missing_dependencies()
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"kame_data.train needs {', '.join(MISSING)}, not importable here "
                          "(pip install 'kame-data[train]' && pip install --no-deps moshi==0.2.13)")

if not MISSING:
    import torch

    from kame_data.train.config import config_from_dict
    from kame_data.train.data import Window
    from kame_data.train.sampler import eval_batches
    from kame_data.train.loop import Trainer
    from kame_data.train.losses import lm_losses
    from kame_data.train.model import (
        TINY_LM_KWARGS,
        build_model,
        load_lm_state,
    )
    from kame_data.train.streams import OracleEvents, pack_ragged

TEXT_CARD, CARD, N_Q = TINY_LM_KWARGS["text_card"], TINY_LM_KWARGS["card"], TINY_LM_KWARGS["n_q"]


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread: faster and steadier than two on a busy 2-core machine."""
    if not MISSING:
        old = torch.get_num_threads()
        torch.set_num_threads(1)
        yield
        torch.set_num_threads(old)
    else:
        yield


def synthetic_windows(n, seed, T=48, event_frame=12, reply_len=8, extra_events=0):
    """Windows where the assistant's reply is random text that only the oracle carries.

    The audio is a per-window repeating motif (learnable, like steady speech codes). One event at
    `event_frame` (ratio 1.0, so the stream carries its hint = the true reply); the reply is spoken
    from event_frame + 2, i.e. each reply token one frame after the oracle shows it.
    """
    rng = np.random.default_rng(seed)
    r0 = event_frame + 2
    out = []
    for i in range(n):
        codes = np.empty((1 + N_Q, T), np.int64)
        text = np.full(T, 3, np.int64)
        reply = rng.integers(4, TEXT_CARD, reply_len)
        text[r0 - 1] = 0
        text[r0:r0 + reply_len] = reply
        codes[0] = text
        codes[1:] = np.tile(rng.integers(0, CARD, (N_Q, 4)), T // 4 + 1)[:, :T]
        frames = [event_frame] + sorted(rng.choice(np.arange(0, event_frame - 1), extra_events, replace=False).tolist())
        preds = [rng.integers(4, TEXT_CARD, reply_len).tolist() for _ in frames]
        hints = [reply.tolist()] + [[] for _ in frames[1:]]
        order = np.argsort(frames, kind="stable")
        pv, po = pack_ragged([preds[k] for k in order])
        hv, ho = pack_ragged([hints[k] for k in order])
        ev = OracleEvents(np.array(frames, np.int32)[order], np.array([1.0] + [0.5] * extra_events, np.float32)[order],
                          np.array([1] + [0] * extra_events, np.int8)[order], pv, po, hv, ho)
        out.append(Window(f"w{i}", codes, ev))
    return out, slice(r0, r0 + reply_len)


def tiny_cfg(**over):
    raw = {"seed": 0, "oracle": {"skip_prob": [0.0, 0.0], "shift_prob": 0.0},
           "optim": {"lr": 3e-3, "warmup_steps": 10},
           "train": {"steps": 100, "batch_size": 8, "grad_accum": 1, "log_every": 1, "eval_every": 1000,
                     "checkpoint_every": 1000, "threads": 1}}
    for section, vals in over.items():
        raw.setdefault(section, {}).update(vals) if isinstance(vals, dict) else raw.__setitem__(section, vals)
    return config_from_dict(raw)


# ------------------------------------------------------------------------------------ model wiring


@pytest.mark.slow  # over five seconds (tests/README.md)
def test_oracle_embedding_starts_as_the_text_embedding_and_is_aligned_like_text():
    torch.manual_seed(0)
    model = build_model("tiny")
    lm = model.lm
    assert torch.equal(lm.oracle_emb.weight, lm.text_emb.weight)
    assert lm.oracle_emb.weight.data_ptr() != lm.text_emb.weight.data_ptr()
    assert "oracle_emb.weight" in model.lm_state_dict()
    assert model.oracle_start_id == TEXT_CARD == lm.text_card

    seen = {}
    h = lm.oracle_emb.register_forward_hook(lambda m, i, o: seen.update(x=i[0].clone()))  # returns None
    codes = torch.randint(0, CARD, (2, 1 + N_Q, 20))
    codes[:, 0] = torch.randint(0, TEXT_CARD, (2, 20))
    oracle = torch.randint(4, TEXT_CARD, (2, 20))
    model.eval()
    with torch.no_grad():
        base = model(codes, oracle).text_logits
    h.remove()
    # LMModel.forward feeds text frame s-1 at step s (after its initial token); the oracle too.
    assert seen["x"][:, 0].tolist() == [3, 3] and torch.equal(seen["x"][:, 1:], oracle[:, :-1])

    # Causality: the oracle token of frame 10 first shows when predicting frame 11, as text does.
    changed = oracle.clone()
    changed[:, 10] = TEXT_CARD
    with torch.no_grad():
        after = model(codes, changed).text_logits
    assert torch.allclose(base[:, :, :11], after[:, :, :11])
    assert not torch.allclose(base[:, :, 11], after[:, :, 11])
    # No oracle at all is the plain LMModel.
    with torch.no_grad():
        plain = model.lm(codes).text_logits
        assert torch.allclose(model(codes, None).text_logits, plain)


def test_weights_load_with_oracle_embedding_backfilled_or_restored(tmp_path):
    from safetensors.torch import save_file

    torch.manual_seed(1)
    src = build_model("tiny")
    with torch.no_grad():
        src.lm.oracle_emb.weight.add_(1.0)
    state = {k: v.contiguous() for k, v in src.lm_state_dict().items()}
    kyutai_like = {k: v for k, v in state.items() if not k.startswith("oracle_emb.")}
    (tmp_path / "kyutai").mkdir()
    save_file(kyutai_like, str(tmp_path / "kyutai" / "model.safetensors"))  # a folder, as Kyutai ships it
    save_file(state, str(tmp_path / "ours.safetensors"))

    m1 = build_model("tiny", weights=str(tmp_path / "kyutai"))
    assert torch.equal(m1.lm.text_emb.weight, src.lm.text_emb.weight)
    assert torch.equal(m1.lm.oracle_emb.weight, src.lm.text_emb.weight)  # backfilled from text_emb
    m2 = build_model("tiny", weights=str(tmp_path / "ours.safetensors"))
    assert torch.equal(m2.lm.oracle_emb.weight, src.lm.oracle_emb.weight)
    m3 = build_model("tiny")
    assert load_lm_state(m3, kyutai_like) is True and torch.equal(m3.lm.oracle_emb.weight, src.lm.text_emb.weight)
    with pytest.raises(RuntimeError, match="incompatible"):
        load_lm_state(m3, {**kyutai_like, "nonsense.weight": torch.zeros(1)})


# ------------------------------------------------------------------------------------ learning


@pytest.mark.slow
def test_overfits_a_fixed_batch(tmp_path):
    windows, _ = synthetic_windows(8, seed=3, T=64)
    cfg = tiny_cfg(train={"steps": 100, "batch_size": 8})  # the whole set is the batch, every step
    t0 = time.perf_counter()
    recs = Trainer(cfg, tmp_path, windows).run()
    first, last = recs[0]["loss"], recs[-1]["loss"]
    print(f"overfit: loss {first:.3f} -> {last:.3f} in 100 steps, {time.perf_counter() - t0:.1f} s")
    assert last <= 0.5 * first, (first, last)


def reply_text_loss(trainer, windows, reply, blank):
    """Mean text loss on the reply frames of held-out windows, the oracle as the model trained."""
    trainer.model.eval()
    tot, n = 0.0, 0
    with torch.no_grad():
        for batch in eval_batches(windows, 16, trainer.model.oracle_start_id, blank_oracle=blank):
            L = lm_losses(trainer.model(batch.codes, batch.oracle), batch.codes, trainer.model.lm.dep_q)
            tot += L["text_per_frame"][:, reply].sum().item()
            n += L["text_per_frame"][:, reply].numel()
    return tot / n


@pytest.mark.slow
def test_oracle_carrying_the_reply_lowers_reply_text_loss(tmp_path):
    train_w, reply = synthetic_windows(2048, seed=0)
    held_out, _ = synthetic_windows(32, seed=1)
    losses = {}
    for blank in (False, True):
        cfg = tiny_cfg(oracle={"blank": blank}, train={"steps": 150, "batch_size": 16})
        t0 = time.perf_counter()
        trainer = Trainer(cfg, tmp_path / str(blank), train_w)
        trainer.run()
        losses[blank] = reply_text_loss(trainer, held_out, reply, blank)
        print(f"wiring: blank={blank} reply-frame text loss {losses[blank]:.3f} ({time.perf_counter() - t0:.1f} s)")
    # Random replies: without the oracle nothing beats ~log(196) = 5.3 nats; with it, copying does.
    assert losses[True] > 4.5
    assert losses[False] < losses[True] - 1.0, losses


def test_resume_continues_exactly(tmp_path):
    windows, _ = synthetic_windows(24, seed=5, extra_events=3)
    held_out, _ = synthetic_windows(4, seed=6)
    over = {"oracle": {"skip_prob": [0.1, 0.7], "shift_prob": 0.5, "time_jitter": 2,  # augmentations draw from
                       "hint_only": True, "hint_only_warmup": [1, 5]},  # the RNG; the curriculum reads the step
            "train": {"steps": 6, "batch_size": 4, "grad_accum": 2, "eval_every": 2, "checkpoint_every": 2}}
    full = Trainer(tiny_cfg(**over), tmp_path / "full", windows, held_out).run()

    k = 3
    first = Trainer(tiny_cfg(**over), tmp_path / "cut", windows, held_out)
    head = first.run(until=k)
    assert [r["loss"] for r in head] == [r["loss"] for r in full[:k]]
    assert [p.name for p in first.checkpoints()][-1] == f"step-{k:07d}.pt"
    del first
    torch.manual_seed(1234)  # disturb every RNG the loop uses; the checkpoint must restore them
    np.random.seed(1234)
    resumed = Trainer(tiny_cfg(**over), tmp_path / "cut", windows, held_out)
    assert resumed.resume_latest() and resumed.step == k
    tail = resumed.run()
    assert tail[0]["step"] == k + 1
    assert tail[0]["loss"] == full[k]["loss"], (tail[0]["loss"], full[k]["loss"])
    assert [r["loss"] for r in tail] == [r["loss"] for r in full[k:]]
    # Other settings cannot resume this run.
    with pytest.raises(TrainError, match="other training settings"):
        Trainer(tiny_cfg(**{**over, "optim": {"lr": 1e-3}}), tmp_path / "cut", windows).resume_latest()
    # The metrics log reads as one run (eval records included).
    read = lambda p: [json.loads(x) for x in p.read_text().splitlines()]  # noqa: E731
    strip = lambda recs: [{k2: v for k2, v in r.items() if k2 not in ("elapsed_s", "frames_per_s")} for r in recs]  # noqa: E731
    assert strip(read(tmp_path / "cut" / "metrics.jsonl")) == strip(read(tmp_path / "full" / "metrics.jsonl"))


# ------------------------------------------------------------------------------------ token Parquet

KAME_FINETUNE_COLUMNS = {  # utils/dataset_schema.py: prepared_dataset_features(use_oracle=True)
    "dialogue_id": "string", "A": "list<list<int64>>", "B": "list<list<int64>>",
    **{f"{sp}_oracle_{name}": f"list<{t}>" for sp in "AB" for name, t in (
        ("event_frame_pos", "int32"), ("event_ratio", "float"), ("event_skip_forbid", "int8"),
        ("pred_values", "int32"), ("pred_offsets", "int32"), ("hint_values", "int32"), ("hint_offsets", "int32"))},
}


def _arrow_type(t) -> str:
    import pyarrow as pa

    if pa.types.is_list(t):
        return f"list<{_arrow_type(t.value_type)}>"
    return str(t)


@pytest.mark.slow
def test_quickstart_tokens_match_kame_finetune_layout(quickstart_out, tmp_path):
    from kame_data.train.tokenize import TextTokenizer, tokenize_dataset

    cfg = config_from_dict({"data": {"eval_split": None}})
    t0 = time.perf_counter()
    info = tokenize_dataset(quickstart_out, tmp_path / "tokens", cfg)
    print(f"tokenised the quickstart fixture in {time.perf_counter() - t0:.1f} s: {info.meta['splits']}")
    src = {r["id"]: r for p in sorted((quickstart_out / "data").glob("train-*.parquet")) for r in pq.read_table(p).to_pylist()}
    files = info.files("train")
    assert files and all(f.is_file() for f in files)
    table = pq.read_table(files[0])
    assert {f.name: _arrow_type(f.type) for f in table.schema} == KAME_FINETUNE_COLUMNS
    rows = table.to_pylist()
    assert sorted(r["dialogue_id"] for r in rows) == sorted(src)
    tok = TextTokenizer((info.path / "tokenizer.model").read_bytes())
    card = info.meta["codec"]["card"]
    for row in rows:
        s = src[row["dialogue_id"]]
        A, B = np.array(row["A"]), np.array(row["B"])
        T = -(-round(s["duration"] * 24000) // 1920)
        assert A.shape == B.shape == (9, T), (A.shape, B.shape, T)
        assert ((A[1:] >= 0) & (A[1:] < card)).all() and ((B[1:] >= 0) & (B[1:] < card)).all()
        for sp, text in (("A", A[0]), ("B", B[0])):
            assert ((text >= 0) & (text < tok.vocab_size)).all()
            words = sorted((w for w in s["words"] if w["speaker"] == sp), key=lambda w: w["start"])
            first = next(i for i, v in enumerate(text) if v not in (0, 3))
            # kame_finetune's tools/tokenize_text.py: the frame is start // (1 / 12.5) in floating point,
            # and the first piece of the speaker's joined words is dropped when it is a bare "▁".
            assert first == min(T - 1, int(words[0]["start"] // (1 / 12.5)))
            assert first == 0 or text[first - 1] == 0  # end-of-pad just before the first word
            joined = " ".join(w["word"].strip() for w in words)
            ids, pieces = tok.sp.encode(joined), tok.sp.encode(joined, out_type=str)
            assert text[first] == (ids[1] if pieces[0] == "\u2581" else ids[0])
        # Oracle events: speaker A's are the channel-0 events, at int(timestamp_ms / 1000 x 12.5)
        # (tools/tokenize_oracle.py).
        src_ev = [e for e in s["oracle"] if e["channel"] == 0]
        assert row["A_oracle_event_frame_pos"] == [int(e["timestamp_ms"] / 1000 * 12.5) for e in src_ev]
        assert row["A_oracle_event_ratio"] == pytest.approx([e["current_spoken_ratio"] for e in src_ev])
        assert row["B_oracle_event_frame_pos"] == [int(e["timestamp_ms"] / 1000 * 12.5) for e in s["oracle"]
                                                   if e["channel"] == 1]
        for sp in "AB":
            E = len(row[f"{sp}_oracle_event_frame_pos"])
            for kind in ("pred", "hint"):
                off = row[f"{sp}_oracle_{kind}_offsets"]
                assert len(off) == E + 1 and off[0] == 0 and off == sorted(off)
                assert off[-1] == len(row[f"{sp}_oracle_{kind}_values"])
            assert len(row[f"{sp}_oracle_event_skip_forbid"]) == E
        if src_ev:
            assert row["A_oracle_event_skip_forbid"][-1] == 1
            i = len(src_ev) - 1
            off = row["A_oracle_pred_offsets"]
            assert row["A_oracle_pred_values"][off[i]:off[i + 1]] == tok.encode_text(src_ev[i]["prediction"].strip())
    # Reused, not redone, when nothing changed.
    again = tokenize_dataset(quickstart_out, tmp_path / "tokens", cfg)
    assert again.meta["seconds"] == info.meta["seconds"]


def test_tokenize_names_the_splits_when_train_is_missing(tmp_path):
    from kame_data.train.tokenize import tokenize_dataset

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test-00000-of-00001.parquet").write_bytes(b"")
    with pytest.raises(TrainError, match=r"no 'train' shards under data/ \(splits there: \['test'\]\)"):
        tokenize_dataset(tmp_path, tmp_path / "tokens", config_from_dict({}))


# ------------------------------------------------------------------------------------ CLI, benchmark


@pytest.mark.slow
def test_cli_trains_the_tiny_recipe_under_five_minutes(quickstart_out, tmp_path):
    out = tmp_path / "train"
    cmd = [sys.executable, "-m", "kame_data.cli.main", "train", "recipes/train_tiny.yaml",
           "--dataset", str(quickstart_out), "--out", str(out), "--quiet"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    wall = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    recs = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    train = [x for x in recs if "loss" in x]
    print(f"kame-data train train_tiny on the 3-dialogue fixture: {wall:.0f} s; loss {train[0]['loss']:.3f} "
          f"(step {train[0]['step']}) -> {train[-1]['loss']:.3f} (step {train[-1]['step']})")
    assert wall < 300
    assert train[-1]["step"] == 300 and train[-1]["loss"] < 0.5 * train[0]["loss"]
    assert (out / "model.safetensors").is_file() and (out / "tokens" / "tokens.json").is_file()
    assert "model:" in r.stdout and "300 steps" in r.stdout
    # Run again: the finished run resumes at its last checkpoint and has nothing left to do.
    r2 = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r2.returncode == 0 and "resumed at 300" in r2.stdout, r2.stdout + r2.stderr[-2000:]


def test_cli_names_the_install_command_when_torch_is_missing(monkeypatch, tmp_path):
    from kame_data.cli.main import app
    from typer.testing import CliRunner

    import kame_data.train.errors as kt

    monkeypatch.setattr(kt, "missing_dependencies", lambda: ["torch", "moshi"])
    r = CliRunner().invoke(app, ["train", "train_tiny", "--dataset", str(tmp_path)])
    assert r.exit_code == 1
    assert "pip install 'kame-data[train]'" in r.output and "torch, moshi" in r.output


@pytest.mark.slow
def test_gpu_benchmark_runs_tiny_on_the_cpu_without_kame_data_dependencies(tmp_path):
    """The benchmark's import path must work where only torch + moshi's model code exist."""
    blocker = (
        "import sys, runpy\n"
        "BLOCK = {'pyarrow', 'datasets', 'soundfile', 'soxr', 'sphn', 'sounddevice', 'bitsandbytes', 'aiohttp'}\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCK: raise ImportError('blocked for this test: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "sys.argv = sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, "-c", blocker, str(ROOT / "benchmarks" / "moshi_gpu_step.py"), "--tiny",
                        "--lengths", "25", "50", "--runs", "1", "--json", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    res = json.loads(out.read_text())["results"]
    assert [x["frames"] for x in res] == [25, 50] and all(x["ms_mean"] > 0 for x in res)
    assert "T=  25" in r.stdout and "T=  50" in r.stdout
