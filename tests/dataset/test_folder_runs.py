"""One owner of the output folder, with real runs: two runs into one
folder, a SIGKILLed run seen by `status`, reviewer exclusions across a rerun, another recipe into
a dataset's folder.

The runs are the quickstart with its oracle on the loopback OpenAI server, speech read from the
checkpoints of the session's quickstart run, so each costs a few seconds of oracle calls."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from kame_data.dataset.owner import lock_holder
from kame_data.dataset.validate import validate_dataset
from kame_data.recipe import load_recipe
from tests.conftest import CLI
from tests.loopback_server import LoopbackServer

pytestmark = pytest.mark.slow


def loopback_recipe(tmp: Path, base_url: str, name: str = "quickstart") -> Path:
    """The quickstart (same name, so the same recipe) with its oracle on the loopback server."""
    qs = load_recipe("quickstart")
    raw = json.loads(json.dumps(qs.raw))
    for s in raw["sources"]:
        s["path"] = str(qs.resolve(s["path"]))
    raw["name"] = name
    raw["oracle"]["backend"] = {"kind": "openai", "model": "loopback", "base_url": base_url}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
def out(tmp_path, quickstart_out) -> Path:
    """A new output folder holding the session quickstart's checkpoints (speech already rendered)."""
    out = tmp_path / "out"
    out.mkdir()
    shutil.copytree(quickstart_out / ".checkpoints", out / ".checkpoints")
    return out


@pytest.fixture
def env(tmp_path) -> dict:
    return {**os.environ, "KAME_DATA_CACHE_DIR": str(tmp_path / "llm-cache")}  # every answer asked anew


def run_args(recipe: Path, out: Path) -> list[str]:
    return CLI + ["run", str(recipe), "--out", str(out), "--limit", "3", "-q"]


def status(out: Path) -> str:
    r = subprocess.run(CLI + ["status", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def wait_until_paying(srv: LoopbackServer, proc: subprocess.Popen, timeout: float = 600) -> None:
    """Until the run's first LLM request reaches the server (the run is under way and paying)."""
    deadline = time.monotonic() + timeout
    while srv.calls == 0:
        assert proc.poll() is None, "the run ended before it asked the LLM"
        assert time.monotonic() < deadline, "the run never reached the LLM"
        time.sleep(0.05)


def held_until(gate: threading.Event):
    """A server override that holds every request until `gate` is set, then answers it as usual."""
    def hold(body, seen, headers):
        gate.wait(120)
        return None

    return hold


def rows(out: Path) -> list[str]:
    m = json.loads((out / "manifest.json").read_text())
    return [i for s in m["shards"] for i in pq.read_table(out / s["path"], columns=["id"])["id"].to_pylist()]


def rejects(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]


def test_a_second_run_is_refused_at_once_and_nothing_is_paid_twice(tmp_path, out, env):
    """The first run holds its LLM requests at the server while the second starts: the second is
    refused in under 2 s naming the first's PID, before it asks anything; every request the
    server saw, it saw once; the first run's dataset is whole."""
    gate = threading.Event()
    with LoopbackServer(override=held_until(gate)) as srv:
        recipe = loopback_recipe(tmp_path, srv.base_url)
        first = subprocess.Popen(run_args(recipe, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env)
        try:
            wait_until_paying(srv, first)
            t = time.perf_counter()
            second = subprocess.run(run_args(recipe, out), capture_output=True, text=True, timeout=60, env=env)
            took = time.perf_counter() - t
            during = status(out)
        finally:
            gate.set()
        _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-2000:]
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 1 and len(lines) == 1, second.stderr
    assert f"is in use by `kame-data run` (pid {first.pid} on " in lines[0] and ", since 20" in lines[0], lines[0]
    assert took < 2.0, took
    print(f"second run refused in {took:.2f} s: {lines[0]}")
    assert srv.seen and max(srv.seen.values()) == 1, "a request reached the server twice"
    assert "[running]" in during, during
    validate_dataset(out)
    m = json.loads((out / "manifest.json").read_text())
    assert m["computed"]["speak"] == 0 and m["computed"]["oracle"] == 3  # speech from the copied checkpoints
    assert "[done]" in status(out)


def test_status_tells_a_killed_run_from_a_running_one(tmp_path, out, env):
    gate = threading.Event()
    with LoopbackServer(override=held_until(gate)) as srv:
        recipe = loopback_recipe(tmp_path, srv.base_url)
        run = subprocess.Popen(run_args(recipe, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            wait_until_paying(srv, run)
            running = status(out)
            run.send_signal(signal.SIGKILL)
            assert run.wait() == -signal.SIGKILL
            killed = status(out)
        finally:
            gate.set()
        assert lock_holder(out) is None  # nothing stale: the same command runs again at once
        again = subprocess.run(run_args(recipe, out), capture_output=True, text=True, timeout=600, env=env)
    assert "[running]" in running, running
    assert "[crashed or killed]" in killed and f"the run (pid {run.pid}) ended without finishing" in killed, killed
    assert "rerun the same command to resume" in killed
    assert again.returncode == 0, again.stderr[-2000:]
    assert "[done]" in status(out)


def test_exclusions_outlive_the_documented_rerun(tmp_path, out, env):
    """`publish --exclude` in place, then the same `run` command: the excluded row stays out, its
    reject (with the reviewer's note) stays in rejects.jsonl and the manifest, and validate holds."""
    with LoopbackServer() as srv:
        args = run_args(loopback_recipe(tmp_path, srv.base_url), out)
        r = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        before = rows(out)
        flagged = before[1]
        flags = tmp_path / "flags.json"
        flags.write_text(json.dumps({"flagged": [{"id": flagged, "note": "the answer is read wrong"}]}))
        r = subprocess.run(CLI + ["publish", str(out), "--exclude", str(flags)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        published = json.loads((out / "manifest.json").read_text())
        calls = srv.calls
        r = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        assert srv.calls == calls  # everything came from the checkpoints
    assert rows(out) == [i for i in before if i != flagged]
    review = [x for x in rejects(out) if x["reason"] == "flagged_in_review"]
    assert [(x["id"], x["detail"]) for x in review] == [(flagged, "the answer is read wrong")]
    m = json.loads((out / "manifest.json").read_text())
    assert m["review"] == {"excluded": [flagged]} and m["rejects"] == published["rejects"]
    assert m["counts"]["flagged_in_review"] == 1 and m["counts"]["samples"] == len(before) - 1
    assert m["computed"] == {"script": 0, "speak": 0, "quality": 0, "acoustics": 0, "oracle": 0}
    validate_dataset(out)


def test_another_recipe_into_a_dataset_folder_is_refused_unless_forced(tmp_path, quickstart_out):
    out = tmp_path / "qs"
    shutil.copytree(quickstart_out, out)
    other = loopback_recipe(tmp_path, "http://127.0.0.1:9/v1", name="other")
    args = CLI + ["run", str(other), "--out", str(out), "--until", "script", "--limit", "3", "-q"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1
    assert r.stderr.strip() == (f"error: {out} holds the output of recipe 'quickstart', not 'other': write to another "
                                "--out, or add --force to replace it (--force deletes the dataset of 'quickstart' "
                                "there: data/, manifest.json, the card, rejects and review exclusions; checkpoints "
                                "stay)")
    assert not (out / "scripts.jsonl").exists()
    validate_dataset(out)  # untouched
    # the same recipe stopping early is the same owner
    same = subprocess.run(CLI + ["run", "quickstart", "--out", str(out), "--until", "script", "--limit", "3", "-q"],
                          capture_output=True, text=True, timeout=600)
    assert same.returncode == 0, same.stderr[-2000:]
    forced = subprocess.run(args + ["--force"], capture_output=True, text=True, timeout=600)
    assert forced.returncode == 0, forced.stderr[-2000:]
    assert (out / "scripts.jsonl").is_file() and not (out / "manifest.json").exists() and not (out / "data").exists()
    assert json.loads((out / ".identity.json").read_text()) == {"recipe": "other"}
    r = subprocess.run(CLI + ["validate", str(out)], capture_output=True, text=True)
    assert r.returncode == 1 and "manifest.json is missing" in r.stderr
