"""Validation of records, recipes and manifests against the JSON Schemas in `schemas/`."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema
from referencing import Registry, Resource

from kame_data.resources import schema


class SchemaError(ValueError):
    """A document does not match its schema; `path` names the offending field."""

    def __init__(self, what: str, path: str, message: str):
        self.what, self.path, self.message = what, path, message
        super().__init__(f"{what}: {path or '<root>'}: {message}")


@lru_cache(maxsize=1)
def _registry() -> Registry:
    resources_ = []
    for entry in resources.files("kame_data.schemas").iterdir():
        if entry.name.endswith(".schema.json"):
            resources_.append((entry.name, Resource.from_contents(schema(entry.name[: -len(".schema.json")]))))
    return Registry().with_resources(resources_)


@lru_cache(maxsize=None)
def _validator(name: str) -> jsonschema.protocols.Validator:
    doc = schema(name)
    cls = jsonschema.validators.validator_for(doc)
    return cls(doc, registry=_registry())


def format_path(parts) -> str:
    """`["speak", "user", 0]` -> `speak.user[0]`."""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _describe(err: jsonschema.ValidationError) -> tuple[str, str]:
    path = list(err.absolute_path)
    if err.validator == "additionalProperties":
        known = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(known)) if isinstance(err.instance, dict) else []
        key = extra[0] if extra else "?"
        return format_path(path + [key]), f"unknown key {key!r} (expected one of: {', '.join(known)})"
    if err.validator == "required":
        return format_path(path), err.message
    return format_path(path), err.message


def validate(name: str, doc: Any, what: str | None = None) -> None:
    """Raise SchemaError naming the first bad field of `doc` against schema `name`."""
    errors = sorted(_validator(name).iter_errors(doc), key=lambda e: (list(e.absolute_path).__len__(), str(e.absolute_path)))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors)
    # oneOf/anyOf failures are reported through their most specific sub-error.
    while best.context:
        best = jsonschema.exceptions.best_match(best.context)
    path, message = _describe(best)
    raise SchemaError(what or name, path, message)
