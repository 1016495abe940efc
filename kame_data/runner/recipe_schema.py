"""The recipe's JSON Schema, generated from the config dataclasses and the step registry.

One schema per registry: the recipe's own keys (`Recipe`), the run's sections (`filters`,
`publish`) and one section per registered step (its `StepSpec.config`), so a step registered at
run time (a plugin, a test's toy step) is accepted in recipes and appears here. RunConfig checks
every recipe against it; `make schema` (`write`) puts the built-in steps' schema in
schemas/recipe.schema.json for editors and people (a test keeps that file equal to this).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

from kame_data import pipeline
from kame_data.atomic import write_text
from kame_data.config_schema import Schema, SchemaBuilder, class_doc, dumps
from kame_data.dataset.config import PublishConfig
from kame_data.recipe import Recipe
from kame_data.sources import KINDS
from kame_data.sources.config import FilterConfig
from kame_data.step import StepSpec

# Sections of the run rather than of one step: what the sources step keeps, how the writer shards.
RUN_SECTIONS: dict[str, type] = {"filters": FilterConfig, "publish": PublishConfig}


# Types a lower layer cannot name for its own fields: the source kinds are the sources' table.
FIELD_TYPES: dict[str, Any] = {"SourceSpec.kind": Annotated[str, Schema(enum=list(KINDS))]}


def recipe_schema() -> dict[str, Any]:
    """The schema of a recipe under the steps registered now."""
    return _schema(tuple(pipeline.steps()))


@lru_cache(maxsize=8)
def _schema(specs: tuple[StepSpec, ...]) -> dict[str, Any]:
    builder = SchemaBuilder(FIELD_TYPES)
    head = builder.object_schema(Recipe)
    properties = dict(head["properties"])
    for name, cls in RUN_SECTIONS.items():
        properties[name] = builder.object_schema(cls, description=class_doc(cls))
    for spec in specs:
        properties[spec.name] = builder.object_schema(spec.config, description=f"{spec.about[:1].upper()}{spec.about[1:]}.")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "kame-data recipe",
            "description": "A kame-data recipe (generated from the config dataclasses by `make schema`; do not edit).",
            "type": "object", "additionalProperties": False, "required": head["required"],
            "properties": properties, "$defs": dict(sorted(builder.defs.items()))}


def built_in_schema() -> str:
    """schemas/recipe.schema.json as `make schema` writes it: the built-in steps only."""
    return dumps(_schema(pipeline.built_in()))


def write(path: str) -> None:
    """`make schema`: the built-in schema into `path`, whole or not at all."""
    write_text(path, built_in_schema())
