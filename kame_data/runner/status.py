"""`kame-data status`: progress.json of a run, with the checkpoints found on disk, and whether a
run that says `running` still is: progress.json cannot say so itself after a kill or a crash, but
the folder's lock can (the kernel drops it with the process that held it)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from kame_data.dataset.owner import UNKNOWN, describe_holder, lock_holder
from kame_data.runner.checkpoint import CheckpointStore

DEAD = "crashed or killed"


def _alive(pid: Any, host: Any) -> bool | None:
    """Whether process `pid` lives (None when it cannot be told: another host, no pid recorded)."""
    if not isinstance(pid, int) or host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _liveness(out: Path, st: dict[str, Any]) -> None:
    """A `running` state whose run no longer holds OUT's lock (or, where there is no lock to ask,
    whose process is gone) becomes DEAD, with what holds the folder now if anything does."""
    holder, pid = lock_holder(out), st.get("pid")
    if holder is UNKNOWN:
        alive = _alive(pid, st.get("host")) is not False
    else:
        alive = holder is not None and (pid is None or holder.get("pid") in (pid, None))
    if alive:
        return
    st["state"] = DEAD
    if holder not in (None, UNKNOWN):
        st["held_by"] = describe_holder(holder)


def read_status(out_dir: str | Path) -> dict[str, Any]:
    out = Path(out_dir)
    path = out / "progress.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: no run has started in {out}")
    st = json.loads(path.read_text("utf-8"))
    if st.get("state") == "running":
        _liveness(out, st)
    store = CheckpointStore(out / ".checkpoints")
    for name, s in st["stages"].items():
        s["checkpoints"] = store.count(name)
    return st
