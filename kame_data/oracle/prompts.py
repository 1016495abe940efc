"""Every word the simulator is shown: the system text, the few-shot examples, the per-level
instruction and how much of the hint each level reveals. Change any of it and bump
PROMPT_VERSION: it is part of the oracle step's identity (checkpoints) and of the manifest.

A small simulator cannot follow "use the hint, but not verbatim"; it copies what it is shown.
So each level shows a larger view of the hint (docs/design.md: level 1 keywords … level 4 close to the
hint), and the hint's influence grows with the level by construction:
  0  no hint;  1  about a third of the hint's content words;  2  three quarters of them;
  3  all of them (each level as the runs of the hint they stand in);  4  the hint itself.
Where the backend takes a prefilled answer, levels 3 and 4 also start the answer with the hint's
first words (REPLY_START_SHARE), and the model continues from there.
The few-shot examples were written for kame-data (no benchmark text) and show one reply per level.
"""

from __future__ import annotations

import math
import re

from kame_data.llm.base import ChatRequest
from kame_data.oracle.ladder import LadderStep
from kame_data.records import ROLE
from kame_data.text.numbers import NUMBER_WORD

PROMPT_VERSION = "6"  # 4: the hint is shown as written, punctuation kept (oracle/shown.py); 5: one full stop; 6: clue phrases

SYSTEM = (
    "You write what the next speaker of a spoken conversation says next. Answer as that speaker, "
    "in one or two short spoken sentences. Never describe the conversation, never repeat the "
    "question, no lists, no quotes, no markup."
)

# What each level may show of the hint: the share of its content words (level 4: the hint itself).
KEYWORD_SHARE = {1: 0.3, 2: 0.75, 3: 1.0}
MAX_KEYWORDS = {1: 4, 2: 8, 3: 12}

INSTRUCTIONS = {
    0: "No clue yet. Guess what {who} says.",
    1: "Clue: {clue} Guess what {who} says, using the clue.",
    2: "Clue: {clue} {who} says a short sentence with all of these words.",
    3: "Clue: {clue} {who} says a short sentence with all of these words.",
    4: "{who} will say: {clue} Say it nearly the same way.",
}
_END = ".!?"  # a clue ending in one of these is a finished sentence: no full stop is added

# Levels whose answer starts with the hint's first words (a share of them), for backends that take
# a prefilled answer (the embedded model). Shown the whole hint and told to say it "nearly the same
# way", SmolLM2-135M still wandered off it (level-4 token-F1 0.31, barely above level 3's 0.29 on
# 307 fixture and quickstart steps). So level 3 (the hint "an important clue") starts on its first
# quarter and level 4 ("use the hint rather directly") on its first half; the model goes on in its
# own words. Token-F1 by level 0-4 on those steps went from 0.145, 0.187, 0.275, 0.289, 0.307 (prompts
# v2) to 0.146, 0.242, 0.314, 0.570, 0.782 with these shares and the keyword shares above (before
# the cap below).
REPLY_START_SHARE = {3: 0.25, 4: 0.5}
# ... and at most this many words of it, so that the model always says most of a 30-word prediction
# itself (half of a long worked answer would otherwise fill the whole prediction, verbatim).
MAX_REPLY_START_WORDS = 12

# Few-shot examples: (conversation, level, hint, reply), one per level. Written for this project.
EXAMPLES = (
    ("B: Quick question. Which gas do plants take in from the air", 0,
     "It's B, carbon dioxide. Plants use it with sunlight to make sugar.",
     "Plants take in carbon dioxide from the air to make their food."),
    ("B: Can you help me with this? A baker makes twelve rolls an hour. How many rolls does she make in", 1,
     "Twelve times five equals sixty. So the answer is sixty rolls.",
     "She makes twelve rolls an hour, so it is twelve times the hours."),
    ("B: Here's a tricky one. Which river flows through Cairo? Is it A, the Amazon; B, the Nile; C, the", 2,
     "The answer is B, the Nile. It runs north through Egypt into the Mediterranean Sea.",
     "The answer is B, the Nile. It runs north to the sea."),
    ("B: At sea level, water boils at what temperature? Would it be A, fifty degrees; B, one hundred degrees;"
     " or C, two", 3,
     "It's B, one hundred degrees. That's the boiling point of water at sea level.",
     "It's B, one hundred degrees. That is the boiling point of water."),
    ("B: Tom has three apples and buys five more. How many apples does he", 4,
     "Three plus five equals eight. So the answer is eight apples.",
     "Three plus five equals eight, so the answer is eight apples."),
)

# Function words never shown as clue words: they carry no content a listener could predict from.
FUNCTION_WORDS = frozenset("""
a an the and or but so of to in on at by for from with as is are was were be been being it its it's
that that's this these those there here then than i i'd i'm you we they he she his her their our your my me
us them do does did done not no yes if into about which what who whom whose how why when where
would could should will can may might must shall just very also because since while let let's
""".split())
_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")


def speaker_name(speaker: str) -> str:
    return ROLE.get(speaker, "the other speaker").capitalize()


def _content(text: str, letters: bool) -> list[str]:
    """The words of `text` that carry content (no function words; with `letters`, an option letter
    such as "B" counts), in order, once each (compared without case)."""
    out: list[str] = []
    seen: set[str] = set()
    for w in _WORD.findall(text):
        low = w.lower()
        if (low not in FUNCTION_WORDS or letters and len(w) == 1 and w.isupper()) and low not in seen:
            seen.add(low)
            out.append(w)
    return out


def content_words(text: str) -> list[str]:
    """The lowercase content words of `text`, in order, once each."""
    return [w.lower() for w in _content(text, letters=False)]


def clue_words(hint: str, level: int) -> list[str]:
    """The hint's content words a level may show: the first share of them, in the hint's order."""
    return _content(" ".join(" ".join(p) for p in clue_phrases(hint, level)), letters=True)


# A number said in words runs across "and" ("two hundred and four"): one phrase, not two.
_NUMBER = re.compile(rf"(?:{NUMBER_WORD}|billion|point)$", re.IGNORECASE)
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?|[^\sA-Za-z0-9]")


def _phrase_runs(hint: str) -> list[list[str]]:
    """The hint's runs of content words, in order: a function word or a punctuation mark ends one,
    except an "and" inside a number ("two hundred and four dollars" stays one run)."""
    toks = _TOKEN.findall(hint)
    runs: list[list[str]] = [[]]
    for i, t in enumerate(toks):
        word = t[0].isalnum()
        if word and _content(t, True) == [t]:
            runs[-1].append(t)
        elif (t.lower() == "and" and runs[-1] and _NUMBER.match(runs[-1][-1])
              and i + 1 < len(toks) and _NUMBER.match(toks[i + 1])):
            runs[-1].append(t)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def clue_phrases(hint: str, level: int) -> list[list[str]]:
    """What a level shows of the hint: its runs of content words, in order, until they hold the level's
    share of its distinct content words (the last run cut there); a run that adds no new word is left
    out. Shown as phrases, not loose words: shown "fifty, six, dollars, eighty, cents", a small
    model answered "five, dollars, eighty, cents"; "fifty six dollars, eighty six cents" it can say."""
    total = len(_content(hint, letters=True))
    if not total:
        return []
    budget = max(1, min(MAX_KEYWORDS[level], math.ceil(total * KEYWORD_SHARE[level])))
    seen: set[str] = set()
    out: list[list[str]] = []
    for run in _phrase_runs(hint):
        if len(seen) >= budget:
            break
        if all(w.lower() in seen for w in run if w.lower() != "and"):
            continue
        kept: list[str] = []
        for w in run:
            if w.lower() not in seen and w.lower() != "and" and len(seen) >= budget:
                break
            kept.append(w)
            if w.lower() != "and":
                seen.add(w.lower())
        while kept and kept[-1].lower() == "and":
            kept.pop()
        out.append(kept)
    return out


def clue(hint: str, level: int) -> str:
    """What the prompt shows of the hint at `level` ('' at level 0)."""
    if level <= 0:
        return ""
    if level >= 4:
        return hint
    return ", ".join(" ".join(run) for run in clue_phrases(hint, level))


def _as_sentence(shown: str) -> str:
    """The clue closed by one full stop: a hint shown as written already ends its sentence ("...
    eight apples." not "eight apples.."), and a turn cut mid-clause drops its trailing comma."""
    shown = shown.strip().rstrip(",;:-")
    if not any(c.isalnum() for c in shown):
        return ""  # punctuation alone shows nothing
    return shown if shown[-1] in _END else shown + "."


def _context(conversation: str) -> str:
    """The reference context with the speakers named by role (A: -> Assistant:)."""
    lines = []
    for line in conversation.split("\n"):
        speaker, _, words = line.partition(": ")
        lines.append(f"{speaker_name(speaker)}: {words}" if speaker in ROLE else line)
    return "\n".join(lines)


def user_message(conversation: str, level: int, hint: str, next_speaker: str) -> str:
    """One request's question: the context, then the level's instruction with its view of the hint.
    The context comes first, so consecutive steps of a dialogue share all but their last words."""
    who = speaker_name(next_speaker)
    shown = _as_sentence(clue(hint, level))
    text = INSTRUCTIONS[min(level, 4) if shown else 0].format(who=who, clue=shown)  # nothing to show: no clue
    return f"{_context(conversation)}\n\n{text}"


def shared_messages() -> tuple[tuple[str, str], ...]:
    """The system text and the few-shot turns: the same leading messages in every request, so an
    embedded model evaluates them once."""
    out = [("system", SYSTEM)]
    for conversation, level, hint, reply in EXAMPLES:
        out += [("user", user_message(conversation, level, hint, "A")), ("assistant", reply)]
    return tuple(out)


_SHARED = shared_messages()


def reply_start(hint: str, level: int) -> str:
    """The first words of the hint a level writes as the start of the simulator's answer ('' below
    the levels of REPLY_START_SHARE); never the whole hint, so the model always says something."""
    share = REPLY_START_SHARE.get(level, 0.0)
    words = hint.split()
    if share <= 0 or len(words) < 2:
        return ""
    n = min(len(words) - 1, MAX_REPLY_START_WORDS, max(1, math.ceil(len(words) * share)))
    return " ".join(words[:n])


def build_request(step: LadderStep, max_tokens: int, temperature: float, seed: int, prefill: bool = False,
                  item: str = "") -> ChatRequest:
    """The simulator request for a step below level 5 (level 5 needs no call: the hint is the answer).
    `prefill`: the backend writes `reply_start` as the start of the answer (an embedded model);
    `item`: the dialogue it is for (not part of the request's identity)."""
    question = user_message(step.conversation_context, step.level, step.reply_shown, step.next_speaker)
    return ChatRequest(messages=_SHARED + (("user", question),), max_tokens=max_tokens,
                       temperature=temperature, seed=seed,
                       reply_start=reply_start(step.reply_shown, step.level) if prefill else "", item=item)
