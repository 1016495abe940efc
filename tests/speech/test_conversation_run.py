"""Conversations through `kame-data run`: the quickstart's turn-taking, figures and export, and a
recipe of 20 dialogues that casts every voice of the default user pool (one per speaker), each intelligible (median
WER at most 5% per voice), with every voice and its share on the card."""

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml

from kame_data.speech.voices import available
from tests.conftest import CLI, FIXTURES
from tests.loopback_server import LoopbackServer
from tests.parity import floor_reference
from tests.quickstart_identity import rows

pytestmark = pytest.mark.slow


def test_quickstart_turn_taking_figures_and_export(quickstart_out, tmp_path):
    manifest = json.loads((quickstart_out / "manifest.json").read_text())
    q = manifest["quality"]
    assert q["turn_taking"]["dialogues_with_backchannel_or_overlap"] >= 0.3
    assert q["reply_gap_s"]["p95"] <= manifest["recipe"]["speak"]["reply"]["max_p95"]
    assert q["acoustics"]["dialogues"] == 3 and set(q["distinct_voices"]) == {"assistant", "user"}
    card = (quickstart_out / "README.md").read_text()
    assert "### Voices" in card and "### Turn-taking and reply timing" in card and "DNSMOS" in card
    for row in rows(quickstart_out):
        for t in row["turns"]:  # per-turn figures in the rows
            assert t["wer"] is not None and 1 <= t["dnsmos"] <= 5 and t["vad_word_share"] is not None
        assert row["acoustics"]["snr_db"] is not None
    from kame_data.review.html import build_page

    page, _ = build_page(quickstart_out, audio="none")  # the review page shows the figures per turn
    assert "DNSMOS" in page and "dB SNR" in page
    dest = tmp_path / "kame"
    r = subprocess.run(CLI + ["export", "kame-finetune", str(quickstart_out), str(dest)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with_bc = 0
    reference = floor_reference(quickstart_out, dest, manifest["recipe"]["oracle"]["interval"])
    for row in rows(quickstart_out):
        text = json.loads((dest / "text" / f"{row['id']}.json").read_text())
        assert [list(w) for w in text] == [["speaker", "word", "start", "end"]] * len(text)
        assert [(w["start"], w["end"]) for w in text] == sorted((w["start"], w["end"]) for w in text)
        flagged = [w for w in row["words"] if w["backchannel"]]
        with_bc += bool(flagged)
        assert len(text) == len(row["words"])  # backchannels are in the exported word stream
        # oracle_raw = the reference rules on text/ without the backchannel entries (tests/parity.py)
        expected = reference[row["id"]]
        got = json.loads((dest / "oracle_raw" / f"{row['id']}.json").read_text())
        keys = ("timestamp_ms", "conversation_context", "total_word_count", "trigger_word", "current_spoken_ratio",
                "channel", "hint")
        assert [{k: e[k] for k in keys} for e in got] == [{k: e[k] for k in keys} for e in expected]
    assert with_bc >= 1


# The catalogue's default user pool (`users`): one voice per speaker, each heard right (docs/design.md "Voices").
USER_POOL = "users"


def _recipe(path: Path, base_url: str) -> Path:
    raw = {"name": "voices20", "seed": 16, "batch_size": 4,
           "sources": [{"kind": "gsm8k", "path": str(FIXTURES / "gsm8k_test_200.jsonl"), "limit": 11},
                       {"kind": "mmlu_pro", "path": str(FIXTURES / "mmlu_pro_test_300.jsonl"), "limit": 11}],
           "speak": {"assistant": "joe", "user": USER_POOL, "balance": "sex",
                     "screen": {"enabled": True, "max_wer": 0.05, "sentences": 4},
                     "qa": {"enabled": True, "max_wer": 0.2}, "answer": {"enabled": True}},
           "oracle": {"backend": {"kind": "openai", "model": "loopback", "base_url": base_url, "concurrency": 16}},
           "publish": {"rows_per_shard": 20}}
    path.write_text(yaml.safe_dump(raw), "utf-8")
    return path


def test_twenty_dialogues_cast_the_whole_default_user_pool(tmp_path):
    """The default user pool casts every one of its voices (one per speaker, docs/design.md "Voices") and
    the assistant keeps one voice; every voice used has a median WER of at most 5%, and the card lists
    them with shares."""
    out = tmp_path / "out"
    with LoopbackServer() as srv:
        r = subprocess.run(CLI + ["run", str(_recipe(tmp_path / "r.yaml", srv.base_url)), "--out", str(out), "-q"],
                           capture_output=True, text=True, timeout=5400)
    assert r.returncode == 0, r.stderr[-3000:]
    got = rows(out)
    rejects = [json.loads(x) for x in (out / "rejects.jsonl").read_text().splitlines() if x]
    # 22 items: at least 20 are rendered (a row, or a speak reject after its voices were tried), and
    # what is not is a script reject (a question too long to ask); at least 18 become rows
    rendered = len(got) + len([x for x in rejects if x["stage"] == "speak"])
    assert rendered >= 20 and rendered + len([x for x in rejects if x["stage"] == "script"]) == 22, rejects
    assert len(got) >= 18, rejects
    wers = defaultdict(list)
    for row in got:
        for t in row["turns"]:
            wers[(t["role"], t["voice"])].append(t["wer"])
    assistant = {v for role, v in wers if role == "assistant"}
    users = {v for role, v in wers if role == "user"}
    assert assistant == {"joe"} and users == {v.label for v in available("users")} and len(users) >= 4, wers.keys()
    for key, xs in wers.items():
        assert np.median(xs) <= 0.05, (key, xs)
    manifest = json.loads((out / "manifest.json").read_text())
    card = (out / "README.md").read_text()
    for voice, v in manifest["quality"]["voices"].items():
        assert f"| {voice} | {v['role']} | {v['turns']} |" in card and v["median_wer"] <= 0.05
    assert abs(sum(v["share"] for v in manifest["quality"]["voices"].values() if v["role"] == "user") - 1) < 1e-3
