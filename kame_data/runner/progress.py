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
WAITING_SHOWN = 20  # items waiting on the LLM service that progress.json names (the latest)


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
        self._paused = False  # a backend-wide pause is on
        self._waiting: dict[str, dict] = {}  # item -> its last failure and when its next attempt is due
        activity.watch(self.llm_event)

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

    def llm_event(self, event: activity.Event) -> None:
        """What an LLM backend reports (from its thread). `llm` counts retries, the seconds waited
        (summed over requests), Retry-After values capped, the last error, until when the longest
        current wait lasts (epoch seconds), the items waiting and why (`waiting`: at most
        WAITING_SHOWN of them, `waiting_items` counts all), and a backend-wide pause."""
        now = time.time()
        with self._lock:
            llm = self.state.setdefault("llm", {"retries": 0, "retry_wait_s": 0.0, "retry_after_capped": 0,
                                                "last_error": "", "waiting_until": 0.0})
            due = now - self._llm_saved >= _LLM_SAVE_EVERY
            if isinstance(event, activity.Retry):
                llm["retries"] += 1
                llm["retry_wait_s"] = round(llm["retry_wait_s"] + event.wait_s, 3)
                llm["retry_after_capped"] += event.capped
                llm["last_error"] = event.error
                due = due or now + event.wait_s > llm["waiting_until"] + 1.0
                llm["waiting_until"] = round(max(llm["waiting_until"], now + event.wait_s), 3)
                if event.item:
                    self._waiting[event.item] = {"error": event.error, "detail": event.detail,
                                                 "until": round(now + event.wait_s, 3)}
            elif isinstance(event, activity.ItemSettled):
                due = due or event.item in self._waiting
                self._waiting.pop(event.item, None)
            elif isinstance(event, activity.Paused):
                due = True
                if event.until:
                    llm["pauses"] = llm.get("pauses", 0) + (not self._paused)
                    llm["paused_until"], llm["pause_reason"] = round(event.until, 3), event.reason
                else:
                    llm["paused_until"] = 0.0
                self._paused = bool(event.until)
            llm["waiting_items"] = len(self._waiting)
            llm["waiting"] = dict(list(self._waiting.items())[-WAITING_SHOWN:])
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
    if llm.get("pauses"):
        parts.append(f"{llm['pauses']} backend-wide pause(s)")
    paused = llm.get("paused_until", 0) - now
    if running and paused > 0:
        parts.append(f"paused now, {llm.get('pause_reason') or 'rate limited'}: {paused:.0f} s more")
    return ", ".join(parts)


def describe_waiting(llm: dict, running: bool = True, now: float | None = None) -> list[str]:
    """One line per item waiting on the LLM service (progress.json's `llm.waiting`), for `status`."""
    if not running or not llm.get("waiting"):
        return []
    now = time.time() if now is None else now
    lines = [f"{llm.get('waiting_items', len(llm['waiting']))} item(s) waiting on the LLM service:"]
    for item, w in llm["waiting"].items():
        due = w.get("until", 0) - now
        when = f"next attempt in {due:.0f} s" if due > 0 else "retrying now"
        said = f" ({w['detail']})" if w.get("detail") else ""
        lines.append(f"{item}: {w.get('error', '?')}{said}, {when}")
    return lines
