"""An installed wheel (not the checkout) carries the CLI, the recipes and the schemas."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_wheel_in_fresh_venv(tmp_path, quickstart_out):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
                   check=True, timeout=600)
    wheel = next(dist.glob("kame_data-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=900)
    exe = venv / "bin" / "kame-data"
    outside = tmp_path / "elsewhere"  # run away from the checkout so nothing is imported from it
    outside.mkdir()
    help_ = subprocess.run([str(exe), "--help"], capture_output=True, text=True, cwd=outside)
    assert help_.returncode == 0 and "run" in help_.stdout and "validate" in help_.stdout
    ok = subprocess.run([str(exe), "validate", str(quickstart_out)], capture_output=True, text=True, cwd=outside)
    assert ok.returncode == 0, ok.stderr
    probe = subprocess.run(
        [str(py), "-c", "import kame_data, kame_data.cli.main; from kame_data.recipe import load_recipe; "
                        "r = load_recipe('quickstart'); print(kame_data.__file__); print(r.resolve(r.sources[0].path))"],
        capture_output=True, text=True, cwd=outside, check=True)
    module_file, source_file = probe.stdout.split()
    assert str(venv) in module_file and Path(source_file).is_file() and str(venv) in source_file
