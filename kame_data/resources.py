"""Access to the files shipped inside the package (schemas, bundled recipes).

They are read through importlib.resources so that a wheel install behaves like a checkout.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path


@lru_cache(maxsize=None)
def schema(name: str) -> dict:
    """The JSON Schema `schemas/<name>.schema.json`."""
    text = resources.files("kame_data.schemas").joinpath(f"{name}.schema.json").read_text("utf-8")
    return json.loads(text)


def bundled_recipe(name: str) -> Path | None:
    """Path of a recipe shipped with the package (`quickstart` or `quickstart.yaml`), if any."""
    fname = name if name.endswith((".yaml", ".yml")) else f"{name}.yaml"
    entry = resources.files("kame_data.recipes").joinpath(fname)
    if entry.is_file():
        # Regular (non-zip) installs: the traversable is a real path.
        return Path(str(entry))
    return None
