"""One input a step raises on costs that input only: it becomes a transient `internal_error` reject
(traceback in run.log), its batch-mates are computed and checkpointed, a rerun retries it, and
past `max_item_errors` the run stops with one line naming the first failure."""

import json
from pathlib import Path

import pytest
import yaml

from kame_data.errors import RunAbort
from kame_data.recipe import load_recipe
from kame_data.records import Reject
from kame_data.runner.checkpoint import CheckpointStore, Keyed
from kame_data.runner.executor import apply_step, step_key
from kame_data.runner.item_errors import item_error_limit
from kame_data.script.stage import ScriptStage
from kame_data.script.config import ScriptConfig
from kame_data.step import RunContext, Step


class Fragile(Step[str, str]):
    """Upper-cases words; raises on words in `bad`, and a RunAbort on `stop`."""

    name = "fragile"

    def __init__(self, bad=(), stop=()):
        super().__init__({"mode": "fragile"})
        self.bad, self.stop = set(bad), set(stop)
        self.calls: list[list[str]] = []

    def run(self, batch):
        self.calls.append(list(batch))
        if self.stop & set(batch):
            raise RunAbort("the service refused the key")
        for w in batch:
            if w in self.bad:
                raise ValueError(f"invalid literal for int() with base 10: {w!r} sk-abcdefghijklmnopqrst")
        return [[w.upper()] for w in batch]


def keyed(words):
    return [Keyed(f"k-{w}", w) for w in words]


def test_the_input_at_fault_is_rejected_and_the_rest_kept(tmp_path, caplog):
    store = CheckpointStore(tmp_path / "ck")
    step = Fragile(bad={"beta"})
    with caplog.at_level("INFO", logger="kame_data"):
        out, counts = apply_step(step, step_key(step), keyed(["alpha", "beta", "gamma"]), store)
    records = [k.record for k in out]
    assert records[0] == "ALPHA" and records[2] == "GAMMA"
    reject = records[1]
    assert isinstance(reject, Reject) and reject.reason == "internal_error" and reject.transient
    assert reject.stage == "fragile" and reject.detail.startswith("ValueError: invalid literal")
    assert "sk-abcdefghijklmnopqrst" not in reject.detail  # scrubbed like every error text
    assert "Traceback" in caplog.text  # the traceback goes to the log (run.log), not the reject
    assert (counts.computed, counts.transient, counts.outputs) == (3, 1, 2)
    assert store.count("fragile") == 2  # the good ones are final; the failed one is not checkpointed

    fixed = Fragile()
    out, counts = apply_step(fixed, step_key(fixed), keyed(["alpha", "beta", "gamma"]), store)
    assert fixed.calls == [["beta"]] and (counts.computed, counts.retried) == (1, 1)
    assert [k.record for k in out] == ["ALPHA", "BETA", "GAMMA"]


def test_a_run_level_error_still_ends_the_batch():
    step = Fragile(stop={"beta"})
    with pytest.raises(RunAbort):
        apply_step(step, step_key(step), keyed(["alpha", "beta"]), None)


@pytest.mark.parametrize("setting, items, limit", [(None, 10, 20), (None, 5000, 50), (3, 100, 3), (0.1, 100, 10),
                                                   (0, 10, 0)])
def test_the_limit(setting, items, limit):
    assert item_error_limit(setting, items) == limit


class BuggyScript(ScriptStage):
    """The real script step, with a bug that bites chosen items."""

    def __init__(self, config, seed, bad):
        super().__init__(config, RunContext(seed=seed))
        self.bad = bad

    def run(self, batch):
        if any(item.id in self.bad for item in batch):
            raise IndexError("list index out of range")
        return super().run(batch)


def write_recipe(tmp: Path, **extra) -> Path:
    qs = load_recipe("quickstart")
    raw = {"name": "buggy", "seed": 1, "batch_size": 4,
           "sources": [{"kind": "gsm8k", "path": str(qs.resolve("data/quickstart_gsm8k.jsonl"))},
                       {"kind": "mmlu_pro", "path": str(qs.resolve("data/quickstart_mmlu_pro.jsonl"))}], **extra}
    path = tmp / "buggy.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_a_run_goes_on_past_a_bug_and_stops_when_it_is_systematic(tmp_path):
    from kame_data.runner import RunError, run_recipe
    from kame_data.runner.config import RunConfig
    from kame_data.sources import load_items

    recipe = load_recipe(write_recipe(tmp_path))
    cfg = RunConfig.resolve(recipe)
    items, _ = load_items(recipe, cfg.filters)
    bad = {items[1].id, items[4].id}
    result = run_recipe(recipe, tmp_path / "out", until="script",
                        stages=[BuggyScript(cfg.script, cfg.seed, bad)])
    rejects = [json.loads(line) for line in (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()]
    errors = [r for r in rejects if r["reason"] == "internal_error"]
    assert sorted(r["id"] for r in errors) == sorted(bad) and all(r["transient"] for r in errors)
    scripted = [json.loads(line)["item_id"] for line in (tmp_path / "out" / "scripts.jsonl").read_text().splitlines()]
    assert set(scripted) == {it.id for it in items} - bad and result.manifest["records"] == len(scripted)
    assert "IndexError" in (tmp_path / "out" / "run.log").read_text()

    strict = load_recipe(write_recipe(tmp_path, max_item_errors=1))
    with pytest.raises(RunError, match=r"2 items failed with unexpected errors, more than max_item_errors \(1\)"):
        run_recipe(strict, tmp_path / "strict", until="script", stages=[BuggyScript(cfg.script, cfg.seed, bad)])
