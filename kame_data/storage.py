"""Files under a root that every node of a cluster can see: a local or shared-filesystem path, or
an object-store URL (s3://, gs://, hdfs://, abfs://, any fsspec protocol) through `pyarrow.fs`.

Checkpoints and the shared LLM cache keep one small file per key here. A local root keeps the
local behaviour exactly (temporary file, fsync, rename: `atomic.py`); an object store's put is
already whole-or-nothing, so objects are written in place.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union
from urllib.parse import urlparse

from kame_data.atomic import atomic_path

Location = Union[str, "os.PathLike[str]"]


class StorageError(RuntimeError):
    """A storage URL that no installed filesystem can open; the message names the scheme."""


def is_url(location: Location) -> bool:
    """True for `scheme://…` (a Windows drive letter is not a scheme)."""
    scheme = urlparse(str(location)).scheme
    return len(scheme) > 1


def _open_url(url: str):
    """(pyarrow filesystem, root path inside it) for a URL: pyarrow's own filesystems first
    (local, S3, GCS, HDFS, Azure), then any fsspec implementation through pyarrow's adapter."""
    import pyarrow as pa
    from pyarrow import fs as pafs

    try:
        return pafs.FileSystem.from_uri(url)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        pass
    try:
        import fsspec
        from fsspec.core import url_to_fs
    except ImportError as e:  # fsspec comes with `datasets`; named anyway
        raise StorageError(f"{url}: pyarrow cannot open this scheme and fsspec is not installed") from e
    try:
        ffs, path = url_to_fs(url)
    except (ImportError, ValueError) as e:
        known = ", ".join(sorted(fsspec.available_protocols())[:12])
        raise StorageError(f"{url}: no filesystem for this URL ({e}); fsspec knows: {known}, …") from e
    return pafs.PyFileSystem(pafs.FSSpecHandler(ffs)), path


class Storage:
    """Byte files under `root`, addressed by relative POSIX paths."""

    def __init__(self, root: Location):
        text = str(root)
        if is_url(text) and urlparse(text).scheme == "file":
            text = urlparse(text).path  # file:// is a local path: keep rename-based atomicity
        self.is_local = not is_url(text)
        if self.is_local:
            self.root = Path(text)
            self.location = str(self.root.resolve())
        else:
            self.fs, base = _open_url(text)
            self.base = base.rstrip("/")
            self.location = text.rstrip("/")

    def __repr__(self) -> str:
        return f"Storage({self.location!r})"

    def child(self, rel: str) -> "Storage":
        return Storage(f"{self.location}/{rel}")

    def _remote(self, rel: str) -> str:
        return f"{self.base}/{rel}" if self.base else rel

    def read(self, rel: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        if self.is_local:
            try:
                return (self.root / rel).read_bytes()
            except FileNotFoundError:
                return None
        try:
            with self.fs.open_input_stream(self._remote(rel)) as fh:
                return fh.read()
        except FileNotFoundError:
            return None
        except OSError as e:  # some stores say "not found" with a plain OSError
            if "not found" in str(e).lower() or "does not exist" in str(e).lower():
                return None
            raise

    def write(self, rel: str, data: bytes) -> None:
        """Whole or not at all: rename on a filesystem, one put on an object store."""
        if self.is_local:
            with atomic_path(self.root / rel) as tmp:
                tmp.write_bytes(data)
            return
        path = self._remote(rel)
        parent = path.rsplit("/", 1)[0] if "/" in path else ""
        if parent:
            self.fs.create_dir(parent, recursive=True)
        with self.fs.open_output_stream(path) as fh:
            fh.write(data)

    def delete(self, rel: str) -> None:
        if self.is_local:
            (self.root / rel).unlink(missing_ok=True)
            return
        try:
            self.fs.delete_file(self._remote(rel))
        except FileNotFoundError:
            pass

    def count(self, prefix: str, suffix: str) -> int:
        """Files under `prefix/` (recursively) whose names end with `suffix`."""
        if self.is_local:
            d = self.root / prefix
            return sum(1 for p in d.rglob(f"*{suffix}") if not p.name.startswith(".")) if d.is_dir() else 0
        from pyarrow import fs as pafs

        sel = pafs.FileSelector(self._remote(prefix), recursive=True, allow_not_found=True)
        return sum(1 for info in self.fs.get_file_info(sel)
                   if info.type == pafs.FileType.File and info.path.endswith(suffix))
