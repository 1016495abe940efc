"""Items the template cannot fit in a turn, offered to an LLM rewrite that condenses them
(script.style llm): the filters leave `too_long` to the script, the allocation hands them out, and
the rewrite is kept only when it fits the turn, keeps every number of the question and keeps the
answer; otherwise the item stays refused `too_long`, never the too-long template in its place. The
model is the loopback server with scripted replies, through the real openai backend and HTTP."""

import json
import re
import subprocess

import pytest
import yaml

from kame_data.llm.config import BackendConfig
from kame_data.records import Dialogue, Reject, SourceItem
from kame_data.script.config import LlmScriptConfig, ScriptConfig
from kame_data.script.stage import ScriptStage
from kame_data.script.template import script_turns
from kame_data.step import RunContext
from tests.conftest import CLI
from tests.loopback_server import LoopbackServer
from tests.steps import run_flat

TURN_SECONDS = 20
OPTIONS = ["the Amber", "the Birch", "the Cedar", "the Delta"]
LONG = ("In 1850 the town council of the northern province, after years of argument between the millers, the "
        "boatmen and the families who farmed along the water meadows, finally agreed to pay 42 guineas for a "
        "stone bridge with 7 arches across the widest of the rivers that run past the market square, and the "
        "bridge still stands today beside the old customs house. Which river does it cross?")


def _item(i: int) -> SourceItem:
    return SourceItem(id=f"mmlu_pro-{i}", source="mmlu_pro", category="history", question=LONG.replace("1850", str(1850 + i)),
                      options=OPTIONS, answer="the Birch", answer_letter="B")


def _prompt_parts(messages):
    user = messages[-1]["content"]
    numbers = re.findall(r"\d+", user.split("Question: ", 1)[1].split("\n")[0])
    options = re.findall(r"^([A-J])\. (.+)$", user, re.MULTILINE)
    answer = re.search(r"^Correct answer: ([A-J]), (.+?)(?: \(|$)", user, re.MULTILINE)
    return user, numbers, options, answer


def condensed(messages, asked):
    """A rewrite that fits: the numbers kept, the options read, the answer said (a request that
    does not ask to condense gets its plain version back, a rewrite as good as the template)."""
    user, numbers, options, answer = _prompt_parts(messages)
    if "too long to say in one go" not in user:
        return stays_long(messages, asked)
    said = "; or ".join(f"{letter}, {text}" for letter, text in options)
    return (f"USER: A bridge built in {numbers[0]} for {numbers[1]} guineas, with {numbers[2]} arches. "
            f"Which river does it cross: {said}?\n"
            f"ASSISTANT: It crosses {answer.group(1)}, {answer.group(2)}.")


def drops_a_number(messages, asked):
    return re.sub(r"for \d+ guineas, ", "", condensed(messages, asked))


def stays_long(messages, asked):
    user = messages[-1]["content"]
    block = user.split("A plain version of the conversation, to rewrite:\n", 1)[1].split("\n\n")[0]
    return block


def loses_the_answer(messages, asked):
    return condensed(messages, asked).split("ASSISTANT:")[0] + "ASSISTANT: I'd have to look that one up."


def _cfg(srv, retries=0) -> ScriptConfig:
    return ScriptConfig(style="llm", max_turn_seconds=TURN_SECONDS, llm=LlmScriptConfig(
        retries=retries, backend=BackendConfig(kind="openai", model="loopback", base_url=srv.base_url, max_retries=0)))


def _run(items, reply, retries=0):
    seen = []

    def spy(messages, asked):
        seen.append(messages)
        return reply(messages, asked)

    with LoopbackServer(reply=spy) as srv:
        stage = ScriptStage(_cfg(srv, retries), RunContext(seed=0))
        out = run_flat(stage, items)
        summary = stage.summary()["rewrites"]
        stage.teardown()
    return out, summary, seen


def test_the_template_cannot_fit_these_items():
    cfg = ScriptConfig(max_turn_seconds=TURN_SECONDS)
    assert all(script_turns(_item(i), 0, cfg, 0).reason == "too_long" for i in range(3))


def test_a_condensed_rewrite_that_fits_and_keeps_the_answer_is_kept():
    items = [_item(i) for i in range(3)]
    out, counts, seen = _run(items, condensed)
    assert all(isinstance(d, Dialogue) for d in out) and counts["condensed"] == 3 == counts["llm"]
    for d, item in zip(out, items):
        assert d.turns[0].text.startswith("A bridge built in") and str(1850 + items.index(item)) in d.turns[0].text
    prompt = seen[0][-1]["content"]
    assert "too long to say in one go" in prompt and "keep every number, name and fact" in prompt
    assert len(re.findall(r"^[A-J]\. ", prompt, re.MULTILINE)) == 2  # the answer and one other, to save time


@pytest.mark.parametrize("reply,reason", [(drops_a_number, "facts_lost"), (stays_long, "too_long"),
                                          (loses_the_answer, "answer_lost")])
def test_a_broken_rewrite_leaves_the_item_refused_too_long(reply, reason):
    items = [_item(i) for i in range(2)]
    out, counts, seen = _run(items, reply, retries=1)
    assert len(seen) == 4  # each asked again once
    assert all(isinstance(r, Reject) and r.reason == "too_long" and "condensing" in r.detail and reason in r.detail
               for r in out)
    assert counts[f"condense_failed_{reason}"] == 2 and "fallback" not in counts


def test_a_run_offers_long_items_to_the_rewrite(tmp_path):
    """Through `kame-data run`: with the template style the filters refuse nothing here but the
    script refuses the long items; with a served rewrite model they are condensed and kept, and the
    count asked is met."""
    rows = [{"question_id": i, "question": q, "options": OPTIONS, "answer": "B", "answer_index": 1,
             "cot_content": "", "category": "history", "src": "own"}
            for i, q in enumerate([_item(i).question for i in range(3)]
                                  + ["Which of these flows past the mill?", "Which of these flows past the lake?"])]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def run(name, script):
        recipe = tmp_path / f"{name}.yaml"
        recipe.write_text(yaml.safe_dump({"name": name, "seed": 3, "sources": [
            {"kind": "mmlu_pro", "path": str(path), "dialogues": 5, "max_variants": 1}],
            "filters": {"max_seconds": TURN_SECONDS}, "script": {"max_turn_seconds": TURN_SECONDS, **script}}))
        r = subprocess.run(CLI + ["run", str(recipe), "--out", str(tmp_path / name), "--until", "script", "-q",
                                  "--no-cache"], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        return [json.loads(x) for x in (tmp_path / name / "scripts.jsonl").read_text().splitlines()], r.stdout

    made, said = run("template", {"style": "template"})
    assert len(made) == 2 and "3 short" in said  # the filters refuse the three long ones as too_long
    with LoopbackServer(reply=condensed) as srv:
        made, said = run("rewrite", {"style": "llm", "llm": {"backend": {
            "kind": "openai", "model": "loopback", "base_url": srv.base_url}}})
    assert len(made) == 5 and "5 of 5 dialogues asked" in said
    assert sum(d["turns"][0]["text"].startswith("A bridge built in") for d in made) == 3
