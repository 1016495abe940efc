"""The trainer's streams (numpy only): text placement, oracle events and the per-frame oracle stream.
Worked examples of the reference's rules are in tests/train/test_train_reference.py."""

import numpy as np
import pytest

from kame_data.train import TrainError
from kame_data.train.config import config_from_dict
from kame_data.train.streams import (
    OracleAugment,
    OracleEvents,
    build_events,
    frame_of_ms,
    frame_of_seconds,
    num_frames,
    oracle_frames,
    shift_stream,
)
from kame_data.train.transcript import text_stream
from tests.synthetic_tokens import events_from_rows

START = 200  # text_card of the tiny model: the oracle start token


def fake_encode(word: str) -> list[int]:
    """Deterministic stand-in tokenizer: one token per 3 characters, ids from the characters."""
    return [10 + (sum(map(ord, word[i:i + 3])) % 150) for i in range(0, len(word), 3)]


def test_frames_are_80_ms():
    assert frame_of_ms(0) == 0 and frame_of_ms(79) == 0 and frame_of_ms(80) == 1 and frame_of_ms(1000) == 12
    assert frame_of_seconds(0.16) == 2  # not 1 through 0.16 * 12.5 = 1.9999…
    assert num_frames(24000) == 13 and num_frames(1920 * 5) == 5


def test_word_start_text_stream_places_words_and_marks_end_of_pad():
    words = [("hello", 0.0), ("there", 0.40), ("x", 0.41), ("ok", 1.0)]
    s = text_stream(words, fake_encode, 20, "exact")
    h, t, x, o = (fake_encode(w) for w, _ in words)
    assert len(h) == 2 and len(t) == 2
    assert s[0:2].tolist() == h
    assert s[2:5].tolist() == [3, 3, 0]  # pad, then end-of-pad just before the next word
    assert s[5:7].tolist() == t  # "there" at frame 5 (0.40 s)
    assert s[7] == x[0]  # "x" (also frame 5) waits for the frame after "there"
    assert s[11] == 0 and s[12] == o[0]  # "ok" at 1.0 s = frame 12
    assert set(s[13:].tolist()) == {3}
    # Tokens past the end are cut, never wrapped.
    assert text_stream([("abcdefghi", 0.16)], fake_encode, 4, "exact").tolist() == [3, 0, *fake_encode("abcdefghi")[:2]]


def _event(ms, channel, pred, hint="", ratio=0.5):
    return {"timestamp_ms": ms, "channel": channel, "prediction": pred, "hint": hint, "current_spoken_ratio": ratio}


def test_events_of_one_channel_with_frames_tokens_and_skip_forbid():
    words = [{"speaker": "B", "word": "q", "start": 0.0, "end": 0.5},
             {"speaker": "A", "word": "a1", "start": 1.2, "end": 1.4},   # A answers between the 2nd and 3rd event
             {"speaker": "B", "word": "q2", "start": 1.6, "end": 2.0}]
    events = [_event(500, 0, "yes"), _event(1000, 0, "no", "it is", 1.0), _event(1500, 1, "b says"),
              _event(2000, 0, "maybe"), _event(2500, 0, "", ""), _event(90000, 0, "late")]
    enc = lambda text: fake_encode(text)  # noqa: E731
    ev, dropped = build_events(events, 0, "A", words, 40, enc, "turns", "exact")
    assert ev.frame_pos.tolist() == [6, 12, 25]  # floor(ms / 80)
    assert dropped == {"outside_audio": 1, "no_tokens": 1}
    # 500 -> 1000: same channel, A silent in between; 1000: next event has another channel;
    # 2000: A spoke nowhere after it but the next channel-0 event has no tokens, and the last is outside.
    assert ev.skip_forbid.tolist() == [0, 1, 0]
    assert ev.pred(1).tolist() == fake_encode("no") and ev.hint(1).tolist() == fake_encode("it is")
    assert ev.ratio.dtype == np.float32 and ev.pred_offsets.tolist() == [0, 1, 2, 4]  # "maybe" is 2 tokens
    ev_b, _ = build_events(events, 1, "B", words, 40, enc, "turns", "exact")
    assert ev_b.frame_pos.tolist() == [18] and ev_b.skip_forbid.tolist() == [1]
    # `turns`: a word by the answering speaker between two events of its channel is a turn switch;
    # the reference rule looks only at the next ladder entry's channel.
    ev2, _ = build_events([_event(1000, 0, "a"), _event(1500, 0, "b")], 0, "A", words, 40, enc, "turns")
    assert ev2.skip_forbid.tolist() == [1, 1]
    ev3, _ = build_events([_event(1000, 0, "a"), _event(1500, 0, "b")], 0, "A", words, 40, enc)
    assert ev3.skip_forbid.tolist() == [0, 1]


def test_oracle_frames_start_token_then_hint_or_prediction():
    ev = events_from_rows([(2, 0.6, 0, [11, 12, 13], [21, 22]), (8, 1.0, 1, [14], [23, 24, 25]), (13, 1.0, 0, [15, 16], [])])
    o = oracle_frames(ev, 15, START)
    assert o.tolist() == [3, 3, START, 11, 12, 13, 3, 3, START, 23, 24, 25, 3, START, 15]
    # A later event overwrites the frames it writes; the earlier one's tail past them stays (as in the reference).
    o2 = oracle_frames(events_from_rows([(1, 0.0, 0, [11, 12, 13, 14], []), (3, 0.0, 0, [15], [])]), 6, START)
    assert o2.tolist() == [3, START, 11, START, 15, 14]


def test_skipping_keeps_protected_events_and_follows_the_drawn_probability():
    rows = [(4 * i, 0.5, 1 if i % 5 == 4 else 0, [11], []) for i in range(50)]
    ev = events_from_rows(rows)
    aug = OracleAugment(skip_min=0.1, skip_max=0.7)
    skipped = []
    for seed in range(40):
        o = oracle_frames(ev, 200, START, rng=np.random.default_rng(seed), aug=aug)
        starts = set(np.nonzero(o == START)[0].tolist())
        assert {4 * i for i in range(50) if i % 5 == 4} <= starts  # the last before a turn switch stays
        skipped.append(1 - (len(starts) - 10) / 40)
    assert all(-0.1 <= s <= 0.9 for s in skipped) and 0.3 <= np.mean(skipped) <= 0.5
    assert np.std(skipped) > 0.08  # p is drawn per example, not fixed


def test_shift_moves_the_whole_stream_and_pads():
    o = np.array([3, 3, START, 11, 12, 3, 3, 3, 3, 3])
    aug = OracleAugment(shift_prob=1.0, right_shift=(2, 2), left_shift=(1, 1))
    seen = set()
    for seed in range(20):
        s = shift_stream(o, np.random.default_rng(seed), aug)
        seen.add(tuple(s.tolist()))
    assert seen == {(3, 3, 3, 3, START, 11, 12, 3, 3, 3), (3, START, 11, 12, 3, 3, 3, 3, 3, 3)}
    assert shift_stream(o, np.random.default_rng(0), OracleAugment(shift_prob=0.0)).tolist() == o.tolist()


def test_events_round_trip_through_columns_and_subset():
    ev = events_from_rows([(2, 0.6, 0, [11, 12], [21]), (8, 1.0, 1, [], [23, 24]), (13, 0.2, 0, [15], [])])
    cols = ev.columns("A_oracle")
    assert sorted(cols) == sorted(f"A_oracle_{n}" for n in ("event_frame_pos", "event_ratio", "event_skip_forbid",
                                                             "pred_values", "pred_offsets", "hint_values", "hint_offsets"))
    back = OracleEvents.from_columns(cols, "A_oracle")
    assert back.hint(1).tolist() == [23, 24] and back.pred(2).tolist() == [15]
    sub = back.subset([1, 2], shift=5)
    assert sub.frame_pos.tolist() == [3, 8] and sub.hint(0).tolist() == [23, 24] and sub.pred_offsets.tolist() == [0, 0, 1]


def test_train_recipe_names_a_bad_key():
    with pytest.raises(TrainError, match="train recipe.optim: unknown key 'learning_rate'"):
        config_from_dict({"optim": {"learning_rate": 1}})
    with pytest.raises(TrainError, match="oracle.skip_prob"):
        config_from_dict({"oracle": {"skip_prob": [0.5]}})
    cfg = config_from_dict({"train": {"steps": 5}, "data": {"speakers": ["A", "B"]}})
    assert cfg.train.steps == 5 and cfg.oracle.skip_prob == [0.1, 0.7]
    for raw, key in (({"tokenize": {"text_placement": "words"}}, "tokenize.text_placement"),
                     ({"oracle": {"hint_only_warmup": [5, 10]}}, "oracle.hint_only_warmup"),  # needs hint_only
                     ({"oracle": {"hint_only": True, "hint_only_warmup": [10, 5]}}, "oracle.hint_only_warmup"),
                     ({"data": {"max_frames": 100, "min_frames": 200}}, "data.min_frames"),
                     ({"oracle": {"time_jitter": -1}}, "oracle.time_jitter"),
                     ({"optim": {"schedule": "linear"}}, "optim.schedule"),
                     ({"train": {"text_pad_norm": "mean"}}, "train.text_pad_norm"),
                     ({"train": {"precision": "fp16"}}, "train.precision")):
        with pytest.raises(TrainError, match=key.replace(".", r"\.")):
            config_from_dict(raw)


def test_bundled_tiny_recipe_loads_by_name():
    from kame_data.train.config import load_train_config

    cfg = load_train_config("train_tiny")
    assert cfg.name == "train_tiny" and cfg.model.preset == "tiny" and cfg.data.speakers == ["A"]
    assert cfg.oracle.skip_prob == [0.1, 0.7] and cfg.train.steps == 300
    other = load_train_config("train_tiny")
    other.train.log_every = 1
    assert other.resume_hash() == cfg.resume_hash()  # logging cadence may change on resume
    other.optim.lr = 1.0
    assert other.resume_hash() != cfg.resume_hash()
