"""The docs site and the README a newcomer learns from (issue 65): the reference pages are written
from the code at build time, so a change of a CLI option's help, a recipe field's comment or a row's
column reaches them with no hand edit; the README stays short and points into the site; the site
builds with --strict (slow tier, and `make docs` in CI)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import click
import pytest
import yaml

from tests.conftest import ROOT


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_{name}", ROOT / "docs" / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav_pages() -> set[str]:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8"))["nav"]
    pages: set[str] = set()

    def walk(entries):
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            if isinstance(value, list):
                walk(value)
            else:
                pages.add(value)

    walk(nav)
    return pages


# ------------------------------------------------------------------------------------------ README

def test_the_readme_is_short_starts_with_the_two_commands_and_links_every_task():
    lines = (ROOT / "README.md").read_text("utf-8").splitlines()
    assert len(lines) <= 120
    block = lines[lines.index("```") + 1: lines.index("```") + 3]
    assert [line.split("#")[0].strip() for line in block] == ["make demo", "make test"]
    assert lines.index("```") <= 3  # the commands come first
    text = "\n".join(lines)
    tasks = text[text.index("## Five common tasks"):text.index("## The documentation")]
    rows = [r for r in tasks.splitlines() if r.startswith("| ") and not r.startswith("| task")]
    assert len(rows) == 5
    nav = _nav_pages()
    for row in rows:
        links = re.findall(r"\]\(docs/([^)#]+)\)", row)
        assert links and all(link in nav for link in links), row
    for link in re.findall(r"\]\(docs/([^)#]+)\)", text):
        assert link in nav, f"README links docs/{link}, which is not a page of the site"


def test_the_old_root_documents_are_pages_of_the_site():
    assert not (ROOT / "ARCHITECTURE.md").exists() and not (ROOT / "CONVERSATION.md").exists()
    assert {"design.md", "architecture.md", "conversation.md"} <= _nav_pages()


# --------------------------------------------------------------------------------- the references

def test_the_recipe_reference_holds_every_field_of_the_generated_schema():
    import json

    from kame_data.runner.recipe_schema import built_in_schema

    reference = _script("reference")
    schema = json.loads(built_in_schema())
    page = reference.recipe_page()
    for section, node in schema["properties"].items():
        for key in node.get("properties", {}):
            assert f"| `{section}.{key}` |" in page, f"{section}.{key}"
        if "properties" not in node:
            assert f"| `{section}` |" in page
    for name, node in schema["$defs"].items():
        assert f"### {name}" in page
        for key in node.get("properties", {}):
            assert f"| `{key}` |" in page


def test_a_changed_field_comment_changes_the_recipe_reference(monkeypatch):
    """The page is the schema of the code as it is: a comment changed in a config dataclass shows
    with no hand edit (the schema reads comments; `make schema` only refreshes the editors' copy)."""
    import json

    from kame_data.runner import recipe_schema

    reference = _script("reference")
    real = recipe_schema.built_in_schema

    def changed() -> str:
        schema = json.loads(real())
        schema["$defs"]["QAConfig"]["properties"]["enabled"]["description"] = "a comment changed just now"
        return json.dumps(schema)

    monkeypatch.setattr(recipe_schema, "built_in_schema", changed)
    assert "a comment changed just now" in reference.recipe_page()


def _click_docs(command) -> str:
    from mkdocs_click._docs import make_command_docs

    return "\n".join(make_command_docs("kame-data", command, depth=1, style="plain"))


def test_the_cli_reference_holds_every_command_and_option():
    from kame_data.cli.reference import command

    page = _click_docs(command)

    def walk(cmd: click.Command, path: str) -> None:
        for name, sub in getattr(cmd, "commands", {}).items():
            assert f"{path} {name}" in page
            for param in sub.params:
                if isinstance(param, click.Option) and not param.hidden:
                    assert param.opts[0] in page, f"{path} {name} {param.opts[0]}"
            walk(sub, f"{path} {name}")

    walk(command, "kame-data")


def test_a_changed_option_help_changes_the_cli_reference():
    import typer

    from kame_data.cli.main import app

    command = typer.main.get_command(app)  # a fresh click command: nothing shared is changed
    option = next(p for p in command.commands["run"].params if "--limit" in getattr(p, "opts", ()))
    option.help = "help text changed just now"
    assert "help text changed just now" in _click_docs(command)
    mkdocs_page = (ROOT / "docs" / "reference" / "cli.md").read_text("utf-8")
    assert ":module: kame_data.cli.reference" in mkdocs_page and ":command: command" in mkdocs_page


def test_the_dataset_reference_describes_every_column():
    from kame_data.dataset.rows import features

    reference = _script("reference")
    rows = reference.dataset_rows()
    paths = {p for p, _, _ in rows}
    assert set(features(arrival=True)) <= paths
    assert {"turns.wer", "oracle.level", "acoustics.room.rt60", "oracle_arrival.cut"} <= paths
    assert all(description for _, _, description in rows)


def test_a_column_the_schemas_do_not_describe_fails_the_dataset_reference():
    from datasets import Features, Value

    from kame_data.dataset.rows import features

    reference = _script("reference")
    with pytest.raises(ValueError, match="new_column"):
        reference.dataset_rows(Features({**features(arrival=True), "new_column": Value("string")}))


def test_the_benchmarks_picture_reads_the_table_on_its_page():
    benchmarks = _script("benchmarks")
    rows = benchmarks.ladder_rows(benchmarks.PAGE.read_text("utf-8"))
    assert len(rows) >= 4 and all(len(f1) == 6 and f1[-1] == 1.0 for _, f1 in rows)
    assert rows[0][0].startswith("SmolLM2-135M")


def test_every_page_in_docs_is_in_the_navigation():
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    generated = {"reference/recipe.md", "reference/dataset.md"}
    assert pages | generated == _nav_pages()


@pytest.mark.slow  # about 20 s: the paper recipe's plan and two plots at build time
def test_the_site_builds_strict_with_no_warning(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "WARNING" not in r.stdout + r.stderr
    site = tmp_path / "site"
    assert "--ray-runtime-env" in (site / "reference" / "cli" / "index.html").read_text("utf-8")
    assert "speak.qa" in (site / "reference" / "recipe" / "index.html").read_text("utf-8")
    assert (site / "benchmarks" / "paper_plan.png").read_bytes()[:4] == b"\x89PNG"
