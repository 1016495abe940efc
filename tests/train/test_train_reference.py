"""The bundled trainer against the reference, SakanaAI/kame_finetune: each ported rule checked on a
small worked example whose expected values were computed by hand from the reference's documented
behaviour (its finetune.py arguments and loss, utils/data.py's DataCollator, tools/tokenize_text.py,
tools/tokenize_oracle.py), not from our code's output. docs/guides/training.md, "The bundled trainer against
kame_finetune", lists the rules."""

import math

import numpy as np
import pytest

from kame_data.train import missing_dependencies
from kame_data.train.config import config_from_dict, load_train_config
from kame_data.train.data import windows_from_rows
from kame_data.train.streams import OracleAugment, build_events, oracle_frames
from kame_data.train.transcript import text_stream, text_stream_by_chars
from tests.synthetic_tokens import events_from_rows

MISSING = missing_dependencies()
needs_torch = pytest.mark.skipif(bool(MISSING), reason=f"kame_data.train needs {', '.join(MISSING)}")
P, E = 3, 0  # pad, end-of-pad
START = 200

# ------------------------------------------------------------------------------------ defaults


def test_defaults_are_the_reference_settings():
    cfg = config_from_dict({})
    assert (cfg.optim.lr, cfg.optim.depformer_lr, cfg.optim.betas, cfg.optim.eps, cfg.optim.weight_decay) == \
        (3e-5, None, [0.9, 0.95], 1e-5, 0.1)
    assert (cfg.optim.schedule, cfg.optim.warmup_steps, cfg.optim.decay_norms_and_biases, cfg.optim.grad_clip) == \
        ("constant", 100, True, 1.0)
    assert (cfg.train.semantic_weight, cfg.train.acoustic_weight, cfg.train.text_pad_weight, cfg.train.text_pad_norm) == \
        (100.0, 1.0, 0.5, "separate")
    assert (cfg.oracle.shift_prob, cfg.oracle.right_shift, cfg.oracle.left_shift, cfg.oracle.skip_prob) == \
        (1.0, [1, 10], [1, 15], [0.1, 0.7])
    assert (cfg.oracle.time_jitter, cfg.oracle.hint_only, cfg.oracle.hint_only_warmup) == (0, False, None)
    assert (cfg.data.max_frames, cfg.data.min_frames) == (512, 128)
    assert (cfg.tokenize.text_placement, cfg.tokenize.frame_arithmetic, cfg.tokenize.skip_forbid) == \
        ("chars", "reference", "reference")
    paper = load_train_config("train_kame")
    assert (paper.train.precision, paper.optim.lr, paper.optim.schedule, paper.optim.eps) == \
        ("bf16-mixed", 3e-5, "constant", 1e-5)


# ------------------------------------------------------------------------------------ text placement

# kame_finetune's own sample transcript (data/random_oracle_sample/text/water.json): a quarter of a
# second per word. The pieces are a fixed segmentation, as SentencePiece would give them.
WATER_A = [("What", 0.0, 0.25), ("makes", 0.25, 0.5), ("water", 0.5, 0.75), ("freeze", 0.75, 1.0),
           ("into", 1.0, 1.25), ("ice", 1.25, 1.5)]
WATER_B = [("Water", 2.0, 2.25), ("freezes", 2.25, 2.5), ("when", 2.5, 2.75), ("its", 2.75, 3.0),
           ("temperature", 3.0, 3.25), ("becomes", 3.25, 3.5), ("low", 3.5, 3.75)]
PIECES = {"What makes water freeze into ice": ["▁What", "▁makes", "▁wat", "er", "▁free", "ze", "▁into", "▁ice"],
          "Water freezes when its temperature becomes low":
              ["▁Water", "▁freez", "es", "▁when", "▁its", "▁tem", "per", "ature", "▁becomes", "▁low"]}
IDS = {p: 10 + i for i, p in enumerate(sorted({p for ps in PIECES.values() for p in ps}))}


def pieces(text):
    return [(IDS[p], p) for p in PIECES[text]]


WORD_PIECES = {"What": ["▁What"], "makes": ["▁makes"], "water": ["▁wat", "er"], "freeze": ["▁free", "ze"],
               "into": ["▁into"], "ice": ["▁ice"]}


def encode_word(word):
    """The same pieces, one word at a time (for the word_start placement)."""
    return [IDS[p] for p in WORD_PIECES[word]]


def stream(pairs, frames):
    """The expected stream from {frame: piece or E}, pad elsewhere."""
    out = [P] * frames
    for f, v in pairs.items():
        out[f] = v if v == E else IDS[v]
    return out


def test_text_tokens_spread_over_a_words_time_by_characters():
    # A's words. "What" (first, its dummy space covers no character): 0.0 s -> frame 0. " makes" at
    # 0.25 s -> 0.25 // 0.08 = 3. " wat" at 0.5 s -> 6. "er" is characters 4-5 of " water"
    # (6 characters over 0.25 s): 0.5 + 4 x 0.25 / 6 = 0.667 s -> 8. " free" at 0.75 s -> 9; "ze",
    # characters 5-6 of " freeze" (7 over 0.25 s): 0.75 + 5 x 0.25 / 7 = 0.929 s -> 11. " into" at
    # 1.0 s -> 12 (12.5 floored); " ice" at 1.25 s -> 15. The pad before each token that follows a
    # pad becomes end-of-pad; the stream reaches 1 s past the last end: int(2.5 x 12.5) = 31 frames.
    want = stream({0: "▁What", 2: E, 3: "▁makes", 5: E, 6: "▁wat", 7: E, 8: "er", 9: "▁free", 10: E, 11: "ze",
                   12: "▁into", 14: E, 15: "▁ice"}, 40)
    assert text_stream_by_chars(WATER_A, pieces, 40).tolist() == want
    # Cut to the audio's length, padded past the reference's own length (31 frames).
    assert text_stream_by_chars(WATER_A, pieces, 12).tolist() == want[:12]
    # kame-data's former word_start placement puts "er" and "ze" right after their word's first piece.
    old = text_stream([(w, s) for w, s, _ in WATER_A], encode_word, 40, "exact")
    assert [i for i, (a, b) in enumerate(zip(old.tolist(), want)) if a != b] == [7, 8, 10, 11]


def test_text_frames_use_the_references_floating_point_floor():
    # B's words. "Water" starts at 2.0 s: 2.0 // 0.08 is 24.0 in floating point (0.08 is stored a
    # little above 0.08), so the reference puts it in frame 24, not 25. " freez" 2.25 s -> 28; "es",
    # characters 6-7 of " freezes" (8 over 0.25 s): 2.4375 s -> 30. " when" 2.5 -> 31; " its" 2.75
    # -> 34; " tem" 3.0 -> 37 (37.5); "per", characters 4-6 of " temperature" (12 over 0.25 s):
    # 3.0833 s -> 38; "ature" 3.1458 s -> 39; " becomes" 3.25 -> 40; " low" 3.5 -> 43.
    want = stream({23: E, 24: "▁Water", 27: E, 28: "▁freez", 29: E, 30: "es", 31: "▁when", 33: E, 34: "▁its",
                   36: E, 37: "▁tem", 38: "per", 39: "ature", 40: "▁becomes", 42: E, 43: "▁low"}, 60)
    assert text_stream_by_chars(WATER_B, pieces, 60).tolist() == want
    exact = text_stream_by_chars(WATER_B, pieces, 60, "exact").tolist()
    assert exact[23:26] == [P, E, IDS["▁Water"]] and exact[26:] == want[26:]  # whole milliseconds: 25


def test_a_token_whose_frame_is_taken_goes_to_the_next_free_frame():
    # Three pieces in one 0.1 s word: each char 0.025 s, so all start in frame 0 -> frames 0, 1, 2.
    three = {"abcdef": ["▁ab", "cd", "ef"]}
    ids = {"▁ab": 21, "cd": 22, "ef": 23}
    got = text_stream_by_chars([("abcdef", 0.0, 0.1)], lambda t: [(ids[p], p) for p in three[t]], 6)
    assert got.tolist() == [21, 22, 23, P, P, P]


# ------------------------------------------------------------------------------------ oracle events


def _event(ms, channel, pred="a b", hint="", ratio=0.5):
    return {"timestamp_ms": ms, "channel": channel, "prediction": pred, "hint": hint, "current_spoken_ratio": ratio}


def enc(text):
    return [40 + len(w) for w in text.split()]


def test_skip_forbid_marks_the_end_of_each_run_of_a_channel():
    # A ladder as kame_finetune reads it: channel 0 predicts A's replies, channel 1 B's.
    ladder = [_event(400, 0), _event(800, 0), _event(1200, 1), _event(1600, 0), _event(2000, 1), _event(2400, 1)]
    words = [{"speaker": "A", "word": "hm", "start": 0.5, "end": 0.6}]  # A speaks between its first two events
    ev_a, _ = build_events(ladder, 0, "A", words, 100, enc)
    ev_b, _ = build_events(ladder, 1, "B", words, 100, enc)
    # Channel 0 runs: [400, 800] then [1600]; channel 1: [1200], [2000, 2400]. The last of each is protected.
    assert ev_a.skip_forbid.tolist() == [0, 1, 1] and ev_b.skip_forbid.tolist() == [1, 0, 1]
    # kame-data's `turns` rule also protects 400: A says "hm" before channel 0's next event.
    turns, _ = build_events(ladder, 0, "A", words, 100, enc, "turns")
    assert turns.skip_forbid.tolist() == [1, 1, 1]
    # Frames: int(ms / 1000 x 12.5) in floating point; 2320 ms gives 28 there (28.999…), 29 by whole ms.
    ref, _ = build_events([_event(2320, 0)], 0, "A", [], 100, enc)
    exact, _ = build_events([_event(2320, 0)], 0, "A", [], 100, enc, arithmetic="exact")
    assert ref.frame_pos.tolist() == [28] and exact.frame_pos.tolist() == [29]


def test_shift_augmentation_moves_every_training_stream_by_default():
    cfg = config_from_dict({})
    o = cfg.oracle
    aug = OracleAugment(shift_prob=o.shift_prob, right_shift=tuple(o.right_shift), left_shift=tuple(o.left_shift))
    ev = events_from_rows([(20, 1.0, 1, [11], [21, 22])])  # one event: start token at 20, hint at 21-22
    seen = set()
    for seed in range(200):
        s = oracle_frames(ev, 60, START, rng=np.random.default_rng(seed), aug=aug)
        at = int(np.nonzero(s == START)[0][0])
        assert s[at + 1:at + 3].tolist() == [21, 22]
        seen.add(at - 20)
    # With probability 1.0 never unshifted: right by 1-10 frames or left by 1-15, each amount seen.
    assert seen == set(range(-15, 0)) | set(range(1, 11))
    # A hand example, [P, START, 11, 12, P, P] moved by 3: right pads the front and drops the tail,
    # left drops the front and pads the tail.
    by3 = OracleAugment(shift_prob=1.0, right_shift=(3, 3), left_shift=(3, 3))
    outs = {tuple(oracle_frames(events_from_rows([(1, 0.2, 0, [11, 12], [])]), 6, START, rng=np.random.default_rng(k),
                                aug=by3).tolist()) for k in range(20)}
    assert outs == {(P, P, P, P, START, 11), (12, P, P, P, P, P)}


def test_hint_only_examples_and_their_curriculum():
    ev = events_from_rows([(2, 0.5, 0, [11, 12], [21]), (6, 1.0, 0, [13], [22, 23]), (10, 0.2, 0, [14], [])])
    # Normal: hint when ratio >= 1.0 and a hint exists, else the prediction.
    assert oracle_frames(ev, 14, START).tolist() == [P, P, START, 11, 12, P, START, 22, 23, P, START, 14, P, P]
    # Hint-only: every event shows its hint; an event without one is left out.
    aug = OracleAugment(hint_only=True)
    got = oracle_frames(ev, 14, START, rng=np.random.default_rng(0), aug=aug)
    assert got.tolist() == [P, P, START, 21, P, P, START, 22, 23, P, P, P, P, P]
    # Curriculum [10, 20]: hint-only up to step 10, from step 20 never, half the examples at 15.
    ramp = OracleAugment(hint_only=True, hint_only_warmup=(10, 20))
    share = {}
    for step in (0, 10, 15, 20, 30):
        runs = [oracle_frames(ev, 14, START, rng=np.random.default_rng(k), aug=ramp, step=step) for k in range(400)]
        share[step] = np.mean([r[3] == 21 for r in runs])
    assert share[0] == share[10] == 1.0 and share[20] == share[30] == 0.0 and 0.42 < share[15] < 0.58


def test_time_jitter_moves_events_later_only():
    ev = events_from_rows([(5, 1.0, 1, [11], [21])])
    aug = OracleAugment(jitter=4)
    at = {int(np.nonzero(oracle_frames(ev, 20, START, rng=np.random.default_rng(k), aug=aug) == START)[0][0])
          for k in range(100)}
    assert at == {5, 6, 7, 8, 9}  # U{0..4} frames later
    late = events_from_rows([(18, 1.0, 1, [11], [21])])  # pushed past the window's end: left out
    outs = [oracle_frames(late, 20, START, rng=np.random.default_rng(k), aug=aug) for k in range(50)]
    assert any((o == P).all() for o in outs) and all((o == START).sum() <= 1 for o in outs)


def test_windows_of_at_most_max_frames_and_short_ones_dropped():
    def row(T):
        codes = np.zeros((9, T), np.int64)
        empty = {f"{sp}_oracle_{k}": [] for sp in "AB" for k in ("event_frame_pos", "event_ratio", "event_skip_forbid",
                                                                  "pred_values", "hint_values")}
        offs = {f"{sp}_oracle_{k}": [0] for sp in "AB" for k in ("pred_offsets", "hint_offsets")}
        return {"dialogue_id": f"d{T}", "A": codes, "B": codes, **empty, **offs}

    # 1000 frames -> two windows of 500; 600 -> two of 300; 300 -> one of 300; 100 -> dropped (< 128).
    ws = windows_from_rows([row(1000), row(600), row(300), row(100)], ["A"], 16, 8, 512, 128)
    assert [(w.id, w.codes.shape[1]) for w in ws] == [("d1000/A/0", 500), ("d1000/A/1", 500), ("d600/A/0", 300),
                                                      ("d600/A/1", 300), ("d300/A/0", 300)]
    # 300 frames with 128-frame windows: three of 100, all under 128.
    assert windows_from_rows([row(300)], ["A"], 16, 8, 128, 128) == []


# ------------------------------------------------------------------------------------ optimizer, losses


def test_learning_rate_warms_up_linearly_then_stays():
    from kame_data.train.optim import lr_at

    cfg = config_from_dict({"train": {"steps": 10000}})
    assert [lr_at(s, cfg) for s in (1, 50, 100, 101, 5000, 10000)] == \
        pytest.approx([3e-7, 1.5e-5, 3e-5, 3e-5, 3e-5, 3e-5], rel=1e-12)
    cos = config_from_dict({"train": {"steps": 300}, "optim": {"schedule": "cosine", "warmup_steps": 100}})
    assert lr_at(200, cos) == pytest.approx(3e-5 * (0.1 + 0.9 * 0.5))  # half-way down the cosine
    assert lr_at(300, cos) == pytest.approx(3e-6)


@needs_torch
def test_adamw_groups_and_settings():
    import torch

    from kame_data.train.model import build_model
    from kame_data.train.optim import build_optimizer, is_depformer

    torch.manual_seed(0)
    model = build_model("tiny")
    opt = build_optimizer(model, config_from_dict({"optim": {"depformer_lr": 1e-4}}))
    assert all(g["betas"] == (0.9, 0.95) and g["eps"] == 1e-5 and g["weight_decay"] == 0.1 for g in opt.param_groups)
    by_lr = {g["lr"]: sum(p.numel() for p in g["params"]) for g in opt.param_groups}
    dep = sum(p.numel() for n, p in model.named_parameters() if is_depformer(n))
    total = sum(p.numel() for p in model.parameters())
    assert by_lr == {3e-5: total - dep, 1e-4: dep} and dep > 0
    assert is_depformer("module.lm.linears.0.weight") and not is_depformer("lm.text_linear.weight")
    spare = build_optimizer(model, config_from_dict({"optim": {"decay_norms_and_biases": False}}))
    no_decay = [p for g in spare.param_groups if g["weight_decay"] == 0.0 for p in g["params"]]
    assert no_decay and all(sum(d > 1 for d in p.shape) == 1 for p in no_decay)  # the RMS norm scales


@needs_torch
def test_loss_weights_and_pad_normalisation_on_a_worked_example():
    import torch
    from moshi.models.lm import LMOutput

    from kame_data.train.losses import LossRule, lm_losses

    ln2 = math.log(2)
    # Text (card 8): targets pad, end-of-pad, token 7, pad, token 5, and a frame past the window (-1).
    # A target whose logit is ln 7 against 0 for the 7 others has p = 1/2: cross-entropy ln 2; a
    # frame of all-0 logits has ln 8 = 3 ln 2.
    codes = torch.full((1, 5, 6), -1, dtype=torch.long)
    codes[0, 0] = torch.tensor([P, E, 7, P, 5, -1])
    codes[0, 1, :2] = torch.tensor([1, 2])  # the semantic codebook (card 4): all-0 logits, ln 4 = 2 ln 2
    codes[0, 2, :2] = torch.tensor([0, 3])  # an acoustic codebook: target logit ln 3, p = 1/2, ln 2
    text_logits = torch.zeros(1, 1, 6, 8)
    for t in (0, 2, 3):  # pad ln2, end-of-pad ln8, token ln2, pad ln2, token ln8
        text_logits[0, 0, t, codes[0, 0, t]] = math.log(7)
    logits = torch.zeros(1, 2, 6, 4)
    for t in (0, 1):
        logits[0, 1, t, codes[0, 2, t]] = math.log(3)
    out = LMOutput(logits, torch.ones(1, 2, 6, dtype=torch.bool), text_logits, torch.ones(1, 1, 6, dtype=torch.bool))

    ref = lm_losses(out, codes, 2)
    # Reference: mean over tokens and end-of-pad (ln8, ln2, ln8 -> 7/3 ln2) + 0.5 x mean over pads
    # (ln2) = 17/6 ln2. Audio: (100 x (2 ln2 + 2 ln2) + (ln2 + ln2)) / (100 x 2 + 2) = 402/202 ln2.
    assert float(ref["text"]) == pytest.approx(17 / 6 * ln2, rel=1e-6)
    assert float(ref["audio"]) == pytest.approx(402 / 202 * ln2, rel=1e-6)
    assert ref["counts"].tolist() == [2, 1, 2, 2, 2]  # tokens, end-of-pad, pads, semantic, acoustic
    # kame-data's former rule: one mean, pad and end-of-pad at 0.5: (ln2 + 3 ln2 + 0.5 (3 ln2 + 2 ln2))
    # / (2 + 0.5 x 3) = 13/7 ln2; audio the plain mean of the four: 6 ln2 / 4.
    old = lm_losses(out, codes, 2, LossRule(0.5, "weighted", 1.0, 1.0))
    assert float(old["text"]) == pytest.approx(13 / 7 * ln2, rel=1e-6)
    assert float(old["audio"]) == pytest.approx(1.5 * ln2, rel=1e-6)


# ------------------------------------------------------------------------------------ precision


def _paper_precision_run(tmp_path, precision):
    """20 steps of the tiny model on one fixed batch with the paper recipe's optimizer, schedule,
    losses and `precision` (train_kame.yaml: bf16-mixed); returns the losses and the share of
    weights that changed."""
    import dataclasses

    import torch

    from kame_data.train.loop import Trainer
    from tests.train.test_train import synthetic_windows

    paper = load_train_config("train_kame")
    loss_keys = ("text_loss_weight", "audio_loss_weight", "text_pad_weight", "text_pad_norm", "semantic_weight",
                 "acoustic_weight")
    cfg = config_from_dict({
        "seed": 0, "optim": dataclasses.asdict(paper.optim), "oracle": {"skip_prob": [0.0, 0.0], "shift_prob": 0.0},
        "train": {"steps": 20, "batch_size": 8, "log_every": 1, "eval_every": 1000, "checkpoint_every": 1000,
                  "threads": 1, "device": "cpu", "precision": precision,
                  **{k: getattr(paper.train, k) for k in loss_keys}}})
    windows, _ = synthetic_windows(8, seed=3, T=64)  # the whole set is the batch, every step
    trainer = Trainer(cfg, tmp_path / precision, windows)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    losses = [r["loss"] for r in trainer.run()]
    params = dict(trainer.model.named_parameters())
    changed = sum(int((params[n].detach() != before[n]).sum()) for n in before) / sum(p.numel() for p in before.values())
    state_dtypes = {v.dtype for s in trainer.opt.state.values() for k, v in s.items() if k != "step"}
    return losses, changed, {p.dtype for p in params.values()}, state_dtypes


@pytest.mark.slow  # over five seconds (tests/README.md)
@needs_torch
def test_paper_precision_trains_every_weight_with_fp32_master_weights(tmp_path):
    import torch

    paper = load_train_config("train_kame")
    assert paper.train.precision == "bf16-mixed" and paper.optim.lr == 3e-5
    losses, changed, param_dtypes, state_dtypes = _paper_precision_run(tmp_path, paper.train.precision)
    print(f"bf16-mixed, lr 3e-5, 20 steps: {changed:.2%} of the weights changed; loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    assert param_dtypes == state_dtypes == {torch.float32}  # master weights and AdamW moments in fp32
    assert changed >= 0.95
    means = [np.mean(losses[i:i + 5]) for i in range(0, 20, 5)]
    assert means == sorted(means, reverse=True) and losses[-1] < losses[0] - 0.05, losses
    # Weights and AdamW state in bf16 (the former paper recipe) lose nearly every update.
    losses16, changed16, dtypes16, _ = _paper_precision_run(tmp_path, "bf16")
    print(f"bf16 weights: {changed16:.2%} changed; loss {losses16[0]:.4f} -> {losses16[-1]:.4f}")
    assert dtypes16 == {torch.bfloat16} and changed16 < 0.1
