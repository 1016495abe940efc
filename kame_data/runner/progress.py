"""progress.json: how far a run got, per stage (read by `kame-data status`), saved as it goes."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

from kame_data.atomic import write_json
from kame_data.runner.executor import StepCounts


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

    def save(self, **changes) -> None:
        with self._lock:
            self.state.update(changes, updated=time.time())
            write_json(self.path, self.state)
