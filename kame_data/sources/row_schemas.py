"""Every source row checked against its kind's JSON Schema before an adapter reads it.

`schemas/source_row_<kind>.schema.json` says what each field an adapter reads may hold: the
question is a string (a dict there would be read aloud as "{'a': 1}"), options are a list or a
letter-keyed object of texts, at most one per letter, and an index is an integer (JSON `true` is
not option B), within the options. A `kind: jsonl` source gets a schema built from its `fields`
mapping. A row that fails is a reject `invalid_row` naming file, line and field, e.g.
`mmlu_pro_test.jsonl:17: options: 5 is not of type 'array'`.

Why `invalid_row` is a reject and not a malformed line counted against `max_bad_rows`: a line that
is valid JSON holding an object is a row of the file; that one of its fields has the wrong shape is
a fault of that dataset row, like an empty question or an answer naming no option (which were
always rejects of the adapters), not of the file's format. `max_bad_rows` keeps its meaning, "this
file is not readable as rows" (not UTF-8, not JSON, cut short, too deep), and a file of the wrong
kind still ends with one line when nothing in it can be used (`no source items to process`).
"""

from __future__ import annotations

from kame_data.resources import schema
from kame_data.schema import data_validator, first_problem
from kame_data.sources.jsonl import FIELDS

SCHEMA = "source_row_{kind}"
JSONL = "source_row_jsonl.schema.json"


def jsonl_schema(fields: dict[str, str]) -> dict:
    """The row schema of a `kind: jsonl` source: each mapped field's definition (from
    source_row_jsonl.schema.json) at its dotted name; the objects on the way are objects or null."""
    parts = []
    for role, name in sorted(fields.items()):
        if role not in FIELDS or not name:
            continue
        node: dict = {"$ref": f"{JSONL}#/$defs/{role}"}
        path = name.split(".")
        for depth in range(len(path) - 1, -1, -1):
            node = {"properties": {path[depth]: node}}
            if depth:
                node["type"] = ["object", "null"]
        parts.append(node)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "allOf": parts}


class RowSchema:
    """The row check of one source kind."""

    def __init__(self, kind: str, fields: dict[str, str] | None = None):
        doc = jsonl_schema(fields or {}) if kind == "jsonl" else schema(SCHEMA.format(kind=kind))
        self.validator = data_validator(doc)
        self.indices: dict[str, str] = doc.get("x-index-into", {})

    def problem(self, row: dict) -> str | None:
        """`field: what is wrong` for the first bad field of `row`, or None when it fits."""
        found = first_problem(self.validator, row)
        if found is not None:
            path, message = found
            return f"{path or '<row>'}: {message}"
        for index_field, list_field in self.indices.items():  # no JSON Schema keyword relates two fields
            index, items = row.get(index_field), row.get(list_field)
            if isinstance(index, int) and isinstance(items, list) and index >= len(items):
                return f"{index_field}: {index} is not an index of the {len(items)} {list_field}"
        return None
