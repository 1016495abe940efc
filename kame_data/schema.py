"""Validation of records, recipes and manifests against the JSON Schemas in `schemas/`."""

from __future__ import annotations

import reprlib
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


def _is_int(checker, instance) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@lru_cache(maxsize=None)
def _strict(cls: type) -> type:
    return jsonschema.validators.extend(cls, type_checker=cls.TYPE_CHECKER.redefine("integer", _is_int))


def data_validator(doc: dict) -> jsonschema.protocols.Validator:
    """A validator for rows of data (benchmark rows), where an integer is an index: JSON `true`
    and `1.0` are not integers here (the standard checker takes 1.0, and Python takes True as 1).
    Schemas in `schemas/` can be referenced by file name."""
    return _strict(jsonschema.validators.validator_for(doc))(doc, registry=_registry())


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


def _best(validator: jsonschema.protocols.Validator, doc: Any) -> jsonschema.ValidationError | None:
    errors = sorted(validator.iter_errors(doc), key=lambda e: (list(e.absolute_path).__len__(), str(e.absolute_path)))
    if not errors:
        return None
    best = jsonschema.exceptions.best_match(errors)
    # oneOf/anyOf failures are reported through their most specific sub-error.
    while best.context:
        best = jsonschema.exceptions.best_match(best.context)
    return best


_SHORT = reprlib.Repr()  # keyword arguments need Python 3.12
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict = 2, 40, 40, 4, 4


def first_problem(validator: jsonschema.protocols.Validator, doc: Any) -> tuple[str, str] | None:
    """(path, message) of the first bad field of `doc`, or None. The offending value is quoted
    shortened (a 5 MB string or a deep list gives a message of one short line)."""
    best = _best(validator, doc)
    if best is None:
        return None
    path, message = _describe(best)
    if best.validator in ("maxItems", "maxProperties"):
        message = f"{len(best.instance)} entries, more than {best.validator_value}"
    elif len(message) > 120:
        message = message.replace(repr(best.instance), _SHORT.repr(best.instance), 1)[:300]
    return path, message


_generated: dict[int, tuple[dict, jsonschema.protocols.Validator]] = {}


def _validator_of(doc_schema: dict) -> jsonschema.protocols.Validator:
    """A validator for a schema given as data (one generated at run time), built once per schema object."""
    known = _generated.get(id(doc_schema))
    if known is None or known[0] is not doc_schema:
        if len(_generated) >= 16:  # schemas of registries long gone (tests register steps and drop them)
            _generated.clear()
        cls = jsonschema.validators.validator_for(doc_schema)
        known = _generated[id(doc_schema)] = (doc_schema, cls(doc_schema, registry=_registry()))
    return known[1]


def validate(name: str | dict, doc: Any, what: str | None = None) -> None:
    """Raise SchemaError naming the first bad field of `doc` against schema `name` (a file in
    `schemas/`, or a schema given as data)."""
    validator = _validator_of(name) if isinstance(name, dict) else _validator(name)
    best = _best(validator, doc)
    if best is None:
        return
    path, message = _describe(best)
    raise SchemaError(what or (name if isinstance(name, str) else "document"), path, message)
