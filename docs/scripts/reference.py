"""The site's reference pages, written from the code at build time (never by hand).

- The recipe: every field of the JSON Schema that the config dataclasses generate
  (`kame_data.runner.recipe_schema.built_in_schema`, what `make schema` writes), with its type,
  default and comment.
- The dataset: every column of a published row (`kame_data.dataset.rows.features`), with its type and
  what `schemas/` says of it; a column the schemas do not describe fails the build.

`gen_pages.py` (run by mkdocs-gen-files) writes them into the site; the tests call these functions.
The command line's page is mkdocs-click's, over the Typer app's click command (`cli/reference.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _code(value: Any) -> str:
    return "`" + json.dumps(value, ensure_ascii=False).replace("`", "'") + "`"


# ------------------------------------------------------------------------------------------ recipe

def _type(node: dict[str, Any]) -> str:
    """A schema node as a short type, e.g. `number ≥ 0`, `one of "a", "b"`, `list of SourceSpec`."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(dict.fromkeys(_type(n) for n in node[key]))
    if "const" in node:
        return _code(node["const"])
    if "enum" in node:
        return "one of " + ", ".join(_code(v) for v in node["enum"])
    kind = node.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array":
        items = node.get("items")
        return "list" + (f" of {_type(items)}" if items else "")
    if kind == "object" and "additionalProperties" in node and isinstance(node["additionalProperties"], dict):
        return f"mapping of {_type(node['additionalProperties'])}"
    limits = [f"≥ {node['minimum']}" if "minimum" in node else "", f"> {node['exclusiveMinimum']}"
              if "exclusiveMinimum" in node else "", f"≤ {node['maximum']}" if "maximum" in node else "",
              f"matching `{node['pattern']}`" if "pattern" in node else ""]
    return " ".join([kind, *[x for x in limits if x]])


def _fields_table(node: dict[str, Any], prefix: str, nested: list[tuple[str, dict[str, Any]]]) -> list[str]:
    required = set(node.get("required", []))
    lines = ["| key | type | default | what it does |", "|---|---|---|---|"]
    for key, field in node.get("properties", {}).items():
        path = f"{prefix}{key}"
        default = _code(field["default"]) if "default" in field else ("**required**" if key in required else "")
        lines.append(f"| `{path}` | {_cell(_type(field))} | {_cell(default)} | {_cell(field.get('description', ''))} |")
        if field.get("type") == "object" and field.get("properties"):
            nested.append((path, field))
    return lines


def recipe_page(schema: dict[str, Any] | None = None) -> str:
    """Markdown of every recipe field, section by section, then the shared types."""
    if schema is None:
        from kame_data.runner.recipe_schema import built_in_schema

        schema = json.loads(built_in_schema())
    top = {k: v for k, v in schema["properties"].items() if v.get("type") != "object"}
    sections = {k: v for k, v in schema["properties"].items() if v.get("type") == "object"}
    out = ["# Recipe reference", "",
           "Every key a recipe may hold, generated at build time from the JSON Schema that the config dataclasses "
           "produce (their types, limits and comments; `make schema` writes the same schema to "
           "`schemas/recipe.schema.json` for editors). A recipe is checked against it on load, and a bad key is "
           "named with its file, section and what was expected.", "",
           "## Top level", ""] + _fields_table({"properties": top, "required": schema.get("required", [])}, "", [])
    pending: list[tuple[str, dict[str, Any]]] = list(sections.items())
    while pending:
        name, node = pending.pop(0)
        nested: list[tuple[str, dict[str, Any]]] = []
        out += ["", f"## `{name}`", ""] + ([_cell(node["description"]), ""] if node.get("description") else [])
        out += _fields_table(node, f"{name}.", nested)
        pending[:0] = nested
    out += ["", "## Shared types", "", "Types that several keys use, linked from the tables above."]
    for name, node in schema.get("$defs", {}).items():
        out += ["", f"### {name}", ""] + ([_cell(node["description"]), ""] if node.get("description") else [])
        out += _fields_table(node, "", [])
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------- dataset

def _schema_file(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / name).read_text("utf-8"))


def _children(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A schema node's properties, following its items, `$ref`s to sibling files and `allOf`."""
    if node.get("type") == "array" or "items" in node:
        node = node.get("items", {})
    props: dict[str, dict[str, Any]] = {}
    for part in node.get("allOf", []):
        props |= _children(part)
    if "$ref" in node:
        props |= _children(_schema_file(node["$ref"]))
    return props | node.get("properties", {})


def _feature_type(feature: Any) -> tuple[str, Any]:
    """A datasets feature as a short type, and the struct inside it (or None)."""
    from datasets import Audio, List, Value

    if isinstance(feature, Audio):
        return f"Audio ({feature.sampling_rate} Hz)", None
    if isinstance(feature, Value):
        return feature.dtype, None
    if isinstance(feature, List):
        inner, struct = _feature_type(feature.feature)
        return f"list of {inner}", struct
    if isinstance(feature, dict):
        return "struct", feature
    return type(feature).__name__, None


def dataset_rows(features: Any = None) -> list[tuple[str, str, str]]:
    """(column path, type, description) for every column and nested field of a row."""
    if features is None:
        from kame_data.dataset.rows import features as row_features

        features = row_features(arrival=True)
    out: list[tuple[str, str, str]] = []
    missing: list[str] = []

    def walk(fields: dict[str, Any], schema: dict[str, dict[str, Any]], prefix: str) -> None:
        for name, feature in fields.items():
            path, node = f"{prefix}{name}", schema.get(name, {})
            kind, struct = _feature_type(feature)
            if not node.get("description"):
                missing.append(path)
            out.append((path, kind, node.get("description", "")))
            if struct is not None:
                walk(struct, _children(node), f"{path}.")

    walk(dict(features), _children(_schema_file("sample.schema.json")), "")
    if missing:
        raise ValueError(f"schemas/ describes no {', '.join(missing)}: add a description (sample.schema.json "
                         "and the files it refers to)")
    return out


def dataset_page(features: Any = None) -> str:
    lines = ["# Dataset columns", "",
             "Every column of a published row (one dialogue), generated at build time from the row's Hugging Face "
             "features (`kame_data/dataset/rows.py`) and the descriptions in `schemas/` (`sample.schema.json`, "
             "`turn.schema.json`, `word.schema.json`, `oracle_event.schema.json`). `kame-data validate OUT` checks "
             "every row against those schemas. A nested field is written `column.field`; `oracle_arrival` exists "
             "only in datasets made with an `oracle.latency` other than `ideal`.", "",
             "| column | type | what it holds |", "|---|---|---|"]
    lines += [f"| `{p}` | {_cell(k)} | {_cell(d)} |" for p, k, d in dataset_rows(features)]
    return "\n".join(lines) + "\n"
