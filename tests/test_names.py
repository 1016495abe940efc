"""Names that select code are spelled in one place: an engine's name appears as a string only in its
own module and in the table that collects it, so adding or renaming one touches nothing else.

The check reads the AST of every module of kame_data/ and cli/ and looks at string constants equal
to a name (words inside longer strings, such as messages and help texts, are prose, not lookups).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from kame_data.speech import engines
from tests.conftest import ROOT

SCANNED = ("kame_data", "cli")


def engine_homes() -> dict[str, set[Path]]:
    """Each engine's name -> the modules allowed to spell it: its own module and the table."""
    table = Path(inspect.getfile(engines)).resolve()
    return {name: {Path(inspect.getfile(spec.loader)).resolve(), table} for name, spec in engines.ENGINES.items()}


def spelled_outside(homes: dict[str, set[Path]]) -> list[str]:
    """`path:line 'name'` for every string constant equal to a name, outside that name's homes."""
    found = []
    for path in sorted(p.resolve() for folder in SCANNED for p in (ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in homes \
                    and path not in homes[node.value]:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    return found


def test_engine_names_are_spelled_only_by_their_module_and_the_table():
    homes = engine_homes()
    assert set(homes) >= {"piper", "espeak", "hibari", "coqui"}
    assert not spelled_outside(homes), "read the engine table (speech/engines.py) instead:\n" + \
        "\n".join(spelled_outside(homes))


def test_the_check_finds_a_spelled_name(tmp_path):
    """The scan sees a lookup by name in a module that is not the engine's: the planted one."""
    homes = {"hibari": {ROOT / "nowhere.py"}}
    planted = spelled_outside(homes)
    assert planted and all(line.endswith("'hibari'") for line in planted)
