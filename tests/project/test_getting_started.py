"""docs/getting-started.md cannot rot: its commands are taken from the page itself and run, in order,
on a clean checkout of this commit. A fenced block with a title (```yaml title="my_recipe.yaml"```)
is written to that file; a ```bash block's lines are run; other blocks are only read."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "getting-started.md"
BLOCK = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```$', re.S | re.M)


def steps(page: str) -> list[tuple[str, str]]:
    """("file", name + "\\n" + text) and ("run", command) in page order."""
    out: list[tuple[str, str]] = []
    for lang, title, body in BLOCK.findall(page):
        if title:
            out.append(("file", f"{title}\n{body}"))
        elif lang == "bash":
            out += [("run", line.strip()) for line in body.splitlines() if line.strip() and not line.startswith("#")]
    return out


def test_the_page_gives_commands_and_files():
    found = steps(PAGE.read_text("utf-8"))
    assert ("run", "make demo") == found[0]
    files = [s.split("\n", 1)[0] for kind, s in found if kind == "file"]
    assert files == ["my_items.jsonl", "my_recipe.yaml", "load_first.py"]
    runs = [s for kind, s in found if kind == "run"]
    assert any(r.startswith(".venv/bin/kame-data run my_recipe.yaml") for r in runs)
    assert runs[-1] == ".venv/bin/python load_first.py"


def test_the_pages_recipe_plans_without_a_warning(tmp_path):
    """The fast tier's share of the page: its own files, and `plan` over its recipe (no `fields:`
    entry that matches no row)."""
    from kame_data.plan.planner import plan_recipe
    from kame_data.recipe import load_recipe

    for kind, s in steps(PAGE.read_text("utf-8")):
        if kind == "file":
            name, text = s.split("\n", 1)
            (tmp_path / name).write_text(text)
    plan = plan_recipe(load_recipe(tmp_path / "my_recipe.yaml"))
    assert plan.warnings == [] and plan.sources[0].items == 5 and plan.sources[0].kept == 5


def _clean_checkout(dest: Path) -> Path:
    """This commit, cloned; the environment is this checkout's .venv, and the clone's own lock files
    are dated before its setup stamp, so `make` takes the environment as set up (it is: the same locks).
    The commands import the clone's code whichever checkout the environment was installed from: its
    kame_data through PYTHONPATH, and its cli/ as kame_data.cli through a link, where a wheel puts it."""
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(dest)], check=True, timeout=300)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", head], check=True)
    (dest / ".venv").symlink_to((ROOT / ".venv").resolve())
    (dest / "kame_data" / "cli").symlink_to(Path("..") / "cli")
    for name in ("pyproject.toml", "requirements/setup.lock", "requirements/no-deps.txt"):
        os.utime(dest / name, (0, 0))
    return dest


@pytest.mark.slow  # make demo builds the quickstart, then the page's own five-item dataset: minutes
def test_the_getting_started_page_runs_on_a_clean_checkout(tmp_path):
    checkout = _clean_checkout(tmp_path / "checkout")
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    for kind, s in steps(PAGE.read_text("utf-8")):
        if kind == "file":
            name, text = s.split("\n", 1)
            (checkout / name).write_text(text)
            continue
        r = subprocess.run(shlex.split(s), cwd=checkout, env=env, capture_output=True, text=True, timeout=1800)
        assert r.returncode == 0, f"{s}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert (checkout / "out" / "quickstart" / "review.html").is_file()
    assert (checkout / "out" / "my_first" / "README.md").is_file()
