"""limits.PriorityGate: the OpenAI backend's window of requests in flight, admitting the dialogue
seen first before later ones, so a run cut short keeps whole dialogues."""

import asyncio

from hypothesis import given, settings, strategies as st

from kame_data.llm.limits import PriorityGate


async def _run(capacity: int, priorities: list[int], cancel: set[int]) -> tuple[list[int], int]:
    """Every task waits for its slot, records its admission, and holds the slot until the test
    lets it go; returns the admission order and the largest number in flight at once."""
    gate = PriorityGate(capacity)
    order: list[int] = []
    inside = peak = 0
    hold = asyncio.Event()

    async def task(i: int, p: int):
        nonlocal inside, peak
        async with gate.slot((p, i)):
            order.append(i)
            inside += 1
            peak = max(peak, inside)
            try:
                await hold.wait()
            finally:
                inside -= 1

    # the first `capacity` tasks take the free slots; the rest queue behind them
    tasks = [asyncio.ensure_future(task(i, p)) for i, p in enumerate(priorities)]
    await asyncio.sleep(0)
    for i in cancel:
        tasks[i].cancel()
    hold.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return order, peak


def test_waiters_are_admitted_lowest_priority_first():
    order, peak = asyncio.run(_run(2, [9, 9, 5, 1, 3, 1], set()))
    assert order == [0, 1, 3, 5, 4, 2] and peak == 2


@settings(max_examples=60, deadline=None)
@given(capacity=st.integers(1, 4), priorities=st.lists(st.integers(0, 5), max_size=12), data=st.data())
def test_capacity_holds_and_no_waiter_is_lost(capacity, priorities, data):
    cancel = set(data.draw(st.lists(st.integers(0, max(0, len(priorities) - 1)), max_size=3))) if priorities else set()
    order, peak = asyncio.run(_run(capacity, priorities, cancel))
    assert peak <= capacity
    admitted_first = set(range(min(capacity, len(priorities))))
    # everyone not cancelled while waiting gets a slot, and the queue drains in priority order
    assert set(order) >= set(range(len(priorities))) - cancel
    queued = [i for i in order if i not in admitted_first]
    assert queued == sorted(queued, key=lambda i: (priorities[i], i))


def test_a_tight_budget_finishes_the_dialogue_seen_first():
    """Two dialogues' requests interleaved in one batch, four in flight at a time, and a budget for
    about one and a half of them: every request of the dialogue seen first is answered, and the
    budget stops only the other's (the window and the budget both serve the earliest dialogue)."""
    import pytest

    from kame_data.llm.accounting import Account, BudgetExceeded, Meter, Prices
    from kame_data.llm.base import ChatRequest
    from kame_data.llm.openai_backend import OpenAIBackend
    from tests.loopback_server import LoopbackServer

    n = 12
    reqs = [ChatRequest((("user", f"{who} asks question number {i} " + "word " * 40),), max_tokens=16, item=who)
            for i in range(n) for who in ("first", "second")]
    prices = Prices(100.0, 100.0)
    answered: list[int] = []
    with LoopbackServer(latency=0.01) as srv:
        free = Account(Meter(None), prices)  # what the whole batch costs, without a budget
        backend = OpenAIBackend("loopback", base_url=srv.base_url, concurrency=4, meter=free)
        backend.complete(reqs)
        backend.close()
        backend = OpenAIBackend("loopback", base_url=srv.base_url, concurrency=4,
                                meter=Account(Meter(free.cost_usd * 0.75), prices))
        try:
            with pytest.raises(BudgetExceeded):
                backend.complete(reqs, on_answer=lambda i, r: answered.append(i))
        finally:
            backend.close()
    first = [i for i, r in enumerate(reqs) if r.item == "first"]
    assert set(first) <= set(answered), sorted(set(first) - set(answered))
    assert 0 < len(set(answered) - set(first)) < n
