"""Early truth: a level-5 oracle event, the true reply itself, while the user is still
speaking. docs/design.md's ladder gives one wherever a user pauses 1.0 s or more inside a turn; the oracle
stage rejects such a dialogue, `validate` names its row and time, and the manifest, card and review
page count them. A recipe that keeps long pauses must say so (`oracle.early_truth: keep`)."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
import yaml

from kame_data.dataset.card import write_card
from kame_data.dataset.validate import DatasetInvalid, validate_dataset
from kame_data.llm.config import BackendConfig
from kame_data.oracle.ladder import ladder
from kame_data.oracle.metrics import early_truth
from kame_data.oracle.config import OracleConfig
from kame_data.oracle.stage import OracleStage
from kame_data.recipe import RecipeError, load_recipe
from kame_data.records import Dialogue, Reject, RenderedDialogue, Sample, Turn, TurnTiming, Word
from kame_data.review.html import build_page
from kame_data.runner.config import RunConfig
from tests.conftest import CLI
from tests.loopback_server import LoopbackServer
from tests.review.test_review import page_data, tiny_dataset

# The worked example with a 1.1 s pause after "two": the ladder reads the pause as the end of B's run.
PAUSED = [("B", "what", 0.0, 0.3), ("B", "is", 0.3, 0.5), ("B", "two", 0.5, 0.7), ("B", "plus", 1.8, 2.0),
          ("B", "two", 2.0, 2.2), ("A", "it's", 2.4, 2.6), ("A", "four", 2.6, 2.9)]
TURNS = [{"role": "user", "speaker": "B", "text": "What is 2 + 2?", "spoken": "what is two plus two",
          "start": 0.0, "end": 2.2, "voice": "hibari:heart"},
         {"role": "assistant", "speaker": "A", "text": "It's 4.", "spoken": "it's four",
          "start": 2.4, "end": 2.9, "voice": "piper:joe"}]


def _events(words: list[tuple]) -> list[dict]:
    return [{"timestamp_ms": s.timestamp_ms, "conversation_context": s.conversation_context,
             "prediction": s.true_reply if s.level == 5 else "i think it is four", "total_word_count": s.total_word_count,
             "trigger_word": s.trigger_word, "recent_words": s.recent_words,
             "current_spoken_ratio": s.current_spoken_ratio, "channel": s.channel, "hint": s.hint, "level": s.level}
            for s in ladder([Word(*w) for w in words])]


def test_the_ladder_hands_over_the_truth_at_a_long_pause():
    events = _events(PAUSED)
    assert [(e["timestamp_ms"], e["level"]) for e in events] == [(500, 2), (1000, 5), (1500, 5), (2000, 2),
                                                                          (2500, 5)]
    assert [e["current_spoken_ratio"] for e in events] == [2 / 3, 1.0, 1.0, 0.8, 1.0]  # it falls inside the turn
    assert early_truth(events, TURNS) == [(1, 0), (2, 0)]  # 2.5 s is after the user's last word: no early truth
    assert early_truth(_events([("B", w, a, b) for _, w, a, b in PAUSED[:3]] + [
        ("B", "plus", 0.9, 1.1), ("B", "two", 1.1, 1.3), ("A", "it's", 1.5, 1.7), ("A", "four", 1.7, 1.9)]),
        [dict(TURNS[0], end=1.3), dict(TURNS[1], start=1.5, end=1.9)]) == []


def _paused(row: dict) -> None:
    if row["id"] == "tiny-1-v0":
        row.update(words=[{"speaker": s, "word": w, "start": a, "end": b, "backchannel": False} for s, w, a, b in PAUSED],
                   turns=[dict(t) for t in TURNS], oracle=_events(PAUSED))


def test_validate_names_the_row_and_time_of_an_early_event(tmp_path):
    out = tiny_dataset(tmp_path / "early", edit=_paused)
    with pytest.raises(DatasetInvalid) as e:
        validate_dataset(out)
    assert e.value.row == "tiny-1-v0" and e.value.field == "oracle[1].level"
    assert "level-5 event at 1.00 s inside user turn 0 (0.00-2.20 s, ratio 1.000)" in str(e.value)
    r = subprocess.run(CLI + ["validate", str(out)], capture_output=True, text=True)
    assert r.returncode == 1 and "tiny-1-v0" in r.stderr and "1.00 s" in r.stderr and "oracle[1].level" in r.stderr


def _keep(out, early: int) -> None:
    m = json.loads((out / "manifest.json").read_text())
    m["recipe"]["oracle"] = {"early_truth": "keep"}
    m["early_truth_events"] = early
    (out / "manifest.json").write_text(json.dumps(m))
    write_card(out, m)


def test_a_recipe_that_keeps_them_gets_them_counted_on_manifest_card_and_page(tmp_path):
    out = tiny_dataset(tmp_path / "kept", edit=_paused)
    _keep(out, 2)
    report = validate_dataset(out)
    assert report.early_truth_events == 2 and report.rows == 3
    r = subprocess.run(CLI + ["validate", str(out)], capture_output=True, text=True)
    assert r.returncode == 0 and "2 at level 5 inside a turn" in r.stdout
    card = (out / "README.md").read_text()
    assert "| level-5 events inside a user turn (the true reply before the user has finished) | 2 |" in card
    assert "such events are kept and counted below" in card
    page, _ = build_page(out, audio="none")
    data = page_data(page)
    assert data["summary"]["early_truth"] == 2
    card_events = {d["id"]: [e["early"] for e in d["events"]] for d in data["dialogues"]}
    assert card_events["tiny-1-v0"] == [False, True, True, False, False]
    assert not any(card_events["tiny-0-v0"])
    _keep(out, 0)  # the manifest must state what the rows hold
    with pytest.raises(DatasetInvalid) as e:
        validate_dataset(out)
    assert e.value.field == "manifest.json:early_truth_events"


def _rendered(words: list[tuple], turns: list[dict], id: str) -> RenderedDialogue:
    d = Dialogue(id, id.rsplit("-", 1)[0], "test", "misc", 0,
                 [Turn(t["role"], t["speaker"], t["text"], t["spoken"]) for t in turns])
    return RenderedDialogue(d, np.zeros((int(3.0 * 24000), 2), np.int16), 24000, [Word(*w) for w in words],
                            [TurnTiming(t["start"], t["end"], t["voice"]) for t in turns])


def test_the_oracle_stage_rejects_a_dialogue_with_early_truth_without_asking_the_llm():
    clean = [("B", w, a - 1.0 if a > 1 else a, b - 1.0 if b > 1 else b) for _, w, a, b in PAUSED]
    clean_turns = [dict(TURNS[0], end=1.2), dict(TURNS[1], start=1.4, end=1.9)]
    clean = clean[:5] + [("A", w, a, b) for _, w, a, b in clean[5:]]
    with LoopbackServer() as server:
        backend = BackendConfig(kind="openai", model="loopback", base_url=server.base_url, max_retries=0)
        stage = OracleStage(OracleConfig(backend=backend))
        stage.setup()
        try:
            paused_out, clean_out = stage.run([_rendered(PAUSED, TURNS, "paused-1-v0"),
                                               _rendered(clean, clean_turns, "clean-1-v0")])
            calls = server.calls
            keep = OracleStage(OracleConfig(backend=backend, early_truth="keep"))
            keep.setup()
            kept = keep.run([_rendered(PAUSED, TURNS, "paused-1-v0")])[0]
            keep.teardown()
        finally:
            stage.teardown()
    assert paused_out == [Reject("oracle", "paused-1-v0", "early_truth",
                                 "2 level-5 event(s) inside a turn, first at 1.00 s in turn 0 (0.00-2.20 s): ratio "
                                 "1.000, 2 word(s) still to come (the ladder read a pause as the end of the turn)")]
    assert isinstance(clean_out[0], Sample) and all(e.level < 5 for e in clean_out[0].oracle[:-1])
    assert calls == sum(1 for e in clean_out[0].oracle if e.level < 5)  # none for the rejected dialogue
    assert isinstance(kept[0], Sample) and [e.level for e in kept[0].oracle] == [2, 5, 5, 2, 5]


def _recipe(tmp_path, speak: dict, oracle: dict):
    raw = json.loads(json.dumps(load_recipe("quickstart").raw))
    raw["sources"] = [{"kind": "gsm8k", "path": str(load_recipe("quickstart").resolve(raw["sources"][1]["path"]))}]
    raw["speak"].update(speak)
    raw["oracle"].update(oracle)
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_recipe(path)


def test_long_pauses_need_an_explicit_early_truth_keep(tmp_path):
    thinking = {"pauses": {"thinking": 0.3, "thinking_seconds": [1.5, 2.5]}}
    with pytest.raises(RecipeError, match="oracle.early_truth: keep"):
        RunConfig.resolve(_recipe(tmp_path, thinking, {}))
    with pytest.raises(RecipeError, match="oracle.early_truth: keep"):
        RunConfig.resolve(_recipe(tmp_path, {"pauses": {"bound": False}}, {}))
    config = RunConfig.resolve(_recipe(tmp_path, thinking, {"early_truth": "keep"}))
    assert config.speak.pauses.thinking == 0.3 and config.speak.pauses.thinking_seconds == (1.5, 2.5)
    assert config.to_dict()["speak"]["pauses"]["bound"] is True  # the manifest records the resolved pauses
    with pytest.raises(RecipeError):
        RunConfig.resolve(_recipe(tmp_path, {"pauses": {"sentence": [0.8, 0.4]}}, {"early_truth": "keep"}))


def test_inspect_marks_early_events():
    from rich.console import Console

    from kame_data.review.inspect import ladder_table

    row = {"oracle": _events(PAUSED), "turns": TURNS,
           "words": [{"speaker": s, "word": w, "start": a, "end": b} for s, w, a, b in PAUSED]}
    console = Console(record=True, width=160)
    console.print(ladder_table(row))
    lines = [ln for ln in console.export_text().splitlines() if " 5  early" in ln]
    assert [ln.split()[0] for ln in lines] == ["1.0", "1.5"]


def test_a_turn_of_over_100_words_reaches_level_5_before_its_last_word():
    """docs/design.md's thresholds, not a pause: ratio 100/101 > 0.99. The oracle stage names the cause."""
    user = [("B", f"w{i}", round(0.3 * i, 2), round(0.3 * i + 0.2, 2)) for i in range(101)]
    words = user + [("A", "yes", 30.6, 30.9), ("A", "indeed", 30.9, 31.3)]
    turns = [dict(TURNS[0], end=30.2), dict(TURNS[1], start=30.6, end=31.3)]
    events = _events(words)
    assert [(e["timestamp_ms"], e["level"]) for e in events if e["level"] == 5][0] == (30000, 5)
    assert early_truth(events, turns) == [(len(events) - 2, 0)]
    stage = OracleStage(OracleConfig(backend=BackendConfig(kind="openai", model="unused", base_url="http://127.0.0.1:9")))
    r = _rendered(words, turns, "long-1-v0")
    reject = stage._early(r, ladder(r.words, 0.5, 0))
    assert reject.reason == "early_truth" and "ratio 0.990, 1 word(s) still to come (a turn of over 100 words" in \
        reject.detail
