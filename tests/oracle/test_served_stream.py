"""Worked examples of the served stream (docs/design.md, "Oracle arrival"), each written by hand from
the rules of KAME's server (SakanaAI/kame src/kame/server_oracle.py, LLMStreamMultiplexer and
opus_loop; src/kame/models/lm.py, LMGen): replies stream side by side (at most 7); a reply's first
chunk adopts it, cancels every older reply and resets the buffer (start token at the step of the frame
it arrives in); one unit per 80 ms step from there; unit j of a reply reset at step r is read at step
r + 1 + j if it arrived before that step ran (before 80 (r + 2 + j) ms), never otherwise; the previous
reply plays on until the next first chunk.

Frame n is [80 n, 80 (n + 1)) ms; a time falls in frame ms // 80, in integers."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kame_data.oracle.latency import IDEAL, Dist, LatencyModel, arrivals, parse_latency, pieces, PRESETS
from kame_data.oracle.serve import serve, stream


def test_a_reply_in_one_chunk():
    # sent at 1000 ms, all four units arrive at 1250 ms (frame 15)
    (s,) = serve([True], [1000], [[1250] * 4])
    assert s.frame == 15 and s.until is None
    assert s.read == [(16, 0), (17, 1), (18, 2), (19, 3)] and s.late == 0 and s.cut == 0


def test_a_reply_in_several_chunks_that_keep_ahead_of_the_frames():
    # chunks at 1250 (2 units), 1400 (2 units), 1500 (1 unit); frames 16..20 start at 1280..1600
    (s,) = serve([True], [1000], [[1250, 1250, 1400, 1400, 1500]])
    assert s.frame == 15 and s.read == [(16, 0), (17, 1), (18, 2), (19, 3), (20, 4)] and s.late == 0


def test_a_reply_slower_than_one_unit_per_frame_loses_the_units_that_come_late():
    # a unit every 120 ms from 1250 (frame 15): unit j is read at step 16 + j if it came before that
    # step ran, at 80 (17 + j) ms: 1250 < 1360, 1370 < 1440, 1490 < 1520; then 1610 >= 1600 and
    # 1730 >= 1680 come late
    (s,) = serve([True], [1000], [[1250, 1370, 1490, 1610, 1730]])
    assert s.read == [(16, 0), (17, 1), (18, 2)] and s.late == 2
    frames = stream([s], 24)
    assert frames[15] == (0, -1) and frames[16:19] == [(0, 0), (0, 1), (0, 2)]
    assert frames[19:] == [None] * 5  # the steps of the late units read pad


def test_a_new_reply_cuts_the_previous_one_which_plays_on_until_its_first_chunk():
    # reply 0: ten units at 1250 (frame 15). Reply 1 is requested at 1500 (frame 18) and its first
    # chunk arrives at 1700 (frame 21): reply 0 keeps playing through frame 20, then is cut.
    s0, s1 = serve([True, True], [1000, 1500], [[1250] * 10, [1700] * 3])
    assert s0.frame == 15 and s0.until == 21
    assert s0.read == [(16, 0), (17, 1), (18, 2), (19, 3), (20, 4)] and s0.cut == 5 and s0.late == 0
    assert s1.frame == 21 and s1.read == [(22, 0), (23, 1), (24, 2)]
    frames = stream([s0, s1], 26)
    assert frames[18:21] == [(0, 2), (0, 3), (0, 4)] and frames[21] == (1, -1)


def test_replies_stream_side_by_side_until_a_newer_one_is_adopted():
    # reply 1 is asked at 1450 ms, but reply 0 keeps streaming until reply 1's first chunk (1700 ms,
    # frame 21): its pieces arriving at 1500 and 1550 still make frames 19 (1520) and 20 (1600)
    s0, s1 = serve([True, True], [1000, 1450], [[1250, 1300, 1330, 1500, 1550], [1700]])
    assert s0.read == [(16, 0), (17, 1), (18, 2), (19, 3), (20, 4)] and s0.late == 0 and s0.until == 21
    # adopting reply 1 cancels reply 0: a piece of reply 0 due after 1700 ms never comes
    u0, u1 = serve([True, True], [1000, 1450], [[1250, 1300, 1330, 1750], [1700] * 6])
    assert u0.read == [(16, 0), (17, 1), (18, 2)] and u0.late == 1 and u1.frame == 21


def test_an_older_reply_that_answers_after_a_newer_one_is_ignored():
    # reply 0 is slow to start (1800 ms); reply 1, asked later, answers first (1400 ms, frame 17)
    t0, t1 = serve([True, True], [1000, 1200], [[1800, 1800], [1400]])
    assert t0.frame is None and t0.read == [] and t1.frame == 17 and t1.until is None


def test_the_stream_limit_cancels_the_oldest_reply_still_waiting():
    # seven live streams at most (KAME's default). Reply 0 answered at 600 ms and is done, so the
    # seven replies asked at 1000-4000 ms fill the streams and the eighth (4500 ms) cancels the
    # oldest still waiting (reply 1)
    asked = [500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500]
    arrive = [[600]] + [[10_000 + t] for t in asked[1:]]
    got = serve([True] * 9, asked, arrive, streams=7)
    assert got[1].frame is None and got[1].late == 1
    assert [g.frame is not None for g in got] == [True, False] + [True] * 7
    assert all(g.frame is not None for g in serve([True] * 9, asked, arrive))  # no limit
    # while the adopted reply still streams (its last piece at 5000 ms) it holds a stream too: the
    # seventh waiting reply (4000 ms) already cancels reply 1, and the eighth reply 2
    busy = [[600, 5000]] + arrive[1:]
    got = serve([True] * 9, asked, busy, streams=7)
    assert [g.frame is not None for g in got] == [True, False, False] + [True] * 6


def test_a_request_never_sent_plays_nothing():
    s0, s1 = serve([False, True], [1000, 1500], [[1100] * 3, [1700]])
    assert s0.frame is None and s0.late == 0 and s1.frame == 21


def test_the_restart_cap_holds_five_requests_per_two_seconds():
    # a step of 250 ms with an instant back-end: the requests at 250..1250 fill the window; 1500 and
    # 1750 find five requests in the last 2 s and are not sent; at 2250 the one at 250 has left it
    model = LatencyModel(name="cap", restarts=5, restart_window=2.0)
    times = [250, 500, 750, 1000, 1250, 1500, 1750, 2250]
    got = arrivals(model, [(t, f"reply {t}") for t in times], seed=1, dialogue_id="d")
    assert [a.sent for a in got] == [True] * 5 + [False, False, True]


def test_two_events_heard_before_one_tick_send_one_request_with_the_later_words():
    # heard at 1300 and 1310 ms; with a 1 s tick (its phase drawn per dialogue) both wait for the
    # same tick, and the server asks once, with the words heard last
    model = LatencyModel(name="t", stt_delay=Dist("const", 0.3), tick=1.0)
    got = arrivals(model, [(1000, "a b"), (1010, "c d")], seed=3, dialogue_id="x")
    assert got[0].requested_ms == got[1].requested_ms >= 1310
    assert [a.sent for a in got] == [False, True]


def test_ideal_arrivals_are_the_ladder_times():
    got = arrivals(IDEAL, [(500, "It is four."), (1000, "Four.")], seed=0, dialogue_id="d")
    assert [(a.heard_ms, a.requested_ms, a.first_token_ms) for a in got] == [(500, 500, 500), (1000, 1000, 1000)]
    assert got[0].piece_ms == [500] * len(pieces("It is four.")) and all(a.sent for a in got)


@given(st.lists(st.tuples(st.integers(0, 400), st.integers(1, 12)), min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_ideal_served_stream_is_the_event_time_stream_with_resets(spec):
    """Under `ideal`, each reply starts in its event's frame and reads one unit per frame until the
    next reply starts; what a frame reads is exactly where the trainer's event-time stream puts it,
    except that a reset clears the old reply for good."""
    frames, t = [], 0
    for gap, n in spec:
        t += gap
        frames.append((t, n))
    served = serve([True] * len(frames), [t for t, _ in frames], [[t] * n for t, n in frames])
    out = stream(served, 600)
    for k, (t, n) in enumerate(frames):
        f = t // 80
        nxt = [u // 80 for u, _ in frames[k + 1:]]
        until = min(nxt) if nxt else math.inf
        if until <= f:
            assert served[k].frame is None
            continue
        assert out[f] == (k, -1)
        assert [j for _, j in served[k].read] == list(range(min(n, int(until - f - 1) if until < math.inf else n)))


def test_arrivals_are_reproducible_and_follow_the_preset():
    model = PRESETS["hosted-fast"]
    ev = [(500 * i, "The answer is fourteen, since two times seven is fourteen.") for i in range(1, 40)]
    a = arrivals(model, ev, seed=7, dialogue_id="gsm8k-1-0")
    assert a == arrivals(model, ev, seed=7, dialogue_id="gsm8k-1-0")
    assert a != arrivals(model, ev, seed=7, dialogue_id="gsm8k-2-0")
    delays = [x.first_token_ms - x.ideal_ms for x in a]
    assert all(x.heard_ms >= x.ideal_ms + 500 and x.requested_ms >= x.heard_ms for x in a)
    assert all(x.first_token_ms > x.requested_ms and x.piece_ms == sorted(x.piece_ms) for x in a)
    assert 0.6 * model.expected_delay_s() * 1000 < np.median(delays) < 1.4 * model.expected_delay_s() * 1000


def test_recipe_latency_parses_presets_overrides_and_rejects_nonsense():
    assert parse_latency(None) is IDEAL and parse_latency("ideal") == IDEAL
    m = parse_latency({"preset": "hosted-fast", "first_token": {"dist": "gamma", "mean": 1.0, "cv": 0.2}})
    assert m.first_token == Dist("gamma", 1.0, 0.2) and m.stt_delay == PRESETS["hosted-fast"].stt_delay
    assert parse_latency({"stt_delay": 0.5}).stt_delay == Dist("const", 0.5)
    for bad in ("warp", {"preset": "nope"}, {"sttdelay": 1}, {"first_token": {"dist": "gamma", "mean": 1}},
                {"tick": -1}, {"chunk": 1.5}, {"stall_chance": 2}, {"tokens_per_s": 0},
                {"first_token": {"dist": "uniform", "low": 2, "high": 1}}):
        with pytest.raises(ValueError):
            parse_latency(bad)


@given(st.text(max_size=80))
def test_pieces_give_the_text_back(text):
    assert "".join(pieces(text)) == text
