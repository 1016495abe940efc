"""The answer a dialogue must carry, said with the unit the question asks for, and the check that
an assistant turn (template or LLM rewrite) still carries it.

For an open numeric answer (GSM8K's `#### N`) the unit comes from the question first: "how many
lego sets" is a count of lego sets, "in cents" is cents, "what percentage" is a percent, money
questions are dollars; only then from how the worked solution writes the result ("45 miles away").
A question that merely mentions money ("he sold them for $15 each; how many lego sets ...") is
not a money question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kame_data.records import LETTERS, SourceItem
from kame_data.text import spoken_words, to_spoken
from kame_data.text.numbers import numbers_said

_NUMBER = r"\$?\s?-?\d[\d,]*(?:\.\d+)?"
_MONEY_WORDS = (r"cost|costs|spend|spent|pay|paid|pays|earn|earns|earned|earnings|save|saved|saves|price|worth|"
                r"charge|charged|owe|owes|profit|money|pension|salary|income|wage|wages|revenue|budget|fee|bill|tip|"
                r"change|expenditure|expenses|raise|make|makes|made")
_MONEY_Q = re.compile(rf"\bhow much (?:more |less |extra )?(?:money|in dollars)\b|\bhow many dollars\b|"
                      rf"\bin dollars\b|\bhow much\b[^?.]*\b(?:{_MONEY_WORDS})\b|"
                      rf"\b(?:what|calculate)\b[^?.]*\b(?:cost|price|profit|salary|pension|income|revenue|"
                      rf"expenditure|earnings|amount of money|amount (?:she|he|they) (?:had )?paid)\b", re.IGNORECASE)
_IN_UNIT = re.compile(r"\((?:in|expressed (?:in|as)(?: a)?) ([a-z ]+?)\)|,? in (cents|dollars|feet|inches|pounds|"
                      r"ounces|minutes|hours|seconds|days|weeks|months|years|miles|meters|kilometers|yards|"
                      r"gallons|liters|grams|kilograms|miles per hour)\b", re.IGNORECASE)
_STOP = set("do does did is are was were will would can could should has have had must might may shall be been "
            "in on at for to from per than by during with within into after before if when while that which who "
            "he she they it we you i his her their its this these those there here a an the each every all "
            "altogether together total now left still".split())
_SKIP = {"more", "fewer", "less", "total", "extra", "additional", "different", "whole"}
UNIT_WORDS = set("dollars dollar cents cent percent minutes minute hours hour seconds second days day weeks week "
                 "months month years year miles mile feet foot inches inch yards yard meters meter kilometers "
                 "kilometer centimeters centimeter pounds pound ounces ounce grams gram kilograms kilogram gallons "
                 "gallon liters liter cups cup mph degrees degree points point times".split())
_CURRENCIES = (("€", "euros"), ("£", "pounds"), ("$", "dollars"))
_IRREGULAR = {"people": "person", "feet": "foot", "children": "child", "men": "man", "women": "woman",
              "teeth": "tooth", "mice": "mouse", "geese": "goose", "dollars": "dollar", "cents": "cent"}


@dataclass(frozen=True)
class Target:
    """What the assistant must say: the option letter and text, or the number with its unit."""

    letter: str = ""  # the letter as the dialogue shows it ("" for open answers)
    text: str = ""  # the option text, or the display phrase of an open answer ("$18", "2 lego sets")
    number: str = ""  # the numeric answer ("18"), "" when the answer is not a number
    unit: str = ""  # "dollars", "percent", a noun ("lego sets"), or ""


def singular(noun: str) -> str:
    """'sets' -> 'set', 'people' -> 'person' (the answer 1 takes the singular)."""
    words = noun.split()
    if not words:
        return noun
    last = words[-1]
    low = last.lower()
    if low in _IRREGULAR:
        last = _IRREGULAR[low]
    elif low.endswith("ies") and len(low) > 4:
        last = last[:-3] + "y"
    elif low.endswith(("ches", "shes", "sses", "xes")):
        last = last[:-2]
    elif low.endswith("s") and not low.endswith("ss"):
        last = last[:-1]
    return " ".join(words[:-1] + [last])


def _head(noun_phrase: str) -> str:
    return noun_phrase.split(" of ")[0].split()[-1].lower() if noun_phrase.strip() else ""


def _asked_noun(question: str) -> str:
    """The thing counted in 'how many more lego sets does he ...' / 'the number of votes ...'."""
    found = list(re.finditer(r"\bhow many\s+|\b(?:total |the )number of\s+", question, re.IGNORECASE))
    if not found:
        return ""
    m = found[-1]  # the question asked is the last one
    words = re.findall(r"[A-Za-z0-9'-]+|[^\sA-Za-z0-9'-]", question[m.end():])
    out: list[str] = []
    for k, w in enumerate(words):
        low = w.lower()
        if not out and low in _SKIP:
            continue
        if low == "of" and out and k + 1 < len(words) and words[k + 1].lower() not in _STOP:
            out.append(w)
            continue
        if low == "of" and not out and k + 1 < len(words) and words[k + 1].lower() in ("the", "his", "her", "their"):
            continue
        if low in ("the", "his", "her", "their") and not out:
            continue
        if low in _STOP or not re.fullmatch(r"[A-Za-z0-9'-]+", w) or len(out) >= 4:
            break
        out.append(w)
        plural = (low.endswith("s") and len(low) > 2) or low in _IRREGULAR or low in ("sheep", "fish", "deer")
        if plural and not (k + 1 < len(words) and words[k + 1].lower() == "of"):
            break  # "how many cars drove through": the noun ends at its plural
    while out and out[-1].lower() == "of":
        out.pop()
    out = [w for w in out if not re.search(r"\d", w)]  # "3 30-minute episodes" would be heard as 330
    return "" if out and out[-1].lower() in ("ones", "one", "them") else " ".join(out)


def _solution_unit(item: SourceItem) -> str:
    """How the worked solution writes the result: '$64', '60%', '45 miles', '15 liters of water'."""
    value = float(item.answer.replace(",", ""))
    question = item.question.lower()
    for m in reversed(list(re.finditer(rf"(?<![\w.]){_NUMBER}(%?)", item.explanation))):
        text = m.group(0).replace("$", "").replace(",", "").replace("%", "").strip()
        try:
            if float(text) != value:
                continue
        except ValueError:
            continue
        if m.group(0).lstrip().startswith("$"):
            return "dollars"
        if m.group(1):
            return "percent"
        words = re.findall(r"[a-z]+", " ".join(item.explanation[m.end():].split()[:6]).split(".")[0].lower())
        unit: list[str] = []
        for k, word in enumerate(words[:4]):
            known = word in UNIT_WORDS or word in ("cubic", "square") or \
                (word not in _STOP and (word in question or singular(word) in question))
            if not known:
                break
            unit.append(word)
            if word in UNIT_WORDS or word.endswith("s") or word in _IRREGULAR:
                if k + 2 < len(words) and words[k + 1] in ("per", "of") and words[k + 2] in question:
                    unit += words[k + 1: k + 3]
                break
        else:
            unit = unit if unit and (unit[-1].endswith("s") or unit[-1] in UNIT_WORDS) else []
        if unit and (unit[-1].endswith("s") or unit[-1] in UNIT_WORDS or unit[-1] in _IRREGULAR
                     or (len(unit) >= 3 and unit[-2] in ("per", "of"))):
            return " ".join(unit)
        return ""
    return ""


def open_target(item: SourceItem) -> Target:
    """The number of a numeric answer and the unit to say it with."""
    answer = item.answer.strip()
    if not re.fullmatch(r"-?[\d,]*\.?\d+", answer):
        return Target(text=answer)
    number = answer.replace(",", "")
    q = item.question
    unit = ""
    asked = _IN_UNIT.search(q)
    if asked:
        unit = (asked.group(1) or asked.group(2)).lower().strip()
        unit = "percent" if unit.startswith("percent") else unit
    elif re.search(r"\bwhat percent(?:age)?\b|\bas a percent(?:age)?\b|\bpercentage of\b", q, re.IGNORECASE):
        unit = "percent"
    elif _asked_noun(q):
        unit = _asked_noun(q)
    elif re.search(r"\bhow old\b", q, re.IGNORECASE):
        unit = "years old"
    elif re.search(r"\bhow much (?:more |less |extra )?money\b|\bin dollars\b", q, re.IGNORECASE):
        unit = "dollars"
    else:
        unit = _solution_unit(item) if item.explanation else ""
        if not unit and _MONEY_Q.search(q) and re.search(r"\$|\bdollars?\b", q):
            unit = "dollars"
    if unit.lower() in ("dollars", "dollar"):
        symbol, name = next(((c, n) for c, n in _CURRENCIES if c in q), ("$", "dollars"))
        return Target(text=f"{symbol}{answer}", number=number, unit=name)
    if unit == "percent":
        return Target(text=f"{answer}%", number=number, unit="percent")
    unit = re.sub(r"^dozens of ", "dozen ", unit)  # "7 dozen eggs"
    if unit and number in ("1", "1.0", "-1"):
        unit = singular(unit) if unit != "years old" else "year old"
    return Target(text=f"{answer} {unit}".strip(), number=number, unit=unit)


def answer_positions(item: SourceItem) -> list[int] | None:
    """The options a multiple-choice item's answer letters name, in the item's order (HSSBench
    answers can be several letters, comma-joined); None when they do not name distinct options of
    the item (no letter, a letter past its options, one repeated, anything but A-Z)."""
    letters = item.answer_letter.split(",")
    if not all(len(a) == 1 and a in LETTERS for a in letters):
        return None
    positions = [LETTERS.index(a) for a in letters]
    if max(positions) >= len(item.options) or len(set(positions)) < len(positions):
        return None
    return positions


def choice_target(item: SourceItem, shown_letters: list[str]) -> Target:
    """A multiple-choice answer as the dialogue shows it (letters relabelled by the options read;
    none when no options are read, `mmlu_options: open`). The item's answer letters must name its
    options (`answer_positions`)."""
    texts = [item.options[i] for i in answer_positions(item) or []]
    return Target(letter=" and ".join(shown_letters), text=" and ".join(t.rstrip(".") for t in texts))



_FUNCTION = set("the a an of and or to in on at for is it its it's that this with by as be are was were".split())


def _last_sentence(spoken: str) -> str:
    parts = [p for p in re.split(r"(?<=[.!?])\s+", spoken.strip()) if spoken_words(p)]
    return parts[-1] if parts else ""


def _content(text: str) -> list[str]:
    return [w.lower() for w in spoken_words(to_spoken(text)) if w.lower() not in _FUNCTION]


def answer_lost(target: Target, spoken: str) -> str:
    """'' when a spoken assistant turn carries the answer, else what it lost. A choice must name its
    letter and most of its option's words; a number must be said, with its unit, in the turn's
    last sentence (where the answer is stated); any other answer must keep most of its words."""
    words = {w.lower() for w in spoken_words(spoken)}
    if target.letter:
        for letter in target.letter.split(" and "):
            if not re.search(rf"(?<![A-Za-z']){letter}(?=[,.:;)!?]|\s+(?:and|or)\b|$)", spoken):
                return f"option letter {letter} not said"
    if target.number:
        last = _last_sentence(spoken)
        if not _says(target, last):
            return f"the result {target.text!r} is not said at the end ({last[:60]!r})"
        return ""
    content = _content(target.text)
    if content:
        hits = sum(w in words for w in content)
        if hits < max(1, round(0.6 * len(content))):
            return f"{hits} of {len(content)} words of the answer {target.text[:40]!r}"
    return ""


def _unit_said(target: Target, spoken: str) -> bool:
    """Is the answer's unit in spoken text? Money, percents and measures must be; a counted noun
    may be named another way ("the number of children" for "how many kids")."""
    if target.unit in ("dollars", "euros", "pounds", "percent", "years old"):
        head = target.unit.split()[0]
    else:
        head = _head(re.split(r" per ", to_spoken(target.unit))[0])
        if not head or head not in UNIT_WORDS and singular(head) not in UNIT_WORDS:
            return True
    return re.search(rf"\b(?:{re.escape(head)}|{re.escape(singular(head))})\b", spoken, re.IGNORECASE) is not None


def _says(target: Target, spoken: str) -> bool:
    value = float(target.number)
    said = numbers_said(spoken)
    if value in said:
        return _unit_said(target, spoken)
    return target.unit == "dollars" and value * 100 in said and "cents" in spoken


def states(target: Target, text: str) -> bool:
    """Does a display sentence state the answer with its unit ('So he made a profit of $70,000.')?"""
    return bool(target.number) and not target.letter and _says(target, to_spoken(text))
