"""llm/health.py on a clock the test moves: an item's deadline, the outage rule, the backend-wide
pause, and what none of them may do (one item alone is never an outage; a pause is nobody's
deadline). Property tests try orders of events no one wrote down."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kame_data.llm.health import RATE_LIMITED, ServiceHealth, outage_items_for
from kame_data.llm.limits import BackendUnavailable


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _health(clock: Clock, deadline: float = 10.0, outage: float = 30.0, items: int = 2) -> ServiceHealth:
    return ServiceHealth(deadline, outage, items, "http://server", clock=clock)


def test_outage_items_scale_with_concurrency():
    assert [outage_items_for(c) for c in (1, 4, 8, 12, 16, 64, 1000)] == [2, 2, 2, 3, 4, 4, 4]


def test_an_items_deadline_runs_from_its_first_failed_attempt():
    clock = Clock()
    h = _health(clock)
    h.open("d1")
    assert h.left("d1") == math.inf  # nothing failed: no clock runs
    h.failed("d1", "timeout", "no whole answer within 5 s", started=clock.now - 5)
    assert h.left("d1") == pytest.approx(5.0)
    clock.now += 4
    assert h.left("d1") == pytest.approx(1.0)
    t = h.give_up("d1", "its requests failed for item_deadline (10 s)")
    assert h.given_up("d1") is t and t.gave_up.startswith("timeout (no whole answer within 5 s); its requests")
    assert h.close("d1") is t and h.given_up("d1") is None  # the call is done with it: forgotten


def test_an_answer_clears_the_items_own_trouble_and_the_streak():
    clock = Clock()
    h = _health(clock, outage=5)
    for d in ("a", "b"):
        h.open(d)
        h.failed(d, "http_500", "", started=clock.now)
    clock.now += 4
    h.answered("a")  # the service is up
    assert h.left("a") == math.inf and h.left("b") == pytest.approx(6.0)
    clock.now += 10
    h.failed("b", "http_500", "", started=clock.now)
    h.check()  # one item failing since the answer: never an outage, however long


def test_an_outage_needs_several_items_and_the_time():
    clock = Clock()
    h = _health(clock, deadline=1000, outage=30, items=3)
    for d in ("a", "b"):
        h.open(d)
        h.failed(d, "connection_error", "", started=clock.now)
    clock.now += 60
    h.check()  # two items < three
    h.open("c")
    with pytest.raises(BackendUnavailable, match=r"answered no request for 60 s while requests of 3 dialogues "
                                                 r"failed \(outage_after 30 s; last: connection_error\)"):
        h.failed("c", "connection_error", "", started=clock.now)
    with pytest.raises(BackendUnavailable):  # once down, down for every later request
        h.check()


def test_a_rate_limit_of_two_items_pauses_the_backend_and_the_pause_is_nobodys_deadline():
    clock = Clock()
    h = _health(clock, deadline=10, outage=300)
    for d in ("a", "b"):
        h.open(d)
    assert h.failed("a", RATE_LIMITED, "", started=clock.now, retry_after=2) is False  # one item: its own
    assert not h.pausing
    assert h.failed("b", RATE_LIMITED, "", started=clock.now, retry_after=2) is True
    assert h.pausing and h.pause_left() == pytest.approx(2.0) and h.pauses == 1
    clock.now += 2
    assert h.failed("a", RATE_LIMITED, "", started=clock.now, retry_after=2) is True  # the probe: extended
    assert h.pause_left() == pytest.approx(2.0) and h.pauses == 1
    clock.now += 2
    assert h.left("a") == pytest.approx(10.0)  # four seconds, all paused: nothing spent
    assert h.answered("b") is True and not h.pausing
    assert h.paused_total() == pytest.approx(4.0)
    clock.now += 3
    assert h.left("a") == pytest.approx(7.0)


def test_a_pause_longer_than_outage_after_stops_at_once():
    clock = Clock()
    h = _health(clock, outage=300)
    h.failed("a", RATE_LIMITED, "", started=clock.now, retry_after=3600)
    with pytest.raises(BackendUnavailable, match="asks every request to wait 3600 s"):
        h.failed("b", RATE_LIMITED, "", started=clock.now, retry_after=3600)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["fail", "answer", "tick", "give_up", "close"]),
                          st.integers(0, 3), st.floats(0, 20)), max_size=60))
def test_no_order_of_events_makes_an_outage_of_one_item_or_a_negative_clock(events):
    """Whatever happens, an outage needs failures of two distinct items since the last answer,
    `left` never grows without an answer, and a given-up item stays given up while it is open."""
    clock = Clock()
    h = _health(clock, deadline=15, outage=10, items=2)
    failing: set[str] = set()
    opened: dict[str, int] = {}
    for kind, n, dt in events:
        item = f"d{n}"
        if kind == "tick":
            clock.now += dt
            try:
                h.check()
            except BackendUnavailable:
                assert len(failing) >= 2
                return
        elif kind == "answer":
            h.answered(item)
            failing.clear()
        elif kind == "fail":
            h.open(item)
            opened[item] = opened.get(item, 0) + 1
            before = h.left(item)
            failing.add(item)
            try:
                h.failed(item, "http_500", "", started=clock.now - min(dt, 5))
            except BackendUnavailable:
                assert len(failing) >= 2
                return
            assert h.left(item) <= before or before == math.inf
        elif kind == "give_up":
            h.open(item)
            opened[item] = opened.get(item, 0) + 1
            h.give_up(item, "test")
            h.answered(item)  # an answer of another of its requests does not bring it back
            failing.clear()
            assert h.given_up(item) is not None
        elif kind == "close" and opened.get(item):
            opened[item] -= 1
            h.close(item)
