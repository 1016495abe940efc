"""The names of an output folder's files, and the error every dataset command raises.

Kept free of heavy imports (no pyarrow): `kame-data run` checks the folder's lock with these before
it loads anything else, so a second run into a busy folder is refused at once.
"""

from __future__ import annotations

MANIFEST = "manifest.json"
REJECTS = "rejects.jsonl"
EXCLUSIONS = "exclusions.jsonl"  # rows a reviewer left out (`publish --exclude`); a rerun keeps them out


class DatasetError(ValueError):
    """The folder is not a usable dataset, or does not have what was asked of it (a split, an id,
    a filter); the message says what to do. `field` names the part at fault, e.g. `manifest.json`."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.message, self.field = message, field
