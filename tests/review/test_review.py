"""The review page, flags and `publish --exclude`: unit tests on a tiny synthetic dataset, then the
page in real headless Chromium (console clean, cards, markers, flags saved and honoured, and text
from sources and LLMs that stays text)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import shutil
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf
from kame_data.cli.main import app
from typer.testing import CliRunner

from kame_data.audio import wav_bytes
from kame_data.dataset.card import write_card
from kame_data.dataset.exclude import REASON
from kame_data.dataset.exclude import exclude_rows as publish_excluding
from kame_data.dataset.folder import DatasetError as ReviewError
from kame_data.dataset.rows import arrow_schema
from kame_data.dataset.validate import validate_dataset
from kame_data.oracle.ladder import ladder
from kame_data.oracle.metrics import reply_spans, rouge_l, token_f1, true_replies
from kame_data.records import Word
from kame_data.review.flags import FlagsError, load_flag_notes, load_flags
from kame_data.review.html import build_page, script_json
from tests import chromium

# The worked example of docs/design.md ("Oracle events"): B asks, A answers "it's four".
WORDS = [("B", "what", 0.0, 0.4), ("B", "is", 0.4, 0.7), ("B", "two", 0.7, 0.9), ("B", "plus", 0.9, 1.3),
         ("B", "two", 1.3, 1.6), ("A", "it's", 2.0, 2.3), ("A", "four", 2.3, 2.7)]
SOURCES = ("gsm8k", "mmlu_pro", "hssbench")
SR = 24000
SECONDS = 3.0


def tiny_row(i: int) -> dict:
    """A valid row without TTS: the worked example over quiet noise, its real ladder, made-up guesses."""
    words = [Word(*w) for w in WORDS]
    events = []
    for k, s in enumerate(ladder(words)):
        events.append({
            "timestamp_ms": s.timestamp_ms, "conversation_context": s.conversation_context,
            "prediction": s.true_reply if s.level == 5 else f"i think it is {k + i}",
            "total_word_count": s.total_word_count, "trigger_word": s.trigger_word,
            "recent_words": s.recent_words, "current_spoken_ratio": s.current_spoken_ratio,
            "channel": s.channel, "hint": s.hint, "level": s.level})
    rng = np.random.default_rng(i)
    pcm = (rng.standard_normal((int(SECONDS * SR), 2)) * 300).astype(np.int16)
    return {
        "id": f"tiny-{i}-v0", "item_id": f"tiny-{i}", "source": SOURCES[i % 3], "category": "math", "variant": 0,
        "duration": SECONDS, "sample_rate": SR, "audio": {"bytes": wav_bytes(pcm, SR), "path": f"tiny-{i}-v0.wav"},
        "turns": [{"role": "user", "speaker": "B", "text": "What is 2+2?", "spoken": "what is two plus two",
                   "start": 0.0, "end": 1.6, "voice": "espeak:en-us"},
                  {"role": "assistant", "speaker": "A", "text": "It's 4.", "spoken": "it's four",
                   "start": 2.0, "end": 2.7, "voice": "piper:joe"}],
        "words": [{"speaker": s, "word": w, "start": a, "end": b, "backchannel": False} for s, w, a, b in WORDS],
        "oracle": events,
    }


def tiny_dataset(out: Path, n: int = 3, edit: Optional[Callable[[dict], None]] = None) -> Path:
    """A kame-data output folder (two shards, manifest, card, rejects) that `validate` accepts."""
    import pyarrow as pa

    rows = [tiny_row(i) for i in range(n)]
    for r in rows:
        if edit:
            edit(r)
    (out / "data").mkdir(parents=True)
    halves = [rows[: (n + 1) // 2], rows[(n + 1) // 2:]]
    halves = [h for h in halves if h]
    shards = []
    for i, part in enumerate(halves):
        path = out / f"data/train-{i:05d}-of-{len(halves):05d}.parquet"
        pq.write_table(pa.Table.from_pylist(part, schema=arrow_schema()), path, compression="zstd")
        shards.append({"path": f"data/train-{i:05d}-of-{len(halves):05d}.parquet", "split": "train", "rows": len(part),
                       "bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    levels: dict[str, int] = {}
    for r in rows:
        for e in r["oracle"]:
            levels[str(e["level"])] = levels.get(str(e["level"]), 0) + 1
    per_source: dict[str, int] = {}
    for r in rows:
        per_source[r["source"]] = per_source.get(r["source"], 0) + 1
    manifest = {
        "format": "kame-data/1", "recipe": {"name": "tiny", "seed": 0}, "recipe_name": "tiny",
        "config_hash": "0123456789abcdef", "versions": {}, "counts": {"sources": n + 1, "samples": n},
        "per_source": dict(sorted(per_source.items())), "licenses": {s: "mit" for s in per_source},
        "rejects": {"needs_image": 1}, "timings": {}, "levels": dict(sorted(levels.items())),
        "audio_hours": round(n * SECONDS / 3600, 4), "oracle_events": sum(len(r["oracle"]) for r in rows),
        "shards": shards,
    }
    (out / "rejects.jsonl").write_text(json.dumps({"stage": "sources", "id": "tiny-x", "reason": "needs_image",
                                                   "detail": "question refers to 'map'"}) + "\n")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    write_card(out, manifest)
    return out


@pytest.fixture
def tiny(tmp_path) -> Path:
    return tiny_dataset(tmp_path / "tiny")


def page_data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="review-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


# ---------- metrics ----------

def test_token_f1():
    assert token_f1("It's four.", "it's four") == 1.0
    assert token_f1("the answer is four", "it's four") == pytest.approx(2 * (1 / 4) * (1 / 2) / (1 / 4 + 1 / 2))
    assert token_f1("nothing alike", "it's four") == 0.0
    assert token_f1("", "") == 1.0 and token_f1("", "four") == 0.0 and token_f1("four", "") == 0.0
    assert token_f1("Four, FOUR!", "four four") == 1.0  # multisets, case and punctuation ignored


def test_rouge_l_counts_word_order():
    assert rouge_l("It's four.", "it's four") == 1.0
    assert rouge_l("four it's", "it's four") == 0.5 and token_f1("four it's", "it's four") == 1.0
    assert rouge_l("the answer is four", "it's four") == pytest.approx(2 * (1 / 4) * (1 / 2) / (1 / 4 + 1 / 2))
    assert rouge_l("", "") == 1.0 and rouge_l("", "four") == 0.0 and rouge_l("x y", "z") == 0.0


def test_true_reply_at_every_level():
    """The reply is known at level 0 too (no hint shown), and equals the hint wherever one was shown."""
    row = tiny_row(0)
    events = row["oracle"]
    assert [e["level"] for e in events] == [1, 2, 5]  # the worked example
    level0 = dict(events[0], total_word_count=2, current_spoken_ratio=0.4, level=0, hint="")
    replies = true_replies(row["words"], [level0] + events)
    assert replies == ["it's four"] * 4
    assert reply_spans(row["words"], [level0]) == [[5, 6]]


# ---------- page (no browser) ----------

def test_script_json_cannot_close_its_element():
    payload = {"p": "</script><script>alert(1)</script><!-- & \u2028"}
    text = script_json(payload)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == payload


def test_page_is_self_contained(tiny):
    page, facts = build_page(tiny, audio="wav")
    assert facts == {"cards": 3, "dialogues": 3, "audio": "wav"}
    assert not re.search(r"(src|href)=\"(https?:)?//", page), "the page must not load anything from the network"
    # exactly one executable script, admitted by the CSP through its hash
    code = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(code) == 1
    digest = base64.b64encode(hashlib.sha256(code[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in page
    assert "innerHTML" not in code[0] and "insertAdjacentHTML" not in code[0]
    data = page_data(page)
    assert [d["id"] for d in data["dialogues"]] == ["tiny-0-v0", "tiny-1-v0", "tiny-2-v0"]
    assert data["summary"]["rejects"] == {"needs_image": 1}
    blocks = re.findall(r'<script type="application/json" id="audio-(\d+)">"([A-Za-z0-9+/=]+)"</script>', page)
    assert len(blocks) == 3
    assert base64.b64decode(blocks[0][1]) == tiny_row(0)["audio"]["bytes"]  # the dataset's exact WAV


def test_page_sample_and_audio_modes(tiny):
    page, facts = build_page(tiny, sample=2, seed=1, audio="opus")
    data = page_data(page)
    assert facts["cards"] == 2 and data["summary"]["dialogues"] == 3  # the summary covers every row
    b64 = re.search(r'id="audio-0">"([^"]+)"', page).group(1)
    pcm, sr = sf.read(io.BytesIO(base64.b64decode(b64)), always_2d=True)
    assert sr == SR and pcm.shape[1] == 2 and abs(len(pcm) / sr - SECONDS) < 0.05
    assert data["audio"] == {"mode": "opus", "mime": "audio/ogg"}
    page, facts = build_page(tiny, audio="none")
    assert facts["audio"] == "none" and 'id="audio-' not in page
    assert facts == {"cards": 3, "dialogues": 3, "audio": "none"}
    assert build_page(tiny)[1]["audio"] == "wav"  # auto: small pages keep the exact WAV
    with pytest.raises(ReviewError, match="audio must be one of"):
        build_page(tiny, audio="mp3")
    with pytest.raises(ReviewError, match="manifest.json is missing"):
        build_page(tiny / "data")


def test_review_cli(tiny, tmp_path):
    out = tmp_path / "page.html"
    r = CliRunner().invoke(app, ["review", str(tiny), "-o", str(out), "--sample", "2"])
    assert r.exit_code == 0, r.output
    assert "2 of 3 dialogues" in r.output and out.is_file()
    r = CliRunner().invoke(app, ["review", str(tmp_path / "nowhere"), "-o", str(out)])
    assert r.exit_code == 1 and "manifest.json is missing" in r.output


# ---------- flags ----------

def test_load_flags_formats(tmp_path):
    page = tmp_path / "page.json"
    page.write_text(json.dumps({"format": "kame-data-review-flags/1", "dataset": {"name": "x"},
                                "flagged": [{"id": "a", "note": "wrong answer"}, {"id": "b", "note": ""}]}))
    assert load_flags(page) == {"a", "b"}
    assert load_flag_notes(page) == {"a": "wrong answer", "b": ""}
    bare = tmp_path / "bare.json"
    bare.write_text('["c", "d"]')
    assert load_flags(bare) == {"c", "d"}
    short = tmp_path / "short.json"
    short.write_text('{"flagged": ["e"]}')
    assert load_flags(short) == {"e"}


@pytest.mark.parametrize("text, message", [
    ("{not json", "not a JSON file"),
    ('{"format": "other/1", "flagged": []}', "format 'other/1'"),
    ('{"ids": []}', "no 'flagged' list"),
    ('[{"note": "x"}]', r"flagged\[0\] has no row id"),
    ("[1]", r"flagged\[0\] has no row id"),
    ('"a"', "expected a JSON object"),
])
def test_load_flags_errors(tmp_path, text, message):
    p = tmp_path / "flags.json"
    p.write_text(text)
    with pytest.raises(FlagsError, match=message):
        load_flags(p)


def test_load_flags_missing_file(tmp_path):
    with pytest.raises(FlagsError, match="no such file"):
        load_flags(tmp_path / "absent.json")


# ---------- publish --exclude ----------

def _ids(out: Path) -> list[str]:
    m = json.loads((out / "manifest.json").read_text())
    return [i for s in m["shards"] for i in pq.read_table(out / s["path"], columns=["id"])["id"].to_pylist()]


def test_publish_in_place(tiny):
    validate_dataset(tiny)
    result = publish_excluding(tiny, {"tiny-1-v0": "made-up answer", "not-there": ""})
    assert result.excluded == ["tiny-1-v0"] and result.unknown == ["not-there"] and result.kept == 2
    report = validate_dataset(tiny)  # shard rows, sha256, counts, statistics and card all agree
    assert report.rows == 2 and _ids(tiny) == ["tiny-0-v0", "tiny-2-v0"]
    m = json.loads((tiny / "manifest.json").read_text())
    assert m["counts"]["samples"] == 2 and m["rejects"][REASON] == 1 and m["review"]["excluded"] == ["tiny-1-v0"]
    assert m["per_source"] == {"gsm8k": 1, "hssbench": 1}
    rejects = [json.loads(x) for x in (tiny / "rejects.jsonl").read_text().splitlines()]
    assert rejects[-1] == {"stage": "review", "id": "tiny-1-v0", "reason": REASON, "detail": "made-up answer"}
    assert not [p for p in tiny.rglob("*") if p.name.endswith(".tmp")]
    # again: nothing left to exclude, nothing rewritten
    before = (tiny / "manifest.json").read_text()
    assert publish_excluding(tiny, {"tiny-1-v0": ""}).excluded == []
    assert (tiny / "manifest.json").read_text() == before


@pytest.mark.parametrize("flagged, kept", [
    (["tiny-2-v0"], ["tiny-0-v0", "tiny-1-v0"]),  # the last shard empties
    (["tiny-0-v0", "tiny-1-v0"], ["tiny-2-v0"]),  # the first empties: the untouched one is renamed
])
def test_publish_drops_emptied_shards(tiny, flagged, kept):
    publish_excluding(tiny, {rid: "" for rid in flagged})
    m = json.loads((tiny / "manifest.json").read_text())
    assert [s["path"] for s in m["shards"]] == ["data/train-00000-of-00001.parquet"]
    assert sorted(p.name for p in (tiny / "data").iterdir()) == ["train-00000-of-00001.parquet"]
    assert _ids(tiny) == kept
    validate_dataset(tiny)


def test_publish_to_new_folder_via_cli(tiny, tmp_path):
    flags = tmp_path / "flags.json"
    flags.write_text(json.dumps({"format": "kame-data-review-flags/1", "flagged": [{"id": "tiny-0-v0", "note": ""}]}))
    dest = tmp_path / "reviewed"
    r = CliRunner().invoke(app, ["publish", str(tiny), "--exclude", str(flags), "--to", str(dest)])
    assert r.exit_code == 0, r.output
    assert "2 rows kept, 1 excluded" in r.output
    assert CliRunner().invoke(app, ["validate", str(dest)]).exit_code == 0
    assert _ids(dest) == ["tiny-1-v0", "tiny-2-v0"] and len(_ids(tiny)) == 3  # the source is untouched
    validate_dataset(tiny)
    r = CliRunner().invoke(app, ["publish", str(tiny), "--exclude", str(flags), "--to", str(dest)])
    assert r.exit_code == 1 and "not empty" in r.output


def test_publish_refuses(tiny, tmp_path):
    with pytest.raises(ReviewError, match="every row"):
        publish_excluding(tiny, {f"tiny-{i}-v0": "" for i in range(3)})
    validate_dataset(tiny)  # untouched
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    r = CliRunner().invoke(app, ["publish", str(tiny), "--exclude", str(bad)])
    assert r.exit_code == 1 and "not a JSON file" in r.output


# ---------- in Chromium ----------

needs_chromium = pytest.mark.skipif(not chromium.available(), reason=chromium.SKIP_REASON)


def _open(b: chromium.Browser, page: Path) -> None:
    b.navigate(page.resolve().as_uri())
    deadline = time.monotonic() + 30
    while b.eval("document.body.dataset.ready") != "1":
        assert time.monotonic() < deadline, "cards never finished rendering"
        time.sleep(0.05)
    b.drain(0.3)


@pytest.mark.slow
@needs_chromium
def test_page_in_chromium(quickstart_out, tmp_path):
    page = tmp_path / "review.html"
    r = CliRunner().invoke(app, ["review", str(quickstart_out), "-o", str(page)])
    assert r.exit_code == 0, r.output
    data = page_data(page.read_text("utf-8"))
    with chromium.Browser(width=1280, height=1000) as b:
        _open(b, page)
        assert b.eval("document.querySelectorAll('#cards .card').length") == 3
        assert b.eval("document.querySelectorAll('#summary svg').length") == 7  # token-F1, ROUGE-L, per source …
        assert b.eval("document.querySelectorAll('#c-rouge rect').length") == 6
        sources = len(data["summary"]["similarity_by_source"])
        assert sources and b.eval("document.querySelectorAll('#c-source-sim rect').length") == 2 * sources
        assert b.eval("[...document.querySelectorAll('#card-1 table.ladder th')].map(t => t.textContent)")[-2:] == \
            ["F1", "ROUGE-L"]
        d = data["dialogues"][1]
        i = next(k for k, e in enumerate(d["events"]) if e["level"] in (1, 2, 3))
        e = d["events"][i]
        b.click(f'#card-1 .mk[data-i="{i}"]')
        b.eval("""new Promise(r => { const a = document.querySelector('#card-1 audio');
                  a.readyState >= 1 ? r() : a.addEventListener('loadedmetadata', r, {once: true}); })""")
        shown = b.eval("""(() => { const c = document.getElementById('card-1');
            return {pred: c.querySelector('.cmp-box.pred .cmp-v').textContent,
                    truth: c.querySelector('.cmp-box.truth .cmp-v').textContent,
                    row: c.querySelector('tr.ev.sel .pred').textContent,
                    src: c.querySelector('audio').src.slice(0, 22),
                    t: c.querySelector('audio').currentTime, dur: c.querySelector('audio').duration}; })()""")
        assert shown["pred"] == e["prediction"] == shown["row"]
        assert shown["truth"] == d["replies"][e["reply"]] and shown["truth"]
        assert shown["src"] == "data:audio/wav;base64,"
        assert abs(shown["t"] - e["t"] / 1000) < 0.05 and abs(shown["dur"] - d["duration"]) < 0.05
        # filters
        b.eval(f"""(() => {{ const s = document.getElementById('f-source'); s.value = {json.dumps(d['source'])};
                  s.dispatchEvent(new Event('change')); }})()""")
        assert b.eval("document.querySelectorAll('#cards .card:not([hidden])').length") == 1
        b.eval("(() => { const s = document.getElementById('f-source'); s.value = ''; s.dispatchEvent(new Event('change')); })()")
        b.eval("(() => { const s = document.getElementById('f-level'); s.value = '0'; s.dispatchEvent(new Event('change')); })()")
        visible = b.eval("[...document.querySelectorAll('#cards .card:not([hidden]) tr.ev:not([hidden])')].length")
        assert visible == sum(1 for dd in data["dialogues"] for ev in dd["events"] if ev["level"] == 0)
        b.eval("(() => { const s = document.getElementById('f-level'); s.value = ''; s.dispatchEvent(new Event('change')); })()")
        b.eval("window.scrollTo(0, 0)")
        shot = b.screenshot(tmp_path / "review.png")
        b.eval("document.getElementById('card-1').scrollIntoView()")
        b.screenshot(tmp_path / "review-card.png")
        b.drain(0.3)
        assert b.errors == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


@pytest.mark.slow
@needs_chromium
def test_flags_saved_from_page_are_honoured(quickstart_out, tmp_path):
    page = tmp_path / "review.html"
    CliRunner().invoke(app, ["review", str(quickstart_out), "-o", str(page), "--audio", "none"])
    flagged = page_data(page.read_text("utf-8"))["dialogues"][2]["id"]
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with chromium.Browser() as b:
        b.send("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(downloads), eventsEnabled=True)
        _open(b, page)
        b.click("#card-2 .flag-cb")
        b.eval("(() => { const n = document.querySelector('#card-2 .flag-note'); n.value = 'prediction <b>off</b>';"
               " n.dispatchEvent(new Event('input')); })()")
        assert b.eval("document.getElementById('flag-count').textContent") == "1 flagged"
        b.click("#save-flags")
        deadline = time.monotonic() + 20
        while not [p for p in downloads.glob("*.json")]:
            assert time.monotonic() < deadline, "the flags file was not downloaded"
            time.sleep(0.1)
        time.sleep(0.2)
        assert b.errors == []
    saved = next(downloads.glob("*.json"))
    assert saved.name == "flags-quickstart.json"
    assert load_flags(saved) == {flagged}
    assert load_flag_notes(saved)[flagged] == "prediction <b>off</b>"

    work = tmp_path / "dataset"
    shutil.copytree(quickstart_out, work)
    r = CliRunner().invoke(app, ["publish", str(work), "--exclude", str(saved)])  # in place
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["validate", str(work)])
    assert r.exit_code == 0, r.output
    assert flagged not in _ids(work) and len(_ids(work)) == 2


PAYLOADS = [
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned='img'\">",
    "<a href=\"javascript:window.__pwned='link'\">click me</a> javascript:window.__pwned='bare'",
    "</script><script>window.__pwned='close'</script><!--",
    "<svg onload=\"window.__pwned='svg'\"></svg> &lt;b&gt; \u2028",
]


def _plant(row: dict) -> None:
    i = int(row["id"].split("-")[1])
    payload = PAYLOADS[i % len(PAYLOADS)]
    row["turns"][0]["text"] = f"Question: {payload}"
    row["category"] = payload[:30]
    for e in row["oracle"]:
        e["prediction"] = f"{payload} #{e['timestamp_ms']}"
    row["words"][1]["word"] = "<b>is</b>"


@pytest.mark.slow
@needs_chromium
def test_untrusted_text_stays_text(tmp_path):
    out = tiny_dataset(tmp_path / "evil", n=len(PAYLOADS), edit=_plant)
    page = tmp_path / "evil.html"
    r = CliRunner().invoke(app, ["review", str(out), "-o", str(page)])
    assert r.exit_code == 0, r.output
    with chromium.Browser() as b:
        _open(b, page)
        for i, payload in enumerate(PAYLOADS):
            for k in range(3):
                b.click(f'#card-{i} .mk[data-i="{k}"]')
            shown = b.eval(f"""(() => {{ const c = document.getElementById('card-{i}');
                return {{question: c.querySelector('.turn-user .turn-text').textContent,
                        pred: c.querySelector('.cmp-box.pred .cmp-v').textContent,
                        cells: [...c.querySelectorAll('td.pred')].map(x => x.textContent),
                        category: c.querySelector('.tag.cat').textContent,
                        word: c.querySelectorAll('.w')[1].textContent}}; }})()""")
            assert shown["question"] == f"Question: {payload}"
            assert shown["pred"] == f"{payload} #2000"  # the last marker clicked is at 2.0 s
            assert shown["cells"] == [f"{payload} #{t}" for t in (1000, 1500, 2000)]
            assert shown["category"] == payload[:30] and shown["word"] == "<b>is</b>"
            b.click(f"#card-{i} .cmp-box.pred .cmp-v")  # where a planted link would be
        b.drain(0.5)
        assert b.eval("typeof window.__pwned") == "undefined"
        assert b.eval("document.querySelectorAll('img, svg a, a, iframe, object, embed').length") == 0
        assert b.eval("[...document.querySelectorAll('script')].filter(s => !s.type).length") == 1
        assert b.eval("[...document.querySelectorAll('svg')].every(s => s.closest('#summary'))")
        assert b.errors == []
