"""LLM rewrites through the real openai backend and HTTP, against the loopback server playing a model
with scripted replies: ones that keep the answer, drop it, alter it, add markup or run too long. A
rewrite that loses the answer is retried, then the template is used; the stage counts each case
(the runner puts these counts in the manifest's `llm_script`)."""

import re

import pytest

from kame_data.llm.config import BackendConfig
from kame_data.recipe import SourceSpec
from kame_data.records import Dialogue, SourceItem
from kame_data.script.stage import ScriptStage
from kame_data.script.config import LlmScriptConfig, ScriptConfig
from kame_data.script.template import script_batch
from kame_data.sources import load_source
from kame_data.step import RunContext
from tests.loopback_server import LoopbackServer
from tests.steps import run_flat


def _template_lines(messages: list[dict]) -> list[str]:
    prompt = messages[-1]["content"]
    block = prompt.split("A plain version of the conversation, to rewrite:\n", 1)[1].split("\n\n")[0]
    return [ln for ln in block.splitlines() if ln.startswith(("USER:", "ASSISTANT:"))]


def keep(messages, asked):
    """A natural rewrite that keeps the answer: the user's own words, the assistant's answer."""
    lines = _template_lines(messages)
    lines[0] = lines[0].replace("USER: ", "USER: So, I was wondering. ", 1)
    lines[1] = lines[1].replace("ASSISTANT: ", "ASSISTANT: Good one. ", 1)
    return "Here is the conversation:\n" + "\n".join(lines) + "\n\nHope that helps!"


def drop(messages, asked):
    lines = _template_lines(messages)
    lines[1] = "ASSISTANT: Good question! Let me think about that one for a moment, it is a tricky one."
    return "\n".join(lines)


def alter(messages, asked):
    """The same words with another answer: the last number one more, or another option's letter."""
    lines = _template_lines(messages)
    numbers = list(re.finditer(r"\d+", lines[1]))
    if re.search(r"\b[A-D][,.:]", lines[1]):
        lines[1] = re.sub(r"\b([A-D])([,.:])", lambda m: ("B" if m.group(1) != "B" else "A") + m.group(2), lines[1])
        lines[1] = lines[1].split(",")[0] + ", the other one."
    elif numbers:
        last = numbers[-1]
        lines[1] = lines[1][:last.start()] + str(int(last.group(0)) + 1) + lines[1][last.end():]
    return "\n".join(lines)


def markup(messages, asked):
    lines = _template_lines(messages)
    lines[1] = lines[1].replace("ASSISTANT: ", "ASSISTANT: <b>Answer:</b> ", 1)
    return "\n".join(lines)


def too_long(messages, asked):
    lines = _template_lines(messages)
    lines[1] += " And honestly, that is the kind of thing you can check again and again if you like." * 12
    return "\n".join(lines)


def drop_then_keep(messages, asked):
    return drop(messages, asked) if asked == 0 else keep(messages, asked)


@pytest.fixture(scope="module")
def items(fixtures_dir):
    def first(kind, name, n):
        return [r for r in load_source(SourceSpec(kind=kind, path=str(fixtures_dir / name)))
                if isinstance(r, SourceItem)][:n]
    return (first("gsm8k", "gsm8k_test_200.jsonl", 3) + first("mmlu_pro", "mmlu_pro_validation.jsonl", 2)
            + first("hssbench", "hssbench_own.jsonl", 1))


def _run(items, reply, retries=1):
    with LoopbackServer(reply=reply) as srv:
        cfg = ScriptConfig(style="llm", llm=LlmScriptConfig(
            retries=retries, backend=BackendConfig(kind="openai", model="loopback", base_url=srv.base_url,
                                                   max_retries=0)))
        stage = ScriptStage(cfg, RunContext(seed=0))
        out = run_flat(stage, items)
        summary = stage.summary()
        stage.teardown()
        return out, summary["rewrites"], srv.calls


def test_rewrites_that_keep_the_answer_are_used(items):
    out, counts, calls = _run(items, keep)
    assert counts["llm"] == len(items) == calls and "fallback" not in counts
    for d in out:
        assert isinstance(d, Dialogue) and d.turns[0].text.startswith("So, I was wondering.")
        assert d.turns[1].text.startswith("Good one.") and not d.turns[1].text.endswith("helps!")


@pytest.mark.parametrize("reply,reason", [(drop, "answer_lost"), (alter, "answer_lost"), (markup, "markup"),
                                          (too_long, "too_long")])
def test_bad_rewrites_are_retried_then_the_template_is_used(items, reply, reason):
    out, counts, calls = _run(items, reply, retries=1)
    n = len(items)
    assert calls == 2 * n and counts["retried"] == n
    assert counts[f"refused_{reason}"] == 2 * n and counts["fallback"] == counts[f"fallback_{reason}"] == n
    assert [d.to_dict() for d in out] == [d.to_dict() for d in script_batch(items, ScriptConfig(), seed=0)]


def test_a_retry_that_keeps_the_answer_is_used(items):
    out, counts, calls = _run(items, drop_then_keep, retries=1)
    n = len(items)
    assert counts["llm"] == n and counts["refused_answer_lost"] == n and counts["retried"] == n and calls == 2 * n
    assert all(d.turns[1].text.startswith("Good one.") for d in out)


def test_the_prompt_carries_the_options_read_and_the_answer(items):
    seen = []

    def spy(messages, asked):
        seen.append(messages)
        return keep(messages, asked)

    _run(items[3:4], spy)
    system, user = seen[0][0]["content"], seen[0][1]["content"]
    assert "never reads an equation" in system and "the letter of the right option" in system
    letters = re.findall(r"^([A-J])\. ", user, re.MULTILINE)
    answer = re.search(r"^Correct answer: ([A-J]), ", user, re.MULTILINE).group(1)
    assert answer in letters and len(letters) <= ScriptConfig().max_options  # the options the dialogue reads


def test_template_dialogues_are_checked_and_counted(items):
    stage = ScriptStage(ScriptConfig(), RunContext(seed=0))
    out = run_flat(stage, items)
    assert all(isinstance(d, Dialogue) for d in out)
    assert stage.summary() == {"scripts": {"answer_lost": 0, "template": len(items), "template_rejected": 0}}
