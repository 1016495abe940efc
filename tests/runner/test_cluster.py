"""A real multi-node Ray cluster on this machine (ray.cluster_utils.Cluster: each node its own raylet
and object store with its own CPUs): a head that runs the driver and no work, and a worker node that
runs every step. Checkpoints and the LLM cache are on storage both see; the worker node is killed
(SIGKILL, raylet and workers) in the middle of the oracle step, a fresh node joins, the run finishes
there, and the dataset equals a local run's."""

import json
import os
import subprocess
import time

import psutil
import pytest

from tests.conftest import CLI, FIXTURES
from tests.loopback_server import LoopbackServer
from tests.runner.test_runner import row_hashes

pytestmark = pytest.mark.slow

ITEMS = 6
GSM8K = FIXTURES / "gsm8k_test_200.jsonl"


def step_actors_on(node) -> list[str]:
    """Command lines of the Ray Data step actors living on one node (children of its raylet)."""
    out = []
    for info in node.all_processes.get("raylet", []):
        try:
            for child in psutil.Process(info.process.pid).children(recursive=True):
                cmd = " ".join(child.cmdline())
                if "MapWorker" in cmd or "_StepActor" in cmd:
                    out.append(cmd)
        except psutil.NoSuchProcess:
            pass
    return out


def checkpoints(root, step: str) -> int:
    d = root / step
    return sum(1 for _ in d.rglob("*.rec")) if d.is_dir() else 0


def make_recipe(tmp, base_url):
    """Piper for both voices (espeak's renders differ from run to run), and an oracle server slow enough (two requests at a time, 0.1 s each:
    a few seconds per dialogue) that the kill lands while dialogues are being simulated."""
    import yaml

    raw = {"name": "cluster", "seed": 4, "batch_size": 1,
           "sources": [{"kind": "gsm8k", "path": str(GSM8K), "limit": ITEMS}],
           "speak": {"assistant": {"engine": "piper", "voice": "joe"},
                     "user": {"engine": "piper", "voice": "joe", "length_scale": 1.15}, "workers": 1},
           "oracle": {"interval": 0.5, "backend": {"kind": "openai", "model": "loopback", "base_url": base_url,
                                                   "concurrency": 2}},
           "publish": {"rows_per_shard": 2}}
    path = tmp / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_worker_node_killed_mid_run_and_the_output_equals_a_local_run(tmp_path):
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    with LoopbackServer(latency=0.1) as server:
        recipe = make_recipe(tmp_path, server.base_url)
        ref = tmp_path / "local"
        r = subprocess.run(CLI + ["run", str(recipe), "--out", str(ref), "-q"],
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        expected = row_hashes(ref)
        assert len(expected) == ITEMS

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        proc = None
        try:
            worker = cluster.add_node(num_cpus=2)
            cluster.wait_for_nodes()
            shared = tmp_path / "shared"  # one filesystem for every node, as NFS would be
            ckpt = shared / "ckpt"
            out = tmp_path / "ray"
            env = {**os.environ, "KAME_DATA_CACHE_DIR": str(tmp_path / "unused-local-cache")}
            cmd = CLI + ["run", str(recipe), "--out", str(out), "-q", "--executor", "ray",
                         "--ray-address", cluster.address, "--checkpoints", f"file://{ckpt}",
                         "--llm-cache", str(shared / "llm-cache")]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            deadline = time.monotonic() + 900  # a loaded 2-core CI box needs minutes to start Ray's workers
            on_worker: list[str] = []
            while time.monotonic() < deadline and proc.poll() is None:
                on_worker = step_actors_on(worker) or on_worker
                if checkpoints(ckpt, "oracle") >= 1:
                    break
                time.sleep(0.1)
            oracle_done = checkpoints(ckpt, "oracle")
            assert proc.poll() is None, "the run ended before the worker node could be killed"
            # The head has no CPUs: the actors of the steps still running live on the worker node.
            assert step_actors_on(worker), on_worker
            assert 1 <= oracle_done < ITEMS, f"not mid-run: {oracle_done} oracle checkpoints after the wait"
            cluster.remove_node(worker, allow_graceful=False)  # SIGKILL its raylet and workers
            assert proc.poll() is None
            cluster.add_node(num_cpus=2)  # a replacement joins; Ray restarts the actors there
            stdout, stderr = proc.communicate(timeout=900)
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
            cluster.shutdown()
        assert proc.returncode == 0, stderr[-4000:]
        assert row_hashes(out) == expected
        m = json.loads((out / "manifest.json").read_text())
        assert m["executor"] == "ray" and m["counts"]["samples"] == ITEMS
        local = json.loads((ref / "manifest.json").read_text())
        for key in ("counts", "rejects", "levels", "per_source", "oracle_events"):
            assert m[key] == local[key], key
        # What the dead node finished was read back, not redone: each finished oracle item once.
        assert ITEMS - 1 <= m["computed"]["oracle"] <= ITEMS, m["computed"]
        assert checkpoints(ckpt, "oracle") == ITEMS and not (out / ".checkpoints").exists()
        assert list((shared / "llm-cache" / "answers").rglob("*.json"))
        assert not (tmp_path / "unused-local-cache" / "llm-cache.sqlite").exists()
