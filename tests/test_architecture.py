"""The code stays a place people want to live in: imports run one way, modules stay small."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

MAX_LINES = 400


def test_layers_contract_holds():
    """pyproject.toml's [tool.importlinter] layers: records < text, llm < sources < script < speech <
    oracle < dataset < runner < review, train, plan < doctor (and the CLI above all)."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is part of the dev extra"
    r = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "BROKEN" not in r.stdout and "0 broken" in r.stdout


def test_no_module_over_400_lines():
    big = {str(p.relative_to(ROOT)): n for p in [*ROOT.glob("kame_data/**/*.py"), *ROOT.glob("cli/**/*.py")]
           if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES}
    assert not big, f"split these modules: {big}"


def test_test_fakes_are_not_shipped():
    shipped = {p.name for p in ROOT.glob("kame_data/**/*.py")}
    assert not shipped & {"loopback_server.py", "synthetic.py"}
