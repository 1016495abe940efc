"""Oracle arrival through `kame-data run` (docs/design.md, "Oracle arrival"): the quickstart's
finished ladders re-published under a hosted-model latency model, from its checkpoints (no step
recomputes, no LLM call): rows gain the arrival column and keep every other column, the card's
median delay matches what the preset's distributions expect, a second run gives the same data,
so does a run whose speech is rendered again by one worker instead of two, and the kame_finetune export times events by arrival and says so."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kame_data.oracle.latency import PRESETS
from kame_data.train.streams import build_events
from tests import chromium
from tests.conftest import CLI
from tests.quickstart_identity import rows

pytestmark = pytest.mark.slow


def _republish(quickstart_out: Path, dest: Path, latency, one_worker: bool = False) -> subprocess.CompletedProcess:
    """The quickstart copied to dest and run again under `latency`; `one_worker`: its speech and later
    checkpoints removed, so speech, quality and acoustics are computed again in one worker process
    each (the session quickstart used one per core) and the oracle asks again (the session's LLM cache
    answers)."""
    shutil.copytree(quickstart_out, dest)
    raw = yaml.safe_load(Path("recipes/quickstart.yaml").read_text())
    raw.setdefault("oracle", {})["latency"] = latency
    if one_worker:
        for step in (dest / ".checkpoints").iterdir():
            if step.name != "script":
                shutil.rmtree(step)
        raw["workers"] = 1
        raw["speak"]["workers"] = 1
    for source in raw["sources"]:  # the copy lives elsewhere: its source files by absolute path
        if "path" in source:
            source["path"] = str((Path("recipes") / source["path"]).resolve())
    recipe = dest.parent / f"{dest.name}.yaml"
    recipe.write_text(yaml.safe_dump(raw))
    return subprocess.run(CLI + ["run", str(recipe), "--out", str(dest), "--limit", "3", "--quiet"],
                          capture_output=True, text=True, timeout=1200)


def test_a_hosted_preset_times_every_event_and_changes_nothing_else(quickstart_out, tmp_path):
    out = tmp_path / "fast"
    r = _republish(quickstart_out, out, "hosted-fast")
    assert r.returncode == 0, r.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    before, after = rows(quickstart_out), rows(out)
    assert [{k: v for k, v in row.items() if k != "oracle_arrival"} for row in after] == before
    for row in after:
        arrived = row["oracle_arrival"]
        assert len(arrived) == len(row["oracle"])
        for e, a in zip(row["oracle"], arrived):
            assert a["ideal_ms"] == e["timestamp_ms"] and a["heard_ms"] >= a["ideal_ms"] + 500
            assert a["requested_ms"] >= a["heard_ms"] and a["first_token_ms"] > a["requested_ms"]
            if a["frame"] is not None:
                assert a["read"] + a["late"] + a["cut"] == len(a["piece_ms"])
    arrival = manifest["oracle_arrival"]
    expected = PRESETS["hosted-fast"].expected_delay_s()
    assert abs(arrival["delay_s"]["median"] - expected) <= 0.1 * expected, (arrival, expected)
    card = (out / "README.md").read_text()
    assert "| oracle arrival model | hosted-fast" in card and f"median {arrival['delay_s']['median']}" in card
    assert subprocess.run(CLI + ["validate", str(out)], capture_output=True, text=True).returncode == 0

    again = tmp_path / "fast2"
    assert _republish(quickstart_out, again, "hosted-fast").returncode == 0
    assert rows(again) == after  # the same draws, run to run
    shutil.rmtree(again)
    one = tmp_path / "fast1"
    r = _republish(quickstart_out, one, "hosted-fast", one_worker=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((one / "manifest.json").read_text())["computed"]["speak"] >= len(after)
    assert rows(one) == after  # rendered by one worker instead of two: the same rows, arrival included
    shutil.rmtree(one)

    dest = tmp_path / "kame"
    r = subprocess.run(CLI + ["export", "kame-finetune", str(out), str(dest)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Oracle timing: **arrival**" in (dest / "README.md").read_text()
    for row in after:
        got = json.loads((dest / "oracle_raw" / f"{row['id']}.json").read_text())
        played = [(e, a) for e, a in zip(row["oracle"], row["oracle_arrival"]) if a["frame"] is not None]
        assert [(g["timestamp_ms"], g["ideal_timestamp_ms"]) for g in got] == \
            [(a["piece_ms"][0], e["timestamp_ms"]) for e, a in played]
        assert all(g["timestamp_ms"] > g["ideal_timestamp_ms"] for g in got)
        # kame_finetune's tokenize_oracle rules, as the trainer ports them, read the export as it is
        words = json.loads((dest / "text" / f"{row['id']}.json").read_text())
        ev, dropped = build_events(got, 0, "A", words, int(row["duration"] * 12.5) + 1,
                                   lambda t: list(range(len(t.split()))))
        assert len(ev) >= 1 and len(ev) + sum(dropped.values()) == len(got)


def test_ideal_latency_leaves_the_rows_as_they_were(quickstart_out, tmp_path):
    out = tmp_path / "ideal"
    r = _republish(quickstart_out, out, "ideal")
    assert r.returncode == 0, r.stderr[-3000:]
    assert rows(out) == rows(quickstart_out)
    assert "oracle_arrival" not in json.loads((out / "manifest.json").read_text())
    dest = tmp_path / "kame"
    assert subprocess.run(CLI + ["export", "kame-finetune", str(out), str(dest)]).returncode == 0
    assert "Oracle timing: **ideal**" in (dest / "README.md").read_text()
    bad = subprocess.run(CLI + ["export", "kame-finetune", str(out), str(tmp_path / "k2"), "--timing", "arrival"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "no oracle arrival times" in bad.stderr


@pytest.mark.skipif(not chromium.available(), reason=chromium.SKIP_REASON)
def test_the_review_page_shows_both_timings(quickstart_out, tmp_path):
    from tests.review.test_review import _open, page_data

    out = tmp_path / "slow"
    assert _republish(quickstart_out, out, "hosted-slow").returncode == 0
    page = tmp_path / "review.html"
    r = subprocess.run(CLI + ["review", str(out), "-o", str(page), "--audio", "none"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    data = page_data(page.read_text("utf-8"))
    # a slow back-end: many replies are cancelled before they answer (KAME's 7 streams), some play
    i, d = next((i, d) for i, d in enumerate(data["dialogues"]) if any(e.get("arrival") for e in d["events"]))
    played = [e for e in d["events"] if e.get("arrival") is not None]
    assert all(e["arrival"] > e["t"] and "read" in e["served"] for e in played)
    with chromium.Browser(width=1280, height=900) as b:
        _open(b, page)
        assert b.eval(f"document.querySelectorAll('#card-{i} .mk-row .mk:not(.arrival)').length") == len(d["events"])
        assert b.eval(f"document.querySelectorAll('#card-{i} .arrival-row .mk.arrival').length") == len(played)
        left = b.eval(f"parseFloat(document.querySelector('#card-{i} .arrival-row .mk.arrival').style.left)")
        first = b.eval(f"parseFloat(document.querySelector('#card-{i} .mk-row .mk').style.left)")
        assert left > first  # a reply reaches the front-end after its ladder time
        assert b.errors == []
