"""Scripts a person would say, checked on whole fixture splits (GSM8K 200 test rows, MMLU-Pro 300 test
and 70 validation rows, MT-Bench 80, our HSSBench-format rows) with the default template style.

The checks here do not reuse the script's own answer logic: number words come from num2words, the
unit from the question's words, the letter from the user turn as spoken."""

import re
from collections import Counter

import pytest
from num2words import num2words

from kame_data.recipe import SourceSpec
from kame_data.records import Dialogue, SourceItem
from kame_data.script.config import ScriptConfig
from kame_data.script.template import script_batch
from kame_data.sources import load_source
from kame_data.text import spoken_seconds, to_spoken

pytestmark = pytest.mark.slow  # sweeps whole fixture splits (tests/README.md)

FILES = {"gsm8k": ["gsm8k_test_200.jsonl"], "mmlu_pro": ["mmlu_pro_test_300.jsonl", "mmlu_pro_validation.jsonl"],
         "hssbench": ["hssbench_own.jsonl"], "mt_bench": ["mt_bench_questions.jsonl"]}
_CONNECTIVE = re.compile(r"^(?:So|Thus|Therefore|Hence|Then|And|Which|That makes|Also)\b")
_LEAD_IN = re.compile(r"^(?:Let's see|Okay|Sure|Alright)\.\s+")
_NUMBER_WORD = re.compile(r"^(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
                          r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|"
                          r"seventy|eighty|ninety|hundred|thousand|million|and|point|minus)$")


@pytest.fixture(scope="module")
def scripted(fixtures_dir):
    """Every kept fixture item and its default template dialogue, by source."""
    out: dict[str, list[tuple[SourceItem, Dialogue]]] = {}
    for kind, names in FILES.items():
        for name in names:
            items = [r for r in load_source(SourceSpec(kind=kind, path=str(fixtures_dir / name)))
                     if isinstance(r, SourceItem)]
            dialogues = script_batch(items, ScriptConfig(), seed=0)
            out.setdefault(kind, []).extend((i, d) for i, d in zip(items, dialogues) if isinstance(d, Dialogue))
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def _says_number(sentence: str, number: str) -> bool:
    """The number's words as a whole number in the sentence ('eighteen', not inside 'one hundred and eighteen')."""
    value = float(number)
    said = num2words(int(value)) if value == int(value) else num2words(value)
    target = _words(said.replace("-", " ").replace(",", ""))
    words = _words(sentence)
    for k in range(len(words) - len(target) + 1):
        if words[k:k + len(target)] == target:
            before = words[k - 1] if k else ""
            after = words[k + len(target)] if k + len(target) < len(words) else ""
            if not (_NUMBER_WORD.match(before) and before != "and") and not _NUMBER_WORD.match(after) or \
                    after == "and":
                return True
    return False


def _last_sentence(spoken: str) -> str:
    return [s for s in re.split(r"(?<=[.!?])\s+", spoken.strip()) if s][-1]


def test_every_gsm8k_result_is_said_right_with_its_unit(scripted):
    pairs = scripted["gsm8k"]
    assert len(pairs) >= 195
    wrong = []
    for item, d in pairs:
        last = _last_sentence(d.turns[1].spoken)
        q = item.question.lower()
        asked = re.search(r"how many (?:more |fewer |total |of (?:the|her|his|their) )?([a-z]+)", q)
        money = re.search(r"how much (?:more |less )?money|how many dollars|in dollars|how much (?:did|does|do|will|"
                          r"would|should|is|was)\b[^?]*\b(?:pay|cost|spend|spent|earn|make|save|charge)\b", q)
        problems = []
        if not _says_number(last, item.answer.replace(",", "")):
            problems.append("number")
        if "dollar" in last and not (money or "$" in item.question or "dollar" in q):
            problems.append("dollars for a question without money")
        if asked and asked.group(1) not in ("dollars", "times") and " dollars" in last and "$" not in asked.group(0):
            problems.append(f"dollars for 'how many {asked.group(1)}'")
        if money and "how many" not in q and not re.search(r"dollars|euros|cents", last):
            problems.append("money question without its currency")
        if re.search(r"what percent(?:age)?", q) and "percent" not in last:
            problems.append("percent")
        if asked and asked.group(1) in ("hours", "minutes", "miles", "days", "years", "pounds") \
                and asked.group(1).rstrip("s") not in last:
            problems.append(f"unit {asked.group(1)}")
        if problems:
            wrong.append((item.id, item.answer, problems, last))
    assert not wrong, wrong[:5]


def test_gsm8k_explanations_start_at_the_start_and_rarely_read_sums(scripted):
    pairs = scripted["gsm8k"]
    for item, d in pairs:
        text = _LEAD_IN.sub("", d.turns[1].text)
        assert not _CONNECTIVE.match(text), (item.id, text)
        first_words = [w for w in _words(text) if w != "x"][:2]
        steps = [s for s in re.split(r"(?<=[.!?])\s+", item.explanation) if len(re.findall(r"[A-Za-z]{2,}", s)) >= 2]
        head = [w for w in _words(_CONNECTIVE.sub("", steps[0]).lstrip(" ,")) if w != "x"][:4]  # first step with words
        # the turn opens with the solution's first step (its calculation said as its result) or the answer
        assert " ".join(first_words) in " ".join(head) or re.match(r"(?:The answer is|It's|That would be|I'd say)",
                                                                  text), (item.id, text, item.explanation[:80])
    equals = sum("equals" in d.turns[1].spoken for _, d in pairs)
    assert equals <= 0.10 * len(pairs), equals


def test_choices_name_the_letter_read_with_the_answer(scripted):
    pairs = scripted["mmlu_pro"] + scripted["hssbench"]
    assert len(pairs) > 300
    for item, d in pairs:
        user, assistant = d.turns[0].spoken, d.turns[1].spoken
        for letter in item.answer_letter.split(","):
            said = to_spoken(item.options["ABCDEFGHIJ".index(letter)]).rstrip(".")
            shown = re.search(rf"\b([A-J]), {re.escape(said)}(?:[;?.]|$)", user)
            assert shown, (d.id, said, user[-200:])
            assert re.search(rf"\b{shown.group(1)}\b(?:[,.:]|\s+and\b)", assistant) and said in assistant, \
                (d.id, assistant)


def test_every_turn_fits_45_seconds_and_says_only_words(scripted):
    turns = [(d.id, t) for pairs in scripted.values() for _, d in pairs for t in d.turns]
    assert Counter(i.split("-")[0] for i, _ in turns).keys() == {"gsm8k", "mmlu_pro", "hssbench", "mt_bench"}
    for dialogue_id, t in turns:
        assert spoken_seconds(t.spoken) <= 45, (dialogue_id, t.role, spoken_seconds(t.spoken))
        assert not re.search(r"[0-9$\\%=+<>^_{}|#*]", t.spoken), (dialogue_id, t.spoken)
