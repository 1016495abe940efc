"""Names that select code are spelled in one place (docs/design.md, "Steps"): a step's name only in
its own package and the registry, an engine's only in its own module and the engine table. The
runner, the executors, --until, the manifest, plan, doctor and the CLI read names from the specs.

The check reads the AST of every module of kame_data/ and cli/ and looks at string constants equal
to a name (words inside longer strings, such as messages and help texts, are prose, not lookups).
Modules that read the *published data* (dataset/, review/, train/, records.py) are outside the
step-name check: there `oracle`, `acoustics` and `quality` name row columns and manifest sections,
a file format that outlives any pipeline. Inside it, the few data keys that happen to equal a
step name are listed below with the reason.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from kame_data import pipeline
from kame_data.runner.write import WriteStep
from kame_data.sources.step import SourcesStep
from kame_data.speech import engines
from tests.conftest import ROOT

SCANNED = ("kame_data", "cli")
DATA_FORMAT = tuple(ROOT / p for p in ("kame_data/dataset", "kame_data/review", "kame_data/train",
                                       "kame_data/records.py"))
# (module, constant): why it is not a step name there.
DATA_KEYS = {
    ("kame_data/runner/manifest.py", "quality"): "the manifest's speech-quality section (figures of every row)",
    ("kame_data/runner/run.py", "quality"): "the manifest's speech-quality section",
    ("kame_data/runner/write.py", "quality"): "a row's speech-quality figures, for the manifest",
    ("kame_data/recipe.py", "sources"): "the recipe's list of source specs (a top-level key of every recipe)",
    ("kame_data/runner/config.py", "sources"): "the recipe's list of source specs, in the resolved recipe",
    ("kame_data/plan/planner.py", "sources"): "the plan's table of sources",
}


def engine_homes() -> dict[str, set[Path]]:
    """Each engine's name -> the modules allowed to spell it: its own module and the table."""
    table = Path(inspect.getfile(engines)).resolve()
    return {name: {Path(inspect.getfile(spec.loader)).resolve(), table} for name, spec in engines.ENGINES.items()}


def step_homes() -> dict[str, set[Path]]:
    """Each step's name -> the modules allowed to spell it: those of its own package, the registry,
    and the data keys above."""
    homes: dict[str, set[Path]] = {}
    for cls in [spec.step for spec in pipeline.steps()] + [SourcesStep, WriteStep]:
        package = Path(inspect.getfile(cls)).resolve().parent
        homes[cls.name] = {p.resolve() for p in package.glob("*.py")} | {Path(inspect.getfile(pipeline)).resolve()}
    for (module, name), _why in DATA_KEYS.items():
        homes[name].add((ROOT / module).resolve())
    return homes


def spelled_outside(homes: dict[str, set[Path]], skip: tuple[Path, ...] = ()) -> list[str]:
    """`path:line 'name'` for every string constant equal to a name, outside that name's homes."""
    found = []
    for path in sorted(p.resolve() for folder in SCANNED for p in (ROOT / folder).rglob("*.py")):
        if any(path == s or s in path.parents for s in skip):
            continue
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


def test_step_names_are_spelled_only_by_their_package_and_the_registry():
    homes = step_homes()
    assert set(homes) >= {"sources", "script", "speak", "quality", "acoustics", "oracle", "write"}
    found = spelled_outside(homes, skip=DATA_FORMAT)
    assert not found, "read the registry (kame_data/pipeline.py) or the step class instead:\n" + "\n".join(found)


def test_the_check_finds_a_spelled_name(tmp_path):
    """The scan sees a lookup by name in a module that is not the engine's: the planted one."""
    homes = {"hibari": {ROOT / "nowhere.py"}}
    planted = spelled_outside(homes)
    assert planted and all(line.endswith("'hibari'") for line in planted)
