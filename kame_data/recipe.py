"""Recipes: YAML files naming the sources and each stage's config, validated on load."""

from __future__ import annotations

import hashlib
import json
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kame_data.resources import bundled_recipe
from kame_data.schema import SchemaError, validate


class RecipeError(ValueError):
    """The recipe cannot be used; the message names the file and the bad key."""


@dataclass(frozen=True)
class SourceSpec:
    kind: str
    path: str | None = None
    hub: str | None = None
    config: str | None = None
    split: str | None = None
    limit: int | None = None
    license: str | None = None
    # Selection and mix (see kame_data/sources/sampling.py): a stratified sample of `quota` items,
    # optionally capped or fixed `per_category`, scripted into `variants` dialogues each or
    # `dialogues` in all.
    quota: int | None = None
    per_category: int | dict[str, int] | None = None
    categories: list[str] | None = None
    variants: int | None = None
    dialogues: int | None = None
    # `kind: jsonl` only: the source's name in the output and its field mapping.
    name: str | None = None
    fields: dict[str, str] | None = None
    # Malformed lines (not UTF-8, not JSON, not an object) are rejects, up to a count (an integer)
    # or a fraction of the lines read (below 1): beyond it the file is not what the recipe says.
    max_bad_rows: float = 0.05


@dataclass(frozen=True)
class Recipe:
    name: str
    path: Path
    raw: dict[str, Any]
    seed: int = 0
    description: str = ""
    sources: list[SourceSpec] = field(default_factory=list)
    script: dict[str, Any] = field(default_factory=dict)
    speak: dict[str, Any] = field(default_factory=dict)
    oracle: dict[str, Any] = field(default_factory=dict)
    publish: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 4
    # Items a step may fail on unexpectedly (internal_error rejects) before the run stops: a count,
    # or a fraction of the items below 1; None: 1% of the items or 20, whichever is larger.
    max_item_errors: float | None = None

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def resolve(self, relative: str) -> Path:
        """A path in the recipe, taken relative to the recipe's folder."""
        p = Path(relative).expanduser()
        return p if p.is_absolute() else (self.base_dir / p)

    @property
    def config_hash(self) -> str:
        return config_hash(self.raw)


def config_hash(obj: Any) -> str:
    """Stable hash of a JSON-able config (key order does not matter)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def find_recipe(ref: str | Path, error: type[Exception] = RecipeError, example: str = "quickstart") -> Path:
    """A recipe path, or the name of a recipe shipped with the package (`quickstart`, `train_tiny`)."""
    p = Path(ref)
    if p.is_file():
        return p
    bundled = bundled_recipe(str(ref)) if not p.parent.name or p.parent == Path(".") or p.parent.name == "recipes" else None
    if bundled is None and p.parent.name == "recipes":
        bundled = bundled_recipe(p.name)
    if bundled is not None:
        return bundled
    raise error(f"recipe not found: {ref} (give a YAML path, or a bundled name such as {example!r})")


def read_yaml_mapping(path: Path, error: type[Exception] = RecipeError) -> dict:
    """A YAML file whose top level is a mapping; `error` names the file and what is wrong."""
    try:
        raw = yaml.safe_load(path.read_text("utf-8"))
    except yaml.YAMLError as e:
        raise error(f"{path}: not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise error(f"{path}: a recipe is a YAML mapping, got {type(raw).__name__}")
    return raw


def load_recipe(ref: str | Path) -> Recipe:
    path = find_recipe(ref)
    raw = read_yaml_mapping(path)
    try:
        validate("recipe", raw, what=f"recipe {path.name}")
    except SchemaError as e:
        raise RecipeError(str(e)) from e
    return Recipe(
        name=raw["name"],
        path=path.resolve(),
        raw=raw,
        seed=raw.get("seed", 0),
        description=raw.get("description", ""),
        sources=[SourceSpec(**s) for s in raw["sources"]],
        script=raw.get("script", {}),
        speak=raw.get("speak", {}),
        oracle=raw.get("oracle", {}),
        publish=raw.get("publish", {}),
        batch_size=raw.get("batch_size", 4),
        max_item_errors=raw.get("max_item_errors"),
    )


T = TypeVar("T")


def build_config(cls: type[T], section: dict[str, Any] | None, where: str | None = None,
                 error: type[Exception] = RecipeError, sequence: type = tuple) -> T:
    """Instantiate a config dataclass from a recipe section (run or train recipe alike).

    Nested dataclass fields are built from nested mappings; lists become `sequence` (tuples keep
    frozen run configs hashable; the trainer's mutable configs keep lists). An unknown key raises
    `error` naming where it is (`where`, default the class name)."""
    where = where or cls.__name__
    if section is not None and not isinstance(section, dict):
        raise error(f"{where}: expected a mapping, got {type(section).__name__}")
    section = dict(section or {})
    known = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(section) - set(known))
    if unknown:
        raise error(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(known)})")
    kwargs = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in section:
            continue
        value = section.pop(f.name)
        proto = f.default_factory() if f.default_factory is not MISSING else f.default
        if is_dataclass(proto) and (isinstance(value, dict) or value is None):
            value = build_config(type(proto), value, f"{where}.{f.name}", error, sequence)
        elif isinstance(value, list):
            value = sequence(value)
        kwargs[f.name] = value
    return cls(**kwargs)
