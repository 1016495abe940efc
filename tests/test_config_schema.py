"""A config dataclass says everything the schema needs where each field is declared: its type, its
limits (`Schema(...)`), its comment; the generator turns that into JSON Schema that accepts and
refuses what the dataclass does."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, TypedDict

import jsonschema
import pytest

from kame_data.config_schema import Schema, SchemaBuilder, dumps, field_docs, not_a_key, undocumented

Share = Annotated[float, Schema(minimum=0, maximum=1)]


@dataclass(frozen=True)
class Inner:
    """A nested part.

    Only the first paragraph becomes the description."""

    level: int = 3  # how loud


class Parts(TypedDict, total=False):
    """Named parts of a row."""

    question: str  # where the question is
    answer: str


@dataclass(frozen=True)
class Example:
    name: Annotated[str, Schema(pattern="^[a-z]+$")]  # required: it has no default
    where: str = not_a_key("here")
    # A comment block above a field
    # is part of its description,
    mode: Literal["fast", "slow"] = "fast"  # and so is the comment at the end of its line
    one: Literal[24000] = 24000  # a single choice
    share: Share | None = None  # type: ignore[assignment]  -- directives are not descriptions
    kind: Literal["a", "b"] | None = None  # an optional choice
    pair: tuple[float, float] = (0.1, 0.2)  # [low, high]
    mixed: tuple[int, str] = (1, "x")  # a fixed tuple of two types
    many: tuple[Share, ...] = ()  # any number of shares
    by_split: dict[Annotated[str, Schema(pattern="^[a-z]+$")], Share] | None = None  # fractions by name
    voice: str | Inner = "joe"  # a name or a mapping
    inner: Inner = field(default_factory=Inner)  # a nested dataclass
    parts: Annotated[Parts, Schema(required=["question"])] | None = None  # a TypedDict
    anything: Any = None  # no type to check

    schema_rules: ClassVar[dict[str, Any]] = {"not": {"required": ["kind", "parts"]}}


def build(types=None):
    builder = SchemaBuilder(types)
    doc = builder.object_schema(Example)
    return {**doc, "$defs": builder.defs}


def test_descriptions_come_from_the_comments():
    docs = field_docs(Example)
    assert docs["mode"] == "A comment block above a field is part of its description, and so is the comment at the end of its line"
    assert docs["one"] == "a single choice" and "share" not in docs and "where" not in docs
    assert field_docs(Parts) == {"question": "where the question is"}


def test_types_limits_and_defaults():
    doc = build()
    p = doc["properties"]
    assert "where" not in p and doc["required"] == ["name"] and doc["additionalProperties"] is False
    assert p["name"] == {"type": "string", "pattern": "^[a-z]+$", "description": "required: it has no default"}
    assert p["mode"]["enum"] == ["fast", "slow"] and p["mode"]["default"] == "fast"
    assert p["one"]["const"] == 24000
    assert {k: p["share"][k] for k in ("type", "minimum", "maximum")} == {"type": ["number", "null"], "minimum": 0, "maximum": 1}
    assert "default" not in p["share"] and "description" not in p["share"]  # None is no default to show
    assert p["kind"]["enum"] == ["a", "b", None]
    assert {k: p["pair"][k] for k in ("type", "items", "minItems", "maxItems", "default")} == {
        "type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2, "default": [0.1, 0.2]}
    assert p["mixed"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert p["many"]["items"] == {"type": "number", "minimum": 0, "maximum": 1} and "minItems" not in p["many"]
    assert p["by_split"]["propertyNames"] == {"pattern": "^[a-z]+$"}
    assert p["voice"]["oneOf"] == [{"type": "string"}, {"$ref": "#/$defs/Inner"}]
    assert p["inner"] == {"$ref": "#/$defs/Inner", "description": "a nested dataclass"}  # its defaults are its own
    assert doc["$defs"]["Inner"]["description"] == "A nested part."
    assert doc["$defs"]["Inner"]["properties"]["level"] == {"type": "integer", "default": 3, "description": "how loud"}
    assert p["parts"]["type"] == ["object", "null"] and p["parts"]["required"] == ["question"]
    assert p["parts"]["properties"]["question"]["description"] == "where the question is"
    assert p["anything"] == {"description": "no type to check"}
    assert doc["not"] == {"required": ["kind", "parts"]}
    assert undocumented(doc) == ["share", "parts.answer"]


def test_the_schema_accepts_and_refuses_what_the_dataclass_means():
    validator = jsonschema.Draft202012Validator(build())
    good = {"name": "x", "voice": {"level": 2}, "pair": [0, 1], "by_split": {"train": 0.5}, "parts": {"question": "q"}}
    assert not list(validator.iter_errors(good))
    for bad in ({"name": "X"}, {"name": "x", "mode": "medium"}, {"name": "x", "pair": [1]}, {"name": "x", "share": 2},
                {"name": "x", "voice": {"loud": 1}}, {"name": "x", "by_split": {"Train": 1}}, {"name": "x", "where": "y"},
                {"name": "x", "parts": {"answer": "a"}}, {"name": "x", "kind": "a", "parts": {"question": "q"}}):
        assert list(validator.iter_errors(bad)), bad


def test_a_type_given_from_outside_replaces_the_annotation():
    """A lower layer's field whose exact type is a table above it (SourceSpec.kind) gets it from the builder."""
    doc = build({"Example.anything": Annotated[int, Schema(minimum=1)], "Inner.level": Literal[1, 2, 3]})
    assert doc["properties"]["anything"] == {"type": "integer", "minimum": 1, "description": "no type to check"}
    assert doc["$defs"]["Inner"]["properties"]["level"] == {"enum": [1, 2, 3], "default": 3, "description": "how loud"}


def test_what_it_cannot_express_is_an_error():
    @dataclass
    class Odd:
        when: complex = 1j  # no JSON type

    with pytest.raises(TypeError, match="no JSON Schema for the config type"):
        SchemaBuilder().object_schema(Odd)

    with pytest.raises(TypeError, match="two config classes named Inner"):
        SchemaBuilder().object_schema(Both)


@dataclass(frozen=True)
class OtherInner:
    x: int = 0  # a number


OtherInner.__name__ = "Inner"  # another class of the same name as `Inner`, from elsewhere


@dataclass(frozen=True)
class Both:
    a: Example  # one Inner inside
    b: OtherInner  # the other


def test_dumps_is_json_for_people():
    doc = build()
    text = dumps(doc, width=100)
    assert json.loads(text) == doc
    assert max(len(line) for line in text.splitlines() if '"description"' not in line) <= 100
    assert '      "items": {"type": "number"},\n' in text  # a short object on one line
