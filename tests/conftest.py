import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Benchmark rows the tests read: redistributable copies plus HSSBench-style rows written for this
# project (see tests/data/sources/SOURCES.md). They live in the repository, so no test skips.
FIXTURES = Path(__file__).resolve().parent / "data" / "sources"


def _resources() -> str:
    import shutil
    import tempfile

    free = shutil.disk_usage(tempfile.gettempdir()).free / 2**30
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES") / 2**30
    return f"temp folder {tempfile.gettempdir()}: {free:.1f} GiB free; memory available: {mem:.1f} GiB"


def pytest_sessionstart(session):
    """Disk and memory at the start and the end, printed even under -q (CI's log): a run that fails
    from the middle on for want of either says so."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"at the start: {_resources()}; {os.cpu_count()} cores")


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"at the end: {_resources()}")


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    assert FIXTURES.is_dir(), f"test data missing: {FIXTURES}"
    return FIXTURES


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    """Tests never read or write the user's LLM cache."""
    os.environ["KAME_DATA_CACHE_DIR"] = str(tmp_path_factory.mktemp("llm-cache"))


CLI = [sys.executable, "-m", "kame_data.cli.main"]


def pytest_collection_modifyitems(config, items):
    """`make test` never builds the quickstart: a test that asks for `quickstart_out` (minutes of
    real TTS and LLM work) must be marked slow, or collection stops with its name."""
    unmarked = [item.nodeid for item in items
                if "quickstart_out" in getattr(item, "fixturenames", ()) and item.get_closest_marker("slow") is None]
    if unmarked:
        raise pytest.UsageError("these tests build the quickstart; mark them @pytest.mark.slow:\n  "
                                + "\n  ".join(unmarked))


@pytest.fixture(scope="session")
def quickstart_out(tmp_path_factory) -> Path:
    """The bundled quickstart on 3 items (one per source style), run once per session through the CLI."""
    out = tmp_path_factory.mktemp("qs") / "out"
    r = subprocess.run(CLI + ["run", "quickstart", "--out", str(out), "--limit", "3", "--quiet"],
                       capture_output=True, text=True, timeout=2400, env=os.environ.copy())
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"dataset: {out.resolve()}" in r.stdout
    return out


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> tuple[Path, Path]:
    """(dataset, training OUT): a 3-dialogue voiced synthetic dataset (tests/synthetic.py) and
    `kame-data train train_tiny` on it for 4 steps, run once per session through the CLI."""
    from kame_data.train import missing_dependencies

    if missing_dependencies():
        pytest.skip(f"kame_data.train needs {', '.join(missing_dependencies())}")
    from tests.synthetic import spoken_dataset

    root = tmp_path_factory.mktemp("tiny_run")
    dataset = spoken_dataset(root / "dataset", 3)
    out = root / "train"
    r = subprocess.run(CLI + ["train", "train_tiny", "--dataset", str(dataset), "--out", str(out), "--max-steps", "4",
                              "--quiet"], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    return dataset, out
