"""JSON Schema from config dataclasses: the recipe schema is generated, never written by hand.

A config field says everything about itself where it is declared, so the dataclass, the parser
and the schema cannot drift apart:

- its type is its annotation (`int`, `float | None`, `Literal["template", "llm"]`, `tuple[float,
  float]`, a nested dataclass, a TypedDict, a union such as "a voice name or a mapping");
- a constraint the type cannot say rides on it as `Annotated[int, Schema(minimum=1)]`, in JSON
  Schema's own words, so what is written is what lands in the schema;
- its description is its comment: the comment lines directly above the field plus the comment
  at the end of its line (`max_options: int = 4  # the most options a question reads`);
- rules over several fields of one class (`exactly one of path and hub`) are its `schema_rules`
  class attribute, merged into the class's object schema.

Nested dataclasses become `$defs` entries named after their class; a field's default becomes
the schema's `default` where it is plain JSON data.
"""

from __future__ import annotations

import ast
import collections.abc
import functools
import inspect
import io
import json
import re
import textwrap
import tokenize
import types
import typing
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal, Union

NOT_A_KEY = "not_a_key"


@dataclass(frozen=True)
class Schema:
    """JSON Schema keywords added to a type: `Annotated[float, Schema(minimum=0, maximum=1)]`."""

    keywords: dict[str, Any]

    def __init__(self, **keywords: Any):
        object.__setattr__(self, "keywords", keywords)

    def __hash__(self) -> int:
        return hash(json.dumps(self.keywords, sort_keys=True, default=str))


def not_a_key(default: Any = MISSING) -> Any:
    """A field the loader fills in (where a recipe lies, its raw text), not a key a recipe writes."""
    return field(default=default, metadata={NOT_A_KEY: True})


_DIRECTIVE = re.compile(r"^(type:|noqa|pragma|fmt:)")


@functools.lru_cache(maxsize=None)
def field_docs(cls: type) -> dict[str, str]:
    """{field: description} from the comments of `cls`'s source (and its bases'): the comment
    lines directly above a field, then the comment at the end of its line(s)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if "__annotations__" not in vars(klass) or klass.__module__ in ("builtins", "typing"):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        lines = source.splitlines()
        comments = {tok.start[0]: tok.string.lstrip("#").strip()
                    for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT}
        body = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)).body
        for node in body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            above: list[str] = []
            n = node.lineno - 1
            while n >= 1 and lines[n - 1].lstrip().startswith("#"):
                above.insert(0, comments.get(n, ""))
                n -= 1
            trailing = [comments[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
                        if n in comments and not lines[n - 1].lstrip().startswith("#")]
            text = " ".join(c for c in above + trailing if c and not _DIRECTIVE.match(c))
            if text:
                docs[node.target.id] = text
    return docs


def class_doc(cls: type) -> str | None:
    """The first paragraph of a class's own docstring, on one line (None: it has none)."""
    doc = cls.__doc__
    if not doc or doc.startswith(f"{cls.__name__}("):  # the signature dataclass writes when there is none
        return None
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def _json_default(value: Any) -> Any:
    """`value` as JSON data, or MISSING when it is not plain data (a dataclass, an object)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        items = [_json_default(v) for v in value]
        return MISSING if any(v is MISSING for v in items) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = {k: _json_default(v) for k, v in value.items()}
        return MISSING if any(v is MISSING for v in items.values()) else items
    return MISSING


def _default_of(f: Field) -> Any:
    if f.default is not MISSING:
        return _json_default(f.default)
    if f.default_factory is not MISSING:  # type: ignore[misc]
        return _json_default(f.default_factory())  # type: ignore[misc]
    return MISSING


_SCALARS: dict[Any, str] = {bool: "boolean", int: "integer", float: "number", str: "string", Path: "string"}


class SchemaBuilder:
    """Turns annotated types into JSON Schema, collecting nested dataclasses into `defs`.

    `types`: by "Class.field", a type to use instead of the field's annotation, for a field whose
    exact type a lower layer cannot name (a table that lives in a layer above it)."""

    def __init__(self, types: dict[str, Any] | None = None):
        self.types = dict(types or {})
        self.defs: dict[str, dict[str, Any]] = {}
        self._def_classes: dict[str, type] = {}

    def object_schema(self, cls: type, description: str | None = None,
                      closed: bool = True) -> dict[str, Any]:
        """The schema of a dataclass or TypedDict as a mapping: one property per field (fields
        marked `not_a_key` left out), those without a default required."""
        hints = typing.get_type_hints(cls, include_extras=True)
        docs = field_docs(cls)
        props: dict[str, Any] = {}
        required: list[str] = []
        if is_dataclass(cls):
            entries = [(f.name, f) for f in fields(cls) if not f.metadata.get(NOT_A_KEY)]
        else:  # TypedDict
            entries = [(name, None) for name in hints]
        for name, f in entries:
            prop = self.type_schema(self.types.get(f"{cls.__name__}.{name}", hints[name]))
            default = _default_of(f) if f is not None else MISSING
            if default not in (MISSING, None) and "$ref" not in prop:
                prop["default"] = default
            if docs.get(name):
                prop["description"] = docs[name]
            props[name] = prop
            if (f is not None and f.default is MISSING and f.default_factory is MISSING) or \
                    (f is None and name in getattr(cls, "__required_keys__", ())):  # type: ignore[misc]
                required.append(name)
        out: dict[str, Any] = {"type": "object"}
        if description or class_doc(cls):
            out["description"] = description or class_doc(cls)
        if closed:
            out["additionalProperties"] = False
        if required:
            out["required"] = required
        out["properties"] = props
        out.update(getattr(cls, "schema_rules", None) or {})
        return out

    def type_schema(self, tp: Any) -> dict[str, Any]:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:
            out = self.type_schema(args[0])
            for meta in args[1:]:
                if isinstance(meta, Schema):
                    out.update(meta.keywords)
            return out
        if tp is type(None) or tp is None:
            return {"type": "null"}
        if tp in _SCALARS:
            return {"type": _SCALARS[tp]}
        if tp is Any or tp is object:
            return {}
        if origin is Literal:
            return {"const": args[0]} if len(args) == 1 else {"enum": list(args)}
        if origin in (Union, types.UnionType):
            return self._union(args)
        if origin in (tuple, list) or tp in (tuple, list) or origin in _SEQUENCES:
            return self._array(tp, origin, args)
        if origin is dict or tp is dict or origin in _MAPPINGS:
            out = {"type": "object"}
            if len(args) == 2:
                keys = {k: v for k, v in self.type_schema(args[0]).items() if k != "type"}
                if keys:
                    out["propertyNames"] = keys
                out["additionalProperties"] = self.type_schema(args[1])
            return out
        if is_dataclass(tp):
            return {"$ref": f"#/$defs/{self._define(tp)}"}
        if typing.is_typeddict(tp):
            return self.object_schema(tp)
        raise TypeError(f"no JSON Schema for the config type {tp!r}")

    def _union(self, args: tuple) -> dict[str, Any]:
        members = [self.type_schema(a) for a in args if a is not type(None)]
        nullable = len(members) < len(args)
        if len(members) == 1 and nullable:
            only = members[0]
            if isinstance(only.get("type"), str) and not {"$ref", "oneOf", "enum", "const"} & set(only):
                return {**only, "type": [only["type"], "null"]}
            if "enum" in only:
                return {**only, "enum": [*only["enum"], None]}
        if nullable:
            members.append({"type": "null"})
        return members[0] if len(members) == 1 else {"oneOf": members}

    def _array(self, tp: Any, origin: Any, args: tuple) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "array"}
        if origin is tuple and args and args[-1] is not Ellipsis:  # a fixed length: tuple[float, float]
            items = [self.type_schema(a) for a in args]
            if all(i == items[0] for i in items):
                out["items"] = items[0]
            else:
                out["prefixItems"] = items
            out["minItems"] = out["maxItems"] = len(items)
        elif args:
            out["items"] = self.type_schema(args[0])
        return out

    def _define(self, cls: type) -> str:
        name = cls.__name__
        known = self._def_classes.get(name)
        if known is cls:
            return name
        if known is not None:
            raise TypeError(f"two config classes named {name}: {known.__module__} and {cls.__module__}")
        self._def_classes[name] = cls
        self.defs[name] = {}  # reserved first: a class may contain itself
        self.defs[name] = self.object_schema(cls)
        return name


_SEQUENCES = {typing.Sequence, collections.abc.Sequence}
_MAPPINGS = {typing.Mapping, collections.abc.Mapping}


def undocumented(schema: Any, path: str = "") -> list[str]:
    """Paths of every property in `schema` (and its `$defs`) that has no description."""
    found: list[str] = []
    if isinstance(schema, dict):
        for name, prop in (schema.get("properties") or {}).items():
            if isinstance(prop, dict) and "description" not in prop:
                found.append(f"{path}.{name}".lstrip("."))
        for key, value in schema.items():
            if key in ("properties", "$defs") and isinstance(value, dict):
                for name, sub in value.items():
                    found += undocumented(sub, f"{path}.{name}" if key == "properties" else name)
            elif isinstance(value, (dict, list)) and key not in ("default", "enum", "const", "if", "then", "not"):
                found += undocumented(value, path)
    elif isinstance(schema, list):
        for item in schema:
            found += undocumented(item, path)
    return found


def dumps(schema: Any, width: int = 110) -> str:
    """JSON for people: each object or list on one line where it fits in `width`, indented otherwise."""

    def render(value: Any, indent: int, lead: int = 0) -> str:
        flat = json.dumps(value, ensure_ascii=False)
        if indent + lead + len(flat) <= width or not isinstance(value, (dict, list)) or not value:
            return flat
        pad = " " * (indent + 2)
        if isinstance(value, dict):
            inner = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {render(v, indent + 2, len(k) + 4)}"
                     for k, v in value.items()]
            return "{\n" + ",\n".join(inner) + "\n" + " " * indent + "}"
        if all(not isinstance(v, (dict, list)) for v in value):  # scalars: as many to a line as fit
            lines, line = [], ""
            for item in (json.dumps(v, ensure_ascii=False) for v in value):
                if line and len(pad) + len(line) + len(item) + 2 > width:
                    lines.append(line)
                    line = ""
                line = f"{line}, {item}" if line else item
            return "[\n" + ",\n".join(pad + l for l in lines + [line]) + "\n" + " " * indent + "]"
        return "[\n" + ",\n".join(pad + render(v, indent + 2) for v in value) + "\n" + " " * indent + "]"

    return render(schema, 0) + "\n"
