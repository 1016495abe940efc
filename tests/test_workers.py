"""Worker processes end with their parent: a SIGKILLed `kame-data run` leaves no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import CLI

pytestmark = pytest.mark.slow


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(d.name))
    return tree


def descendants(pid: int) -> set[int]:
    tree, out, todo = _children(), set(), [pid]
    while todo:
        for c in tree.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_sigkill_mid_speak_leaves_no_process(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(CLI + ["run", "quickstart", "--out", str(out), "--limit", "8", "-q", "--no-cache"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    seen: set[int] = set()
    deadline = time.time() + 300
    try:
        while time.time() < deadline:  # wait for both speak workers to be rendering
            seen |= descendants(proc.pid)
            workers = [p for p in seen if alive(p) and "spawn_main" in _cmdline(p)]
            if len(workers) >= 2:  # the speak pool is up; its first batch renders for several seconds
                break
            assert proc.poll() is None, "the run ended before speak was under way"
            time.sleep(0.2)
        else:
            pytest.fail("speak workers never started")
        time.sleep(3.0)  # voices loaded, turns rendering
        seen |= descendants(proc.pid)
        assert not (out / ".checkpoints" / "speak").exists(), "speak finished its first batch: not mid-speak"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        t = time.time()
        while time.time() - t < 5 and any(alive(p) for p in seen):
            time.sleep(0.1)
        left = sorted(p for p in seen if alive(p))
        assert not left, f"still running 5 s after the kill: {left}"
    finally:
        for p in seen | {proc.pid}:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def _maps_llama(pid: int) -> bool:
    try:
        return "libllama" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def test_native_crash_of_the_simulator_is_named_and_work_is_kept(tmp_path):
    """SIGSEGV in the llama.cpp worker mid-oracle: the run stops with one line naming the engine,
    the items and the doctor, the stack is in run.log, and the finished speech stays checkpointed."""
    out = tmp_path / "out"
    proc = subprocess.Popen(CLI + ["run", "quickstart", "--out", str(out), "--limit", "2", "-q", "--no-cache"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    deadline, llama = time.time() + 600, None
    while llama is None and time.time() < deadline and proc.poll() is None:
        llama = next((p for p in descendants(proc.pid) if alive(p) and _maps_llama(p)), None)
        time.sleep(0.2)
    assert llama is not None, "the simulator worker never started"
    time.sleep(1.0)
    os.kill(llama, signal.SIGSEGV)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stdout + stderr
    assert "llama.cpp (embedded simulator) crashed (SIGSEGV" in stderr  # while loading, or on named items
    assert "kame-data doctor" in stderr and "Traceback" not in stderr
    assert "Fatal Python error: Segmentation fault" in (out / "run.log").read_text()
    assert list((out / ".checkpoints" / "speak").rglob("*.rec")), "finished speech was not kept"
