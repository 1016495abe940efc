"""Recipes: YAML files naming the sources and each stage's config, validated on load."""

from __future__ import annotations

import hashlib
import json
import re
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


# Names become folders (`out/<name>`, `out/train/<name>`): one plain path component, never `..`.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# What a YAML file's aliases may add to it when expanded. A recipe holds a few hundred nodes in all;
# nested aliases ("billion laughs") make 614 bytes into 10**9 nodes once anything walks them.
MAX_ALIAS_NODES = 100_000


class YamlBombError(yaml.YAMLError):
    """A YAML document whose aliases expand past MAX_ALIAS_NODES, or contain themselves."""


def _expanded_size(root: yaml.Node) -> tuple[int, int]:
    """(nodes once every alias is expanded, distinct nodes), counted without expanding anything."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise YamlBombError("an alias refers to a node that contains it")
        open_.add(key)
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        sizes[key] = 1 + sum(size(c) for c in children)
        open_.discard(key)
        return sizes[key]

    return size(root), len(sizes)


class _BoundedLoader(yaml.SafeLoader):
    """yaml.SafeLoader that measures a document's expanded size before building it."""

    def construct_document(self, node: yaml.Node) -> Any:
        expanded, distinct = _expanded_size(node)
        if expanded > distinct + MAX_ALIAS_NODES:
            raise YamlBombError(f"its aliases expand it to {expanded:,} nodes (at most {MAX_ALIAS_NODES:,} more "
                                f"than the {distinct:,} written): a YAML alias bomb? Write the values out")
        return super().construct_document(node)


def safe_yaml(text: str) -> Any:
    """yaml.safe_load with alias expansion bounded: every YAML file kame-data reads goes through here."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise YamlBombError("nested too deeply") from None
    finally:
        loader.dispose()


def read_yaml_mapping(path: Path, error: type[Exception] = RecipeError, what: str = "a recipe") -> dict:
    """A YAML file whose top level is a mapping; `error` names the file and what is wrong."""
    try:
        raw = safe_yaml(path.read_text("utf-8"))
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
                    "save it as UTF-8") from None
    except OSError as e:
        raise error(f"{path}: cannot be read: {e.strerror or e}") from None
    except YamlBombError as e:
        raise error(f"{path}: refused: {e}") from None
    except yaml.YAMLError as e:
        raise error(f"{path}: not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise error(f"{path}: {what} is a YAML mapping, got {type(raw).__name__}")
    return raw


def check_name(name: Any, where: str, error: type[Exception] = RecipeError) -> None:
    """A recipe's `name` names its default output folder, so it must be one plain folder name."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise error(f"{where}: name {name!r} must be a plain folder name (letters, digits, '.', '_' and '-', "
                    "starting with a letter or digit, at most 100 characters): it names the output folder out/<name>")


def load_recipe(ref: str | Path) -> Recipe:
    path = find_recipe(ref)
    raw = read_yaml_mapping(path)
    if isinstance(raw.get("name"), str):
        check_name(raw["name"], f"recipe {path}")
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
