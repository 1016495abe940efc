"""`kame-data inspect` through the CLI: every row of the real quickstart, the selection options,
and untrusted text that must neither restyle nor drive the terminal."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from kame_data.cli.main import app
from typer.testing import CliRunner

from kame_data.oracle.metrics import clean_text
from tests.review.test_review import tiny_dataset

WIDE = {"COLUMNS": "260"}  # wide enough that no short prefix of a prediction wraps


def inspect(*args: str):
    return CliRunner().invoke(app, ["inspect", *map(str, args)], env=WIDE)


def _rows(out) -> list[dict]:
    return [r for p in sorted((out / "data").glob("*.parquet"))
            for r in pq.read_table(p, columns=["id", "source", "turns", "oracle"]).to_pylist()]


@pytest.mark.slow
def test_inspect_every_quickstart_row(quickstart_out):
    rows = _rows(quickstart_out)
    assert len(rows) == 3
    for row in rows:
        r = inspect(quickstart_out, "--id", row["id"])
        assert r.exit_code == 0, r.output
        out = r.output
        assert row["id"] in out and "turns" in out and "oracle ladder" in out and "true reply:" in out
        for turn in row["turns"]:
            assert turn["voice"] in out
        for e in row["oracle"]:
            assert f"{e['timestamp_ms'] / 1000:.1f}" in out
            assert clean_text(e["prediction"])[:16] in out, e["prediction"]


@pytest.mark.slow
def test_inspect_selection(quickstart_out):
    rows = _rows(quickstart_out)
    ids = [r["id"] for r in rows]
    r = inspect(quickstart_out)
    assert r.exit_code == 0 and ids[0] in r.output  # the first dialogue by default
    r = inspect(quickstart_out, "--random", 2, "--seed", 7)
    assert r.exit_code == 0 and sum(i in r.output for i in ids) == 2
    assert inspect(quickstart_out, "--random", 2, "--seed", 7).output == r.output  # the seed repeats it
    gsm = next(row for row in rows if row["source"] == "gsm8k")
    r = inspect(quickstart_out, "--source", "gsm8k", "--random", 5)
    assert r.exit_code == 0 and gsm["id"] in r.output and sum(i in r.output for i in ids) == 1
    r = inspect(quickstart_out, "--id", ids[0], "--level", 0)
    assert r.exit_code == 0
    for e in rows[0]["oracle"]:
        shown = clean_text(e["prediction"])[:16] in r.output
        assert shown or e["level"] != 0


def test_inspect_level_filter(tmp_path):
    out = tiny_dataset(tmp_path / "tiny")
    r = inspect(out, "--id", "tiny-1-v0", "--level", 5)
    assert r.exit_code == 0, r.output
    assert "it's four" in r.output and "i think it is" not in r.output  # levels 1 and 2 hidden
    r = inspect(out, "--id", "tiny-1-v0", "--level", 1)
    assert "i think it is 1" in r.output and "i think it is 2" not in r.output


def test_inspect_errors(tmp_path):
    out = tiny_dataset(tmp_path / "tiny")
    r = inspect(out, "--id", "nope")
    assert r.exit_code == 1 and "no dialogue with id 'nope'" in r.output and "tiny-0-v0" in r.output
    r = inspect(out, "--source", "mt_bench")
    assert r.exit_code == 1 and "sources: gsm8k, hssbench, mmlu_pro" in r.output
    r = inspect(out, "--level", 0)
    assert r.exit_code == 1 and "level 0" in r.output
    assert inspect(out, "--id", "tiny-0-v0", "--random", 1).exit_code == 2
    assert inspect(out, "--level", 7).exit_code == 2
    r = inspect(tmp_path)
    assert r.exit_code == 1 and "manifest.json is missing" in r.output


def test_inspect_shows_untrusted_text_literally(tmp_path):
    evil = "[bold red]loud[/bold red] \x1b[2J\x1b]0;owned\x07 [link=https://x]y[/link]"

    def plant(row):
        row["oracle"][0]["prediction"] = evil
        row["turns"][0]["text"] = "Q: [blink]hi[/blink]\x1b[31m"

    out = tiny_dataset(tmp_path / "tiny", edit=plant)
    r = inspect(out, "--id", "tiny-0-v0")
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "\x07" not in r.output
    assert "[bold red]loud[/bold red] \\x1b[2J\\x1b]0;owned\\x07 [link=https://x]y[/link]" in r.output
    assert "Q: [blink]hi[/blink]\\x1b[31m" in r.output
