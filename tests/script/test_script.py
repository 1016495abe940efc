"""The script stage: template dialogues, variants, multi-turn, the LLM rewrite mode, determinism."""

import json
import os
import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from kame_data.llm.base import ChatBackend, ChatResult
from kame_data.llm.cache import CachedBackend, RequestCache
from kame_data.recipe import SourceSpec, load_recipe
from kame_data.runner.config import RunConfig
from kame_data.records import ASSISTANT, USER, Dialogue, Reject, SourceItem
from kame_data.schema import validate
from kame_data.script.llm import (
    build_request,
    check_rewrite,
    parse_reply,
    rewrite_batch,
)
from kame_data.script.stage import ScriptStage
from kame_data.script.config import LlmScriptConfig, ScriptConfig
from kame_data.script.template import (
    ask,
    clip_words,
    script_batch,
    script_item,
    script_turns,
)
from kame_data.sources import load_items, load_source
from kame_data.step import RunContext
from tests.steps import run_flat
from tests.conftest import ROOT

FILES = {
    "mmlu_pro": ["mmlu_pro_test_300.jsonl", "mmlu_pro_validation.jsonl"],
    "gsm8k": ["gsm8k_test_200.jsonl"],
    "hssbench": ["hssbench_own.jsonl"],
    "mt_bench": ["mt_bench_questions.jsonl"],
}
FORBIDDEN = re.compile(r"[0-9$\\]|<<|####")


def _items(fixtures_dir, kind, name):
    return [r for r in load_source(SourceSpec(kind=kind, path=str(fixtures_dir / name))) if isinstance(r, SourceItem)]


def _all_items(fixtures_dir):
    return [it for kind, names in FILES.items() for name in names for it in _items(fixtures_dir, kind, name)]


def _mc(**kw):
    base = dict(id="mmlu_pro-1", source="mmlu_pro", category="law", question="Which act outlawed monopolies?",
                options=["The Clayton Act", "The Wagner Act", "The Sherman Act", "The Taft Act", "The Dodd Act",
                         "The Glass Act"],
                answer="The Sherman Act", answer_letter="C",
                explanation="The Sherman Act of 1890 was the first federal law against monopolies.")
    base.update(kw)
    return SourceItem(**base)


@pytest.mark.slow
@pytest.mark.parametrize("cfg", [
    ScriptConfig(variants=2),
    ScriptConfig(mmlu_options="all", followup_rate=1.0),
    ScriptConfig(mmlu_options="open", variants=3),
], ids=["subset-2-variants", "all-options-followups", "open-3-variants"])
def test_spoken_text_of_every_kept_fixture_item_is_clean(fixtures_dir, cfg):
    items = _all_items(fixtures_dir)
    out = script_batch(items, cfg, seed=3)
    dialogues = [d for d in out if isinstance(d, Dialogue)]
    assert len(dialogues) > 500
    assert {r.reason for r in out if isinstance(r, Reject)} <= {"no_reference_answer", "too_long"}
    for d in dialogues:
        validate("dialogue", d.to_dict())
        assert [t.role for t in d.turns] == [USER, ASSISTANT] * (len(d.turns) // 2)
        for t in d.turns:
            assert not FORBIDDEN.search(t.spoken), (d.id, t.spoken)
            assert t.text and t.spoken


def test_variants_differ_in_wording(fixtures_dir):
    items = _items(fixtures_dir, "gsm8k", "gsm8k_test_200.jsonl")[:20] + _items(fixtures_dir, "mmlu_pro",
                                                                                  "mmlu_pro_validation.jsonl")[:20]
    for item in items:
        ds = [script_item(item, v, ScriptConfig(), seed=0) for v in range(3)]
        if all(isinstance(d, Reject) and d.reason == "too_long" for d in ds):
            continue  # a question of over 100 words (records.MAX_RUN_WORDS): no variant can ask it
        users = {d.turns[0].text for d in ds}
        assistants = {d.turns[1].text for d in ds}
        assert len(users) == 3 or len(assistants) == 3, item.id
        assert all(d.id == f"{item.id}-v{v}" and d.variant == v for v, d in enumerate(ds))


def test_multiple_choice_answer_is_conversational():
    cfg = ScriptConfig(mmlu_options="all")
    d = script_item(_mc(), 0, cfg, seed=1)
    user, assistant = d.turns[0], d.turns[1]
    for letter, option in zip("ABCDEF", _mc().options):
        assert f"{letter}, {option}" in user.text
    assert re.search(r"\bC[,.:] The Sherman Act\b", assistant.text)
    assert "eighteen ninety" in assistant.spoken and "first federal law" in assistant.text


def test_subset_keeps_the_answer_and_relabels():
    for v in range(6):
        d = script_item(_mc(), v, ScriptConfig(mmlu_options="subset", max_options=3), seed=v)
        user, assistant = d.turns[0].text, d.turns[1].text
        shown = re.findall(r"\b([A-Z]), (The \w+ Act)", user)
        assert len(shown) == 3 and [s[0] for s in shown] == ["A", "B", "C"]
        letter = next(l for l, text in shown if text == "The Sherman Act")
        assert re.search(rf"\b{letter}[,.:] The Sherman Act", assistant)


def test_open_mode_reads_no_options():
    d = script_item(_mc(), 0, ScriptConfig(mmlu_options="open"), seed=0)
    assert "Clayton" not in d.turns[0].text and "The Sherman Act" in d.turns[1].text


def test_several_correct_options():
    item = _mc(options=["Nile", "Alps", "Rhine", "Gobi"], answer="Nile and Rhine", answer_letter="A,C",
               question="Which are rivers?", explanation="")
    d = script_item(item, 0, ScriptConfig(mmlu_options="all"), seed=0)
    assert "A and C" in d.turns[1].text and "Nile and Rhine" in d.turns[1].text


def test_gsm8k_answer_is_a_short_explanation_ending_in_the_result(fixtures_dir):
    items = _items(fixtures_dir, "gsm8k", "gsm8k_test_200.jsonl")
    for item in items[:50]:
        d = script_item(item, 0, ScriptConfig(), seed=0)
        answer = d.turns[1]
        assert len(answer.text.split()) <= 2 * ScriptConfig().max_explanation_words + 15
        last = re.split(r"(?<=[.!?])\s+", answer.text)[-1]
        assert item.answer.replace(",", "") in last.replace(",", ""), (item.id, answer.text)
    janet = script_item(items[0], 0, ScriptConfig(), seed=0).turns[1]
    assert janet.text.endswith("Janet sells 9 duck eggs a day. She makes $18 every day at the farmer’s market.")
    assert "nine duck eggs" in janet.spoken and "equals" not in janet.spoken  # the result, not the sum


def test_blanks_and_clipping():
    assert ask("The location of this competition was (   ).") == "The location of this competition was what?"
    assert ask("_____ is the direct attempt to manage ethics.") == "Blank is the direct attempt to manage ethics."
    assert ask("Which reflects the trend? ( )") == "Which reflects the trend?"
    text = "One two three. Four five six seven. Eight nine."
    assert clip_words(text, 7) == "One two three. Four five six seven."
    assert clip_words(text, 7, from_end=True) == "Four five six seven. Eight nine."


def test_mt_bench_two_turns_and_missing_references(fixtures_dir):
    items = {i.id: i for i in _items(fixtures_dir, "mt_bench", "mt_bench_questions.jsonl")}
    d = script_item(items["mt_bench-104"], 0, ScriptConfig(), seed=0)
    assert [t.role for t in d.turns] == [USER, ASSISTANT, USER, ASSISTANT]
    assert d.turns[3].text == "David has one brother."
    partial = script_item(items["mt_bench-103"], 0, ScriptConfig(), seed=0)  # second reference is empty
    assert len(partial.turns) == 2
    missing = script_item(items["mt_bench-141"], 0, ScriptConfig(), seed=0)
    assert isinstance(missing, Reject) and missing.reason == "no_reference_answer"


def test_followup_why_turn():
    d = script_item(_mc(), 0, ScriptConfig(followup_rate=1.0), seed=0)
    assert len(d.turns) == 4 and d.turns[2].role == USER and d.turns[2].text.endswith("?")
    assert "first federal law" in d.turns[3].text and "first federal law" not in d.turns[1].text


def test_quickstart_scripts_enough_dialogues():
    config = RunConfig.resolve(load_recipe("quickstart"))
    items, rejects = load_items(config.recipe, config.filters)
    out = script_batch(items, config.script, config.seed)
    assert len(items) == 12 and [x.reason for x in rejects] == ["needs_image"]
    assert sum(isinstance(d, Dialogue) for d in out) >= 8


# ------------------------------------------------------------------ LLM rewrite mode

class FakeBackend(ChatBackend):
    """Replies from the prompt: a rewrite of the template it carries (or a made-up answer when there
    is none), optionally broken in a given way."""

    name, model = "fake", "fake-1"

    def __init__(self, mode="good"):
        self.mode = mode
        self.requests = []

    def reply(self, req):
        system, user = req.messages[0][1], req.messages[1][1]
        lines = int(re.search(r"exactly (\d+) lines", system).group(1))
        plain = user.split("A plain version of the conversation, to rewrite:\n", 1)
        if len(plain) == 2:
            turns = [ln for ln in plain[1].split("\n\n")[0].splitlines() if ln.startswith(("USER:", "ASSISTANT:"))]
            turns = [t.replace("USER: ", "USER: So, ", 1) if t.startswith("USER:") else t for t in turns]
        else:
            turns = [("USER: Here's my question, what do you think?" if k % 2 == 0 else
                      "ASSISTANT: I'd say it depends, but mostly yes.") for k in range(lines)]
        if self.mode == "empty":
            return ""
        if self.mode == "long":
            return "\n".join(turns) + " and so on" * 100
        if self.mode == "one_turn":
            return turns[0]
        if self.mode == "wrong_answer":
            return "USER: So what is it?\nASSISTANT: No idea, honestly, could be anything at all."
        if self.mode == "unspeakable":
            return "\n".join(turns[:-1] + ["ASSISTANT: ```\u2603```"])
        return "\n".join(turns)

    def complete(self, requests, on_answer=None):
        self.requests += requests
        return [ChatResult(text=self.reply(r), prompt_tokens=10, completion_tokens=10) for r in requests]


def test_llm_rewrites_are_used_and_bad_ones_fall_back(fixtures_dir):
    items = _items(fixtures_dir, "gsm8k", "gsm8k_test_200.jsonl")[:4] + [_mc()]
    cfg = ScriptConfig(style="llm", variants=2)
    stats = Counter()
    out = rewrite_batch(items, cfg, 0, FakeBackend("good"), stats)
    assert stats["llm"] == 10 and stats["fallback"] == 0
    assert all(d.turns[0].text.startswith("So, ") for d in out)
    template = script_batch(items, ScriptConfig(variants=2), 0)
    for mode, reason in [("empty", "empty"), ("long", "too_long"), ("one_turn", "wrong_turns"),
                         ("wrong_answer", "answer_lost"), ("unspeakable", "empty")]:
        stats = Counter()
        out = rewrite_batch(items, cfg, 0, FakeBackend(mode), stats)
        assert stats["fallback"] == 10 and stats["llm"] == 0, mode
        assert stats[f"fallback_{reason}"] == 10, (mode, stats)
        assert [d.to_dict() for d in out] == [d.to_dict() for d in template]  # the template, unchanged


def test_llm_answers_items_without_reference(fixtures_dir):
    items = [i for i in _items(fixtures_dir, "mt_bench", "mt_bench_questions.jsonl") if i.id == "mt_bench-141"]
    stats = Counter()
    good = rewrite_batch(items, ScriptConfig(style="llm"), 0, FakeBackend("good"), stats)
    assert len(good[0].turns) == 4 and stats["llm"] == 1
    bad = rewrite_batch(items, ScriptConfig(style="llm"), 0, FakeBackend("one_turn"), Counter())
    assert isinstance(bad[0], Reject) and bad[0].reason == "llm_unusable"


def test_llm_retries_with_a_new_seed_then_counts():
    backend = FakeBackend("empty")
    cfg = ScriptConfig(style="llm", llm=LlmScriptConfig(retries=2))
    rewrite_batch([_mc()], cfg, 0, backend, Counter())
    assert len(backend.requests) == 3 and len({r.seed for r in backend.requests}) == 3


class FlakyBackend(FakeBackend):
    """A service that fails (after its own retries) on the requests whose seed is in `failing`."""

    def __init__(self, failing):
        super().__init__("good")
        self.failing = failing

    def complete(self, requests, on_answer=None):
        good = super().complete(requests)
        return [ChatResult(text="", error="http_503") if r.seed in self.failing else g for r, g in zip(requests, good)]


def test_llm_service_failure_is_a_transient_reject_not_the_template():
    """The template would stand in for good although the item is fine: when the service failed,
    the dialogue is a transient reject (retried on rerun) unless a later attempt got a rewrite."""
    item = _mc()
    cfg = ScriptConfig(style="llm", llm=LlmScriptConfig(retries=1))
    seeds = [build_request(item, 0, None, cfg, 0, attempt).seed for attempt in (0, 1)]
    stats = Counter()
    out = rewrite_batch([item], cfg, 0, FlakyBackend(set(seeds)), stats)
    assert isinstance(out[0], Reject) and out[0].reason == "llm_failed" and out[0].transient
    assert "http_503" in out[0].detail and stats["failed"] == 1 and stats["fallback"] == 0
    stats = Counter()
    out = rewrite_batch([item], cfg, 0, FlakyBackend({seeds[0]}), stats)  # the retry got through
    assert isinstance(out[0], Dialogue) and out[0].turns[0].text.startswith("So, ") and stats["llm"] == 1
    out = rewrite_batch([item], cfg, 0, FakeBackend("one_turn"), Counter())  # a bad answer is final: the template
    assert isinstance(out[0], Dialogue)


def test_llm_prompt_and_parsing():
    cfg = ScriptConfig(style="llm", mmlu_options="all")
    script = script_turns(_mc(), 0, cfg, seed=0)
    req = build_request(_mc(), 0, script, cfg, seed=0)
    system, user = req.messages[0][1], req.messages[1][1]
    assert "exactly 2 lines" in system and "at most 90 words" in system and "spelled out in words" in system
    assert "Correct answer: C, The Sherman Act" in user and "F. The Glass Act" in user
    assert req.max_tokens == 400
    other = build_request(_mc(), 1, None, cfg, seed=0)
    assert other.messages[1][1].splitlines()[-1] != user.splitlines()[-1]  # variants ask for different styles
    turns = parse_reply("**USER:** Hi there,\nis it C?\nAssistant: Yes, C, the Sherman Act.\n\nHope this helps!\n")
    assert turns == [(USER, "Hi there, is it C?"), (ASSISTANT, "Yes, C, the Sherman Act.")]
    assert check_rewrite(_mc(), turns, 2, cfg, script.target) == ""
    assert check_rewrite(_mc(), [(USER, "Hi?"), (ASSISTANT, "It's A, the Clayton Act.")], 2, cfg,
                         script.target) == "answer_lost"


def test_llm_stage_goes_through_the_cache(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite")
    first = FakeBackend("good")
    stage = ScriptStage(ScriptConfig(style="llm", variants=2), RunContext(seed=5), backend=CachedBackend(first, cache))
    a = run_flat(stage, [_mc()])
    second = FakeBackend("empty")  # would fail: every answer must come from the cache
    stage2 = ScriptStage(ScriptConfig(style="llm", variants=2), RunContext(seed=5), backend=CachedBackend(second, cache))
    b = run_flat(stage2, [_mc()])
    assert [d.to_dict() for d in a] == [d.to_dict() for d in b]
    assert len(first.requests) == 2 and second.requests == [] and stage2.backend.cache_hits == 2
    assert stage.stats["llm"] == 2
    cache.close()


def test_recipe_script_llm_section(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text(textwrap.dedent("""
        name: x
        sources: [{kind: gsm8k, path: a.jsonl}]
        script:
          style: llm
          followup_rate: 0.5
          llm: {max_user_words: 50, backend: {kind: llamacpp, n_ctx: 4096}}
    """))
    cfg = RunConfig.resolve(load_recipe(p)).script
    assert cfg.style == "llm" and cfg.llm.max_user_words == 50 and cfg.llm.backend.n_ctx == 4096
    assert cfg.llm.max_tokens == 400 and cfg.followup_rate == 0.5


# ------------------------------------------------------------------ determinism

_DUMP = """
import json, sys
from kame_data.recipe import load_recipe
from kame_data.runner.config import RunConfig
from kame_data.script.template import script_batch
from kame_data.sources import load_items
config = RunConfig.resolve(load_recipe(sys.argv[1]))
items, rejects = load_items(config.recipe, config.filters)
out = script_batch(items, config.script, config.seed)
sys.stdout.write(json.dumps({"items": [i.to_dict() for i in items], "rejects": [x.to_dict() for x in rejects],
                             "dialogues": [d.to_dict() for d in out]}, sort_keys=True))
"""


def _mix(tmp_path, fixtures_dir, seed):
    p = tmp_path / f"mix{seed}.yaml"
    p.write_text(textwrap.dedent(f"""
        name: mix
        seed: {seed}
        sources:
          - {{kind: mmlu_pro, path: {fixtures_dir}/mmlu_pro_test_300.jsonl, quota: 40, dialogues: 70}}
          - {{kind: mmlu_pro, path: {fixtures_dir}/mmlu_pro_validation.jsonl, quota: 20}}
          - {{kind: gsm8k, path: {fixtures_dir}/gsm8k_test_200.jsonl, quota: 30, variants: 2}}
          - {{kind: hssbench, path: {fixtures_dir}/hssbench_own.jsonl}}
          - {{kind: mt_bench, path: {fixtures_dir}/mt_bench_questions.jsonl, per_category: {{reasoning: 5, math: 5}}}}
        script: {{mmlu_options: subset, followup_rate: 0.3}}
    """))
    return p


def _run(recipe: Path, hashseed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": hashseed}
    r = subprocess.run([sys.executable, "-c", _DUMP, str(recipe)], capture_output=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return r.stdout


@pytest.mark.slow
def test_same_seed_same_output_byte_for_byte(tmp_path, fixtures_dir):
    recipe = _mix(tmp_path, fixtures_dir, 11)
    a, b = _run(recipe, "1"), _run(recipe, "987")  # different hash salts: no set/dict-order luck
    assert a == b
    data = json.loads(a)
    assert len(data["dialogues"]) > 150 and data["rejects"]
    c = _run(_mix(tmp_path, fixtures_dir, 12), "1")
    assert c != a
