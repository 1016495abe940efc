"""`kame-data doctor`: real engines in subprocesses; a broken model file and a native crash are
named with advice and a non-zero exit."""

from __future__ import annotations

import os
import subprocess

import pytest

from kame_data.doctor import CHECKS, Check, run_check
from tests.conftest import CLI, ROOT


def test_a_native_crash_is_caught_and_named():
    check = Check("crasher", (), "tests.crash_probe:segfault", advice="planted")
    out = run_check(check, {}, timeout=60)
    assert out.status == "crashed" and out.failed
    assert "SIGSEGV" in out.detail and "string_at" in out.detail  # where faulthandler saw it crash


def test_a_python_error_is_reported_with_its_message():
    out = run_check(Check("raiser", (), "tests.crash_probe:raise_error", advice="planted"), {}, timeout=60)
    assert out.status == "failed" and out.detail == "ValueError: planted failure"


@pytest.mark.slow
def test_broken_model_file_fails_llama_check_with_advice(tmp_path):
    model = tmp_path / "broken.gguf"
    model.write_bytes(b"GGUF" + os.urandom(4096))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: broken\nsources: [{{kind: gsm8k, path: x.jsonl}}]\n"
                      f"oracle: {{backend: {{kind: llamacpp, model_path: {model}}}}}\n", "utf-8")
    r = subprocess.run(CLI + ["doctor", "--recipe", str(recipe), "--only", "llama.cpp", "--only", "parquet"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 1, r.stdout + r.stderr
    row = next(line for line in r.stdout.splitlines() if "llama.cpp" in line and "│" in line)
    assert "failed" in row or "crashed" in row
    assert next(line for line in r.stdout.splitlines() if line.startswith("│ parquet")).count(" ok ") == 1
    assert "llama.cpp: a crash means llama-cpp-python was compiled for another CPU" in r.stdout
    assert "1 engine(s) failed: llama.cpp" in r.stdout


@pytest.mark.slow
def test_every_engine_passes_on_the_setup():
    """The doctor passes on the environment `make setup` builds (what `make demo` checks first)."""
    r = subprocess.run(CLI + ["doctor"], capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stdout + r.stderr
    for check in CHECKS:
        row = next(line for line in r.stdout.splitlines() if line.startswith(f"│ {check.name} "))
        assert " ok " in row, row
    assert "all engines work on this machine" in r.stdout
