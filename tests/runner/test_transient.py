"""Final results are checkpointed, transient ones are not: `apply_step` and the local executor on a
step whose service fails for chosen inputs, over a real checkpoint folder."""

import threading

import pytest

from kame_data.llm.accounting import BudgetExceeded
from kame_data.records import Reject
from kame_data.runner.checkpoint import CheckpointStore, Keyed
from kame_data.runner.executor import RunStats, apply_step, step_key
from kame_data.runner.local import LocalExecutor
from kame_data.step import Resources, Step


class Shout(Step[str, str]):
    """Upper-cases words; words in `down` meet a transient failure, words starting with x a final one."""

    name = "shout"

    def __init__(self, down=()):
        super().__init__({"mode": "shout"})
        self.down = set(down)
        self.seen: list[str] = []

    def run(self, batch):
        self.seen += batch
        out = []
        for w in batch:
            if w in self.down:
                out.append([Reject(self.name, w, "service_down", "503 after retries", transient=True)])
            elif w.startswith("x"):
                out.append([Reject(self.name, w, "unspeakable", "no vowels")])
            else:
                out.append([w.upper()])
        return out


def _keyed(words):
    return [Keyed(f"k-{w}", w) for w in words]


def test_transient_groups_are_retried_and_counted(tmp_path):
    store = CheckpointStore(tmp_path / "ck")
    words = ["alpha", "beta", "xyz", "gamma"]
    step = Shout(down={"beta", "gamma"})
    out, counts = apply_step(step, step_key(step), _keyed(words), store)
    assert [k.record if isinstance(k.record, str) else k.record.reason for k in out] == [
        "ALPHA", "service_down", "unspeakable", "service_down"]
    assert (counts.computed, counts.retried, counts.transient, counts.outputs) == (4, 0, 2, 1)
    assert store.count("shout") == 2  # alpha and the final reject of xyz; not the transient ones

    again = Shout(down={"gamma"})  # beta's service is back; gamma's is not yet
    out, counts = apply_step(again, step_key(again), _keyed(words), store)
    assert again.seen == ["beta", "gamma"]  # only the transient ones are computed again
    assert (counts.computed, counts.retried, counts.transient) == (2, 2, 1)
    assert [k.record for k in out if isinstance(k.record, str)] == ["ALPHA", "BETA"]

    last = Shout()
    out, counts = apply_step(last, step_key(last), _keyed(words), store)
    assert last.seen == ["gamma"] and (counts.computed, counts.retried, counts.transient) == (1, 1, 0)
    final = Shout()
    _, counts = apply_step(final, step_key(final), _keyed(words), store)
    assert final.seen == [] and (counts.computed, counts.retried) == (0, 0)  # every result is final now


def test_local_executor_reports_retried_and_transient(tmp_path):
    store = CheckpointStore(tmp_path / "ck")
    batches = [_keyed(["alpha", "beta"]), _keyed(["gamma", "delta"])]

    def run(step):
        stats = RunStats()
        out = [k.record for b in LocalExecutor().run([step], iter(batches), store, stats, lambda n, c: None) for k in b]
        return out, stats.counts["shout"]

    out, c = run(Shout(down={"beta", "delta"}))
    assert sum(isinstance(r, Reject) and r.transient for r in out) == 2 and (c.computed, c.transient) == (4, 2)
    out, c = run(Shout())
    assert out == ["ALPHA", "BETA", "GAMMA", "DELTA"] and (c.computed, c.retried, c.transient) == (2, 2, 0)


class Spend(Step[str, str]):
    """Two batches at once; the first one's LLM budget runs out after the second has finished."""

    name = "spend"
    resources = Resources(concurrent_batches=2)

    def __init__(self):
        super().__init__({"mode": "spend"})
        self.second_done = threading.Event()

    def run(self, batch):
        if batch == ["first"]:
            assert self.second_done.wait(10)
            raise BudgetExceeded("LLM budget of $1 reached")
        self.second_done.set()
        return [[w.upper()] for w in batch]


def test_a_budget_stop_still_passes_on_the_batches_already_finished(tmp_path):
    """The batch that met the budget ends the run, but a later one that was running at the same
    time and finished is passed on too (published), before the stop; a batch not yet started is not."""
    got = []
    batches = [_keyed(["first"]), _keyed(["second"]), _keyed(["third"])]
    with pytest.raises(BudgetExceeded):
        for batch in LocalExecutor().run([Spend()], iter(batches), CheckpointStore(tmp_path / "ck"), RunStats(),
                                         lambda n, c: None):
            got += [k.record for k in batch]
    assert got == ["SECOND"]
