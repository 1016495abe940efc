"""Only the registry and a step's own package know a step by name (docs/design.md, "Steps"): the
runner, the executors, --until, the manifest, plan, doctor and the CLI read names from the specs.

The test reads every module's syntax tree and looks for string constants equal to a step name.
Packages that read the *published data* (dataset/, review/, train/) are out of its scope: there
`oracle`, `acoustics` and `quality` are the names of row columns and manifest sections, a file
format that outlives any pipeline. Inside its scope, the few data keys that happen to equal a step
name are listed below with the reason."""

from __future__ import annotations

import ast
from pathlib import Path

from kame_data import pipeline
from kame_data.runner.write import WriteStep
from kame_data.sources.step import SourcesStep
from tests.conftest import ROOT

DATA_FORMAT = ("kame_data/dataset/", "kame_data/review/", "kame_data/train/", "kame_data/records.py")
# (module, constant): why it is not a step name there.
DATA_KEYS = {
    ("kame_data/runner/manifest.py", "quality"): "the manifest's speech-quality section (figures of every row)",
    ("kame_data/runner/run.py", "quality"): "the manifest's speech-quality section",
    ("kame_data/recipe.py", "sources"): "the recipe's list of source specs (a top-level key of every recipe)",
    ("kame_data/runner/config.py", "sources"): "the recipe's list of source specs, in the resolved recipe",
    ("kame_data/plan.py", "sources"): "the plan's table of sources",
    ("kame_data/runner/write.py", "quality"): "a row's speech-quality figures, for the manifest",
    ("kame_data/speech/figures.py", "acoustics"): "the row column and manifest section of that name",
}


def _owners() -> dict[str, set[str]]:
    """Step name -> the package (folder) of the module that defines it, and the registry."""
    out = {}
    for cls in [spec.step for spec in pipeline.steps()] + [SourcesStep, WriteStep]:
        module = Path(cls.__module__.replace(".", "/") + ".py")
        out[cls.name] = {str(module.parent) + "/", "kame_data/pipeline.py"}
    return out


def _modules() -> list[Path]:
    return sorted([*ROOT.glob("kame_data/**/*.py"), *ROOT.glob("cli/**/*.py")])


def test_no_step_name_is_spelled_outside_its_package_and_the_registry():
    owners = _owners()
    found = []
    for path in _modules():
        rel = str(path.relative_to(ROOT))
        if rel.startswith(DATA_FORMAT):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in owners:
                if any(rel.startswith(o) for o in owners[node.value]) or (rel, node.value) in DATA_KEYS:
                    continue
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not found, "step names spelled outside their package:\n" + "\n".join(found)
