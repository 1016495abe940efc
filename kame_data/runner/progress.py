"""progress.json: how far a run got, per stage (read by `kame-data status`), saved as it goes,
with the LLM service's retries and waits as they happen (a run never waits silently)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

from kame_data.atomic import write_json
from kame_data.llm import activity
from kame_data.runner.executor import StepCounts

_LLM_SAVE_EVERY = 0.5  # seconds: retries in a burst are saved together, a new longer wait at once


class Progress:
    def __init__(self, out_dir: Path, config, items: int, stage_names: list[str], executor: str):
        self.path = out_dir / "progress.json"
        self._lock = threading.Lock()
        self.state = {"recipe": config.name, "config_hash": config.config_hash, "executor": executor,
                      "items": items, "state": "running", "started": time.time(),
                      "pid": os.getpid(), "host": socket.gethostname(),  # `status` tells a live run from a dead one
                      "stages": {n: {"inputs": 0, "outputs": 0, "computed": 0, "retried": 0, "transient": 0}
                                 for n in stage_names},
                      "samples": 0, "rejects": 0, "transient": 0}
        self._llm_saved = 0.0
        activity.watch(self.llm_retry)

    def add(self, stage: str, counts: StepCounts) -> None:
        """A batch finished `stage` (called from executor threads)."""
        with self._lock:
            st = self.state["stages"][stage]
            st["inputs"] += counts.inputs
            st["outputs"] += counts.outputs
            st["computed"] += counts.computed
            st["retried"] += counts.retried
            st["transient"] += counts.transient
        self.save()

    def llm_retry(self, retry: activity.Retry) -> None:
        """An LLM request failed and waits before its next attempt (from the backend's thread):
        `llm` counts retries, the seconds waited (summed over requests), Retry-After values capped,
        the last error, and until when the longest current wait lasts (epoch seconds)."""
        now = time.time()
        with self._lock:
            llm = self.state.setdefault("llm", {"retries": 0, "retry_wait_s": 0.0, "retry_after_capped": 0,
                                                "last_error": "", "waiting_until": 0.0})
            llm["retries"] += 1
            llm["retry_wait_s"] = round(llm["retry_wait_s"] + retry.wait_s, 3)
            llm["retry_after_capped"] += retry.capped
            llm["last_error"] = retry.error
            longer = now + retry.wait_s > llm["waiting_until"] + 1.0
            llm["waiting_until"] = round(max(llm["waiting_until"], now + retry.wait_s), 3)
            due = longer or now - self._llm_saved >= _LLM_SAVE_EVERY
            if due:
                self._llm_saved = now
        if due:
            self.save()

    def save(self, **changes) -> None:
        with self._lock:
            self.state.update(changes, updated=time.time())
            write_json(self.path, self.state)


def describe_llm(llm: dict, running: bool = True, now: float | None = None) -> str:
    """progress.json's `llm` counters as one line for `kame-data status` (with the wait still
    ahead while the run is running)."""
    now = time.time() if now is None else now
    parts = [f"{llm.get('retries', 0)} retries (last error: {llm.get('last_error') or '-'})",
             f"{llm.get('retry_wait_s', 0):.0f} s waited in all"]
    if llm.get("retry_after_capped"):
        parts.append(f"{llm['retry_after_capped']} Retry-After capped at max_retry_after")
    left = llm.get("waiting_until", 0) - now
    if running and left > 0:
        parts.append(f"waiting {left:.0f} s more")
    return ", ".join(parts)
