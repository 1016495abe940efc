"""The served stream against the server's own rules, written from SakanaAI/kame's code and not from our
output: `src/kame/server_oracle.py` (LLMStreamMultiplexer: adoption on first emission, the stream
limit; opus_loop: drain the oracle events, then step every complete 1920-sample frame) and
`src/kame/models/lm.py` (LMGen.update_oracle_tokens_streaming: a reset puts the start token at the
current step offset; LMGen._step: step s reads oracle_tokens[s - offset] when that index exists).

The table gives cases a reader can redo by hand; the property test replays random schedules through a
deliberately plain millisecond-by-millisecond simulation of that loop, sharing no code with
kame_data/oracle/serve.py, and compares every reply's frame, until, read, late and cut."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kame_data.oracle.serve import serve, served_frame


# ---------------------------------------------------------------- worked cases

@pytest.mark.parametrize("unit1_ms, read", [
    (1120, True),   # the first millisecond of frame 14: in the buffer before step 14 runs (at 1200 ms)
    (1199, True),   # its last millisecond: still before step 14 runs
    (1200, False),  # the first millisecond after it: step 14 has run, the unit is never read
])
def test_a_unit_is_in_time_until_its_step_runs(unit1_ms, read):
    # first chunk (unit 0) at 1000 ms: frame 12, so the reset is at step 12, unit 0 at 13, unit 1 at 14
    (s,) = serve([True], [900], [[1000, unit1_ms]])
    assert s.frame == 12 and ((14, 1) in s.read) == read and s.late == (0 if read else 1)


@pytest.mark.parametrize("ms, frame", [(2320, 29), (80, 1), (240, 3), (4000, 50), (79, 0), (2399, 29), (2400, 30)])
def test_frames_are_whole_numbers_on_the_sample_clock(ms, frame):
    assert served_frame(ms) == frame
    (s,) = serve([True], [ms], [[ms]])
    assert s.frame == frame


def test_every_exact_multiple_of_80_ms_is_its_own_frame():
    # int(ms / 1000 * 12.5) in floating point is one short for many of them (2320 ms gives 28)
    assert all(served_frame(80 * k) == k for k in range(100_000))
    assert sum(int(80 * k / 1000 * 12.5) != k for k in range(1000)) > 0


def test_a_reply_adopted_after_the_audio_never_plays():
    # 20 frames of audio (1600 ms): a first chunk at 1600 would reset at step 20, which never runs
    s0, s1 = serve([True, True], [0, 1200], [[100] * 30, [1600, 1600]], frames=20)
    assert s1.frame is None and s1.read == [] and s1.late == 0 and s1.cut == 0
    assert s0.frame == 1 and s0.until is None and len(s0.read) == 18 and s0.cut == 12  # steps 20+ never run
    (early,) = serve([True], [1200], [[1599, 1599]], frames=20)  # frame 19: the reset plays, its units do not
    assert early.frame == 19 and early.read == [] and early.cut == 2


def test_the_eighth_live_stream_cancels_the_oldest_waiting():
    asked = [0, 100, 200, 300, 400, 500, 600, 700]
    got = serve([True] * 8, asked, [[5000 + t] for t in asked], streams=7)
    assert got[0].frame is None and got[0].late == 1 and all(g.frame is not None for g in got[1:])


# ---------------------------------------------------------------- the loop, plainly

def simulate(sent, requested, units, streams, frames):
    """KAME's opus_loop and multiplexer, one millisecond at a time: at each ms the steps whose frame
    completes then run first (a unit arriving at that very ms is too late for them), then requests
    start, then chunks arrive (a first chunk newer than the adopted reply adopts it, cancels every
    older reply and resets the buffer at the current step count)."""
    n = len(sent)
    end_ms = 80 * frames
    live, cancelled, adopted = [], set(), 0  # replies started (in request order), cancelled, adopted (1-based)
    buffer, injected = [], None
    owner = None  # the reply whose tokens the buffer holds
    steps_done = 0
    frame = [None] * n
    until = [None] * n
    read = [[] for _ in range(n)]
    arrived_at_step = {}
    order = [k for k in range(n) if sent[k] and units[k]]
    horizon = max([end_ms] + [max(units[k]) for k in order] + [requested[k] for k in order]) + 1
    for t in range(horizon + 1):
        while 80 * (steps_done + 1) <= t and steps_done < frames:  # a step per complete frame
            s = steps_done
            if injected is not None and 0 <= s - injected < len(buffer) and s - injected >= 1:
                read[owner].append((s, s - injected - 1))
            steps_done += 1
        for k in order:
            if requested[k] == t:
                live.append(k)
                finished = [j for j in live if j == owner and max(units[j]) <= t]
                for j in finished:
                    live.remove(j)
                waiting = [j for j in live if j != owner]
                while streams and len(waiting) + (owner in live) > streams:
                    cancelled.add(waiting[0])
                    live.remove(waiting[0])
                    waiting = waiting[1:]
        for k in order:
            for j, u in enumerate(units[k]):
                if u != t or k in cancelled or k not in live and k != owner:
                    continue
                if j == 0 and (owner is None or k > owner):
                    for old in [x for x in live if x < k]:
                        live.remove(old)
                        if old != owner:
                            cancelled.add(old)
                    if owner is not None and steps_done < frames:
                        until[owner] = steps_done
                    owner, buffer, injected = k, ["start"], steps_done
                    frame[k] = steps_done if steps_done < frames else None
                    if frame[k] is None:
                        owner, injected = None, None
                if k == owner:
                    buffer.append(j)
    return frame, until, read, cancelled


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 600), st.integers(0, 700), st.integers(1, 6),
                          st.integers(0, 150)), min_size=1, max_size=10),
       st.integers(0, 3), st.integers(5, 40))
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_the_served_stream_is_the_server_loop(spec, streams, frames):
    sent, requested, units = [], [], []
    t = 0
    for ok, gap, first, n, spread in spec:
        t += gap
        sent.append(ok)
        requested.append(t)
        units.append([t + first + spread * j for j in range(n)])
    got = serve(sent, requested, units, streams=streams, frames=frames)
    frame, until, read, _ = simulate(sent, requested, units, streams, frames)
    for k, g in enumerate(got):
        if frame[k] is None or until[k] is not None and until[k] <= frame[k]:
            assert g.frame is None and g.read == [], (k, g, frame[k])
            continue
        assert g.frame == frame[k] and g.until == until[k], (k, g, frame[k], until[k])
        assert g.read == read[k], (k, g.read, read[k])
        # no unit read before it arrived, none twice, and every unit counted once
        assert all(units[k][j] < 80 * (f + 1) for f, j in g.read) and len({j for _, j in g.read}) == len(g.read)
        assert len(g.read) + g.late + g.cut == len(units[k])


# ---------------------------------------------------------------- when requests leave (the multiplexer)

from kame_data.oracle.latency import FINAL, PARTIAL, LatencyModel, arrivals, multiplexer_starts, transcripts  # noqa: E402

MUX = LatencyModel(name="mux", min_restart_interval=0.5, streams=7)  # no delays: heard at the ladder time


def test_a_partial_too_soon_schedules_one_trailing_start_that_sends_the_latest_partial():
    # on_interim_pending -> _maybe_start_new_stream: 'a' at 1.0 s starts; 'a b' at 1.2 s is 0.2 s after it, so a
    # trailing start is scheduled for 1.5 s; 'a b c' at 1.3 s finds it scheduled; at 1.5 s it sends 'a b c', the
    # latest partial then ('a b' is never asked)
    heard = [1.0, 1.2, 1.3, 2.4]
    said = [(PARTIAL, "a"), (PARTIAL, "a b"), (PARTIAL, "a b c"), (PARTIAL, "a b c d")]
    assert multiplexer_starts(heard, said, 0.5) == [1.0, None, 1.5, 2.4]  # 2.4 s: 0.9 s after the last start


def test_a_final_starts_at_once_unless_its_words_were_already_asked():
    # on_final_committed: bypass_restart_interval=True; it cancels the trailing start; `already_requested`
    heard = [1.0, 1.2, 1.3]
    assert multiplexer_starts(heard, [(PARTIAL, "a"), (PARTIAL, "a b"), (FINAL, "a b")], 0.5) == [1.0, None, 1.3]
    assert multiplexer_starts([1.0, 1.3], [(PARTIAL, "a b"), (FINAL, "a b")], 0.5) == [1.0, None]
    # no cap of 5 starts per 2 s: partials 0.5 s apart all start
    assert multiplexer_starts([0.5 * k for k in range(10)], [(PARTIAL, str(k)) for k in range(10)], 0.5) == \
        [0.5 * k for k in range(10)]


def test_the_server_hears_the_users_new_words_only():
    contexts = ["B: what is", "B: what is two", "B: what is two", "B: what is two plus two", "B: what is two plus two\nA: four"]
    ratios = [0.4, 0.6, 0.6, 1.0, 0.0]
    assert transcripts(contexts, ratios, "B") == [(PARTIAL, "what is"), (PARTIAL, "what is two"), ("", "what is two"),
                                                  (FINAL, "what is two plus two"), ("", "")]


def test_arrivals_under_the_multiplexer():
    events = [(1000, "r0", PARTIAL, "a"), (1200, "r1", PARTIAL, "a b"), (1300, "r2", PARTIAL, "a b c"),
              (1900, "r3", PARTIAL, "a b c d"), (2000, "r4", FINAL, "a b c d")]
    got = arrivals(MUX, events, seed=0, dialogue_id="d")
    assert [a.sent for a in got] == [True, False, True, True, False]
    assert [a.requested_ms for a in got if a.sent] == [1000, 1500, 2000]  # the trailing start of 1.9 s fires at 2.0 s
