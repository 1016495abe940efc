"""Bad input rows are rejects, not crashes: real GSM8K rows mixed with the broken lines a real file
gets (cut short, not an object, a byte that is not UTF-8, not JSON, a BOM), read by the sources
step and by `kame-data run`; `max_bad_rows` stops a run with one line naming the first bad line."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from kame_data.recipe import SourceSpec
from kame_data.records import Reject, SourceItem
from kame_data.sources import load_source
from kame_data.sources.rows import SourceError
from tests.conftest import CLI, FIXTURES

BOM = b"\xef\xbb\xbf"


def mixed_file(path: Path, good: int = 100) -> tuple[dict[int, str], int]:
    """`good` real GSM8K rows with four broken lines and two BOMs among them.

    Returns {line number: reason} of the broken lines, and how many rows are good (the BOM rows
    are good)."""
    rows = (FIXTURES / "gsm8k_test_200.jsonl").read_bytes().splitlines()[:good]
    lines: list[bytes] = []
    broken: dict[int, str] = {}
    for k, row in enumerate(rows):
        if k == 0:
            row = BOM + row  # a file saved by an editor that writes a byte-order mark
        if k == 6:
            row = BOM + row  # two files concatenated: the second's BOM mid-file
        if k == 3:
            lines.append(row[: len(row) // 2])  # a line cut short (a partial download)
            broken[len(lines)] = "truncated_json"
            continue
        if k == 9:
            lines.append(row.replace(b"How many", b"How \xff\xfe many", 1) if b"How many" in row
                         else row[:20] + b"\xff" + row[20:])  # latin-1 bytes in a UTF-8 file
            broken[len(lines)] = "invalid_utf8"
            continue
        lines.append(row)
        if k == 5:
            lines.append(b'["a list", "not an object"]')
            broken[len(lines)] = "not_an_object"
        if k == 14:
            lines.append(b"{question: 'single quotes and no quotes on keys'}")
            broken[len(lines)] = "invalid_json"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return broken, good - 2  # the cut row and the non-UTF-8 row are lost


def test_each_bad_line_is_a_reject_with_file_line_and_reason(tmp_path):
    path = tmp_path / "gsm8k_damaged.jsonl"
    broken, good = mixed_file(path)
    out = list(load_source(SourceSpec(kind="gsm8k", path=str(path))))
    items = [o for o in out if isinstance(o, SourceItem)]
    rejects = {r.id: r for r in out if isinstance(r, Reject)}
    assert len(items) == good
    assert {k: r.reason for k, r in rejects.items()} == {f"gsm8k_damaged.jsonl:{n}": reason
                                                         for n, reason in broken.items()}
    for n, r in ((int(k.split(":")[1]), r) for k, r in rejects.items()):
        assert r.detail.startswith(f"{path}:{n}: ") and not r.transient
    # the rows around the damage are read whole: the BOM rows are the file's first and seventh items
    first = json.loads((FIXTURES / "gsm8k_test_200.jsonl").read_text("utf-8").splitlines()[0])
    assert items[0].question == first["question"].strip()
    assert rejects["gsm8k_damaged.jsonl:11"].detail.endswith("is not UTF-8 text")


def test_max_bad_rows_as_a_count_or_a_fraction(tmp_path):
    path = tmp_path / "d.jsonl"
    broken, good = mixed_file(path)
    first = min(broken)

    def read(limit):
        return list(load_source(SourceSpec(kind="gsm8k", path=str(path), max_bad_rows=limit)))

    assert sum(isinstance(o, SourceItem) for o in read(4)) == good  # exactly as many as allowed
    with pytest.raises(SourceError, match=rf"4 malformed .*max_bad_rows \(3\); first: {path}:{first}: .*"
                                          r"\[truncated_json\]"):
        read(3)
    with pytest.raises(SourceError, match=rf"max_bad_rows \(0\); first: {path}:{first}:"):
        read(0)
    assert sum(isinstance(o, SourceItem) for o in read(0.05)) == good  # the default: 4 of 102 lines is 3.9%
    with pytest.raises(SourceError, match=r"4 malformed of 102 lines read, more than max_bad_rows \(3% of the lines\)"):
        read(0.03)
    # a fraction judges the whole file: a read cut short by `limit` is not held to it
    partial = list(load_source(SourceSpec(kind="gsm8k", path=str(path), limit=3, max_bad_rows=0.01)))
    assert sum(isinstance(o, SourceItem) for o in partial) == 3


def test_json_file_with_bom_and_a_non_object(tmp_path):
    rows = [json.loads(line) for line in (FIXTURES / "gsm8k_test_200.jsonl").read_text("utf-8").splitlines()[:3]]
    path = tmp_path / "g.json"
    path.write_bytes(BOM + json.dumps(rows[:2] + ["stray string"] + rows[2:]).encode())
    out = list(load_source(SourceSpec(kind="gsm8k", path=str(path), max_bad_rows=1)))
    assert sum(isinstance(o, SourceItem) for o in out) == 3
    assert [(r.id, r.reason) for r in out if isinstance(r, Reject)] == [("g.json:3", "not_an_object")]
    path.write_bytes(json.dumps(rows).encode()[:-10] + b"\xff]")
    with pytest.raises(SourceError, match=r"g.json: byte \d+ is not UTF-8"):
        list(load_source(SourceSpec(kind="gsm8k", path=str(path))))


def _recipe(tmp_path: Path, source: Path, **spec) -> Path:
    raw = {"name": "damaged", "seed": 0, "sources": [{"kind": "gsm8k", "path": str(source), **spec}]}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_run_goes_on_past_bad_lines_and_lists_them(tmp_path):
    source = tmp_path / "gsm8k_damaged.jsonl"
    broken, good = mixed_file(source)
    out = tmp_path / "out"
    r = subprocess.run(CLI + ["run", str(_recipe(tmp_path, source)), "--out", str(out), "--until", "script", "-q"],
                       capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    scripts = (out / "scripts.jsonl").read_text().splitlines()
    assert len(scripts) == good
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert {x["id"]: x["reason"] for x in rejects} == {f"{source.name}:{n}": why for n, why in broken.items()}


def test_max_bad_rows_zero_stops_with_one_line(tmp_path):
    source = tmp_path / "gsm8k_damaged.jsonl"
    broken, _ = mixed_file(source)
    out = tmp_path / "out"
    r = subprocess.run(CLI + ["run", str(_recipe(tmp_path, source, max_bad_rows=0)), "--out", str(out), "-q"],
                       capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and not r.stdout.strip()
    first = min(broken)
    assert lines[0].startswith("error: source gsm8k") and f"{source}:{first}:" in lines[0], lines[0]
    assert "max_bad_rows (0)" in lines[0]
    log = (out / "run.log").read_text()
    assert "Traceback" in log and "SourceError" in log  # the traceback is kept, in the log


def test_unreadable_source_is_one_line_not_a_traceback(tmp_path):
    source = tmp_path / "g.json"
    source.write_bytes(b'[{"question": "caf\xe9?", "answer": "#### 1"}]')  # latin-1, not UTF-8
    r = subprocess.run(CLI + ["run", str(_recipe(tmp_path, source)), "--out", str(tmp_path / "o"), "-q"],
                       capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"error: {source}: byte 18 is not UTF-8 text"]
