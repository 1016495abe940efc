"""Recipes: YAML files naming the sources and each stage's config, validated on load."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import MISSING, dataclass, fields, is_dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypedDict, TypeVar

import yaml

from kame_data.config_schema import Schema, SchemaBuilder, not_a_key
from kame_data.resources import bundled_recipe
from kame_data.schema import SchemaError, validate


class RecipeError(ValueError):
    """The recipe cannot be used; the message names the file and the bad key."""


# Names become folders (`out/<name>`, `out/train/<name>`): one plain path component, never `..`.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
Count = Annotated[int, Schema(minimum=1)]


class JsonlFields(TypedDict, total=False):
    """`kind: jsonl`: which field of a row holds each part of an item (dotted names reach into objects)."""

    question: str  # the question (required)
    answer: str  # the answer (required)
    category: str  # the item's category, for sampling and the card
    options: str  # a list of answer options (a multiple-choice item)
    explanation: str  # why the answer is right, read after it
    id: str  # the item's id (default: its row number)


@dataclass(frozen=True)
class SourceSpec:
    """One source of items: a benchmark's rows from a local file or the Hugging Face hub, how many
    of them to take and how many dialogues each makes (kame_data/sources/sampling.py)."""

    kind: str  # the row format: a benchmark's own, or jsonl with `fields` naming the parts
    path: str | None = None  # local JSONL, JSON or Parquet file, relative to the recipe
    hub: str | None = None  # Hugging Face dataset id, loaded with datasets.load_dataset
    config: str | None = None  # the hub dataset's config name
    split: str | None = None  # the hub dataset's split
    limit: Count | None = None  # read no more than this many accepted items, in file order
    license: str | None = None  # the licence recorded on every item (default: the kind's)
    quota: Count | None = None  # a stratified sample of this many items (by category, deterministic in the seed)
    # A number caps every category; a mapping fixes each listed category's count (others are left out).
    per_category: Count | Annotated[dict[str, Count], Schema(minProperties=1)] | None = None
    categories: Annotated[list[str], Schema(minItems=1)] | None = None  # only these categories (case-insensitive)
    variants: Count | None = None  # dialogues per item (not with `dialogues`)
    dialogues: Count | None = None  # dialogues for the whole source, spread over its items (kame_data/sources/allocate.py)
    # With `dialogues`: the most dialogues (variants) one item may give, when a variant the script refuses is
    # replaced by another or fewer items pass than the quota; what cannot be met then is the source's shortfall.
    max_variants: Annotated[int, Schema(minimum=1)] = 4
    # With `dialogues` and fewer items past the filters than `quota`: count, make `dialogues` all the same (up to
    # max_variants per item); ratio, scale them to the items found (the recipe's dialogues per item kept).
    fill: Literal["count", "ratio"] = "count"
    name: Annotated[str, Schema(pattern="^[a-z][a-z0-9_]*$")] | None = None  # kind jsonl: the source name of its items
    # kind jsonl: which field of a row holds each part of an item (question and answer at least).
    fields: Annotated[JsonlFields, Schema(required=["question", "answer"])] | None = None
    # Malformed lines (not UTF-8, not JSON, not an object, too deep) become rejects up to this many:
    # a count (an integer; 0: none), or a fraction of the lines read (below 1).
    max_bad_rows: Annotated[float, Schema(minimum=0)] = 0.05

    @property
    def source(self) -> str:
        """The `source` its items carry, which names them on the card and in the manifest: the kind,
        or a jsonl source's `name` (default "jsonl")."""
        return (self.name or self.kind) if self.kind == "jsonl" else self.kind

    schema_rules: ClassVar[dict[str, Any]] = {
        "oneOf": [{"required": ["path"]}, {"required": ["hub"]}],
        "allOf": [{"not": {"required": ["variants", "dialogues"]}},
                  {"if": {"properties": {"kind": {"const": "jsonl"}}}, "then": {"required": ["fields"]}}]}


@dataclass(frozen=True)
class Recipe:
    """What names a recipe, where it lies and where its items come from. Each step's section (and
    `filters`, `publish`) is parsed once, into its typed config, by RunConfig (runner/config.py)."""

    name: Annotated[str, Schema(pattern=NAME_PATTERN.pattern)]  # names the default output folder out/<name>: one plain folder name
    sources: Annotated[list[SourceSpec], Schema(minItems=1)]  # where the items come from, read in turn
    path: Path = not_a_key()
    raw: dict[str, Any] = not_a_key()  # the YAML as written: the manifest's identity of the recipe
    description: str = ""  # one line for the dataset card
    seed: int = 0  # every random choice of the run derives from it
    batch_size: Annotated[int, Schema(minimum=1)] = 4  # items a step takes at once
    # Items a step may fail on with an unexpected error (each an internal_error reject) before the run
    # stops: a count, or a fraction of the items below 1. Default: 1% of the items or 20, whichever is larger.
    max_item_errors: Annotated[float, Schema(minimum=0)] | None = None
    # Worker processes for the pure CPU-bound steps (quality, acoustics) under the local executor
    # (runner/pooled.py); 1 keeps them in the driver. Default: one per core. Never changes the rows.
    workers: Annotated[int, Schema(minimum=1)] | None = None
    # Where Whisper, the TTS engines and DNSMOS run: auto (a CUDA GPU when this machine has one a
    # model can use, else the CPU), cpu, or cuda (stop at the start if a model cannot reach a GPU).
    # The manifest's `devices` says where they ran (kame_data/accelerator.py).
    device: Literal["auto", "cpu", "cuda"] = "auto"

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


@lru_cache(maxsize=1)
def head_schema() -> dict[str, Any]:
    """The schema of a recipe's own keys (`Recipe`); other keys are sections, which RunConfig
    checks against the schema of every registered step (kame_data/runner/recipe_schema.py)."""
    builder = SchemaBuilder()
    head = builder.object_schema(Recipe, closed=False)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **head, "$defs": builder.defs}


def load_recipe(ref: str | Path) -> Recipe:
    """The recipe's own keys, checked; its sections are parsed by RunConfig.resolve."""
    path = find_recipe(ref)
    raw = read_yaml_mapping(path)
    if isinstance(raw.get("name"), str):
        check_name(raw["name"], f"recipe {path}")
    try:
        validate(head_schema(), raw, what=f"recipe {path.name}")
    except SchemaError as e:
        raise RecipeError(str(e)) from e
    return Recipe(
        name=raw["name"],
        path=path.resolve(),
        raw=raw,
        seed=raw.get("seed", 0),
        description=raw.get("description", ""),
        sources=[SourceSpec(**s) for s in raw["sources"]],
        batch_size=raw.get("batch_size", 4),
        max_item_errors=raw.get("max_item_errors"),
        workers=raw.get("workers"),
        device=raw.get("device", "auto"),
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
