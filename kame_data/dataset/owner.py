"""One owner of an output folder: a lock held by the process writing it, and the recipe it belongs to.

The lock is `flock` on OUT/.lock, which the kernel drops when its process ends, however it ends:
a SIGKILLed run never leaves a stale lock, so the next run needs no clean-up. The holder writes
its PID, host and start time inside, for the refusal message and for `kame-data status`.

The folder's identity is the recipe's `name` (docs/concepts/pipeline.md, "Resuming": "Change one stage's config and only that
stage and the later ones are recomputed", so a changed config of the same recipe is the same
owner), recorded in OUT/.identity.json. Another recipe into the folder would leave a mix of two
datasets, so it is refused unless `--force`, which first deletes the other recipe's dataset.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from kame_data.atomic import write_json
from kame_data.dataset.layout import MANIFEST, DatasetError

LOCK = ".lock"
IDENTITY = ".identity.json"
PROGRESS = "progress.json"
UNKNOWN: dict[str, Any] = {"unknown": True}  # lock_holder's answer when it cannot tell
ACQUIRE_S = 0.2  # rides out `kame-data status` probing the lock at the same moment
# What --force deletes of another recipe's dataset (the checkpoints stay: they are keyed by each
# stage's config, so they never leak into another recipe's rows, and they may be worth reusing).
# Top-level *.jsonl files go too: rejects, review exclusions and what `--until` wrote.
REPLACED = ("data", "assets", ".staging", MANIFEST, "README.md", PROGRESS)


class FolderBusy(DatasetError):
    """Another live process holds the folder's lock."""


class FolderClaimed(DatasetError):
    """The folder holds another recipe's output."""


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def describe_holder(info: dict[str, Any]) -> str:
    """`kame-data run (pid 4242 on node1, since 2025-01-02 10:00:00)`, from what a holder wrote."""
    if not info.get("pid"):
        return "another process (just starting)"
    started = f", since {_when(info['started'])}" if isinstance(info.get("started"), (int, float)) else ""
    return f"`kame-data {info.get('command', '?')}` (pid {info['pid']} on {info.get('host', '?')}{started})"


def _read_info(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0)
        info = json.loads(data.decode("utf-8")) if data.strip() else {}
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _busy(out: Path, holder: dict[str, Any]) -> FolderBusy:
    return FolderBusy(f"{out} is in use by {describe_holder(holder)}: wait for it to end (or stop it), or write to "
                      "another --out; two writers into one folder would pay for the same work twice and mix their "
                      "files")


class FolderLock:
    """The exclusive lock on OUT, held from `acquire` to `release` (or the end of the process)."""

    def __init__(self, fd: int | None, path: Path):
        self.fd, self.path = fd, path

    @classmethod
    def acquire(cls, out: str | Path, command: str) -> "FolderLock":
        """Take OUT's lock at once, or raise FolderBusy naming its holder. A filesystem without
        flock (some network mounts) gets no lock, as before this guard existed."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes (PEP 446)
        deadline = time.monotonic() + ACQUIRE_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                info = _read_info(fd)
                os.close(fd)
                raise _busy(out, info) from None
            except OSError as e:
                if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    os.close(fd)
                    raise
                os.close(fd)
                return cls(None, path)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "command": command}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)
        return cls(fd, path)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the only descriptor drops the flock
            self.fd = None

    def __enter__(self) -> "FolderLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lock_holder(out: str | Path) -> dict[str, Any] | None:
    """What the live holder of OUT's lock wrote (pid, host, started, command; {"pid": None} while
    it starts), None when no process holds it, or UNKNOWN when it cannot be told (no lock file, a
    filesystem without flock). Probes with a shared lock for an instant (writers wait ACQUIRE_S)."""
    try:
        fd = os.open(Path(out) / LOCK, os.O_RDONLY)
    except OSError:
        return UNKNOWN
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_info(fd) or {"pid": None}
    except OSError:
        return UNKNOWN
    finally:
        os.close(fd)
    return None


def refuse_if_busy(out: str | Path) -> None:
    """Raise FolderBusy now if a live process holds OUT's lock: the CLI asks this before it loads
    the heavy modules; `FolderLock.acquire` remains the one that decides."""
    holder = lock_holder(out)
    if holder is not None and holder is not UNKNOWN:
        raise _busy(Path(out), holder)


def _json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def recorded_recipe(out: str | Path) -> str | None:
    """The recipe OUT belongs to: .identity.json, else (folders from before it existed) the
    manifest's or progress.json's recipe; None for a new folder."""
    out = Path(out)
    for name, key in ((IDENTITY, "recipe"), (MANIFEST, "recipe_name"), (PROGRESS, "recipe")):
        value = _json(out / name).get(key)
        if isinstance(value, str) and value:
            return value
    return None


def identity_mismatch(out: str | Path, manifest: dict[str, Any]) -> str | None:
    """Why OUT's records disagree about which recipe its dataset is (None when they agree)."""
    out = Path(out)
    name = manifest.get("recipe_name")
    for file, key in ((IDENTITY, "recipe"), (PROGRESS, "recipe")):
        other = _json(out / file).get(key)
        if isinstance(other, str) and name and other != name:
            return (f"{file} says the folder belongs to recipe {other!r}, manifest.json to recipe {name!r}: two "
                    f"recipes ran into {out}; rerun one of them into a new folder (or with --force)")
    return None


def claim_folder(out: str | Path, recipe: str, force: bool = False) -> None:
    """Record `recipe` as OUT's owner (hold OUT's lock first). Raise FolderClaimed when OUT holds
    another recipe's output, unless `force`: then that output is deleted first."""
    out = Path(out)
    owner = recorded_recipe(out)
    if owner not in (None, recipe):
        if not force:
            raise FolderClaimed(f"{out} holds the output of recipe {owner!r}, not {recipe!r}: write to another "
                                f"--out, or add --force to replace it (--force deletes the dataset of {owner!r} there: "
                                "data/, manifest.json, the card, rejects and review exclusions; checkpoints stay)")
        for target in [out / name for name in REPLACED] + sorted(out.glob("*.jsonl")):
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
    if _json(out / IDENTITY).get("recipe") != recipe:
        write_json(out / IDENTITY, {"recipe": recipe})
