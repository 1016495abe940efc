"""From model output to a spoken reply, and the ways an output fails to be one.

A small simulator often answers *about* the conversation ("A's next response would be …",
"responds: …", "You cannot predict …"), repeats the user's words, says the same words over and
over, stops after a word or two, or runs out of tokens mid-word. `classify` names each of these so
the stage can ask again (within its retry budget) and count every kind in the manifest.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from text_to_num import alpha2digit

from kame_data.oracle.metrics import tokens
from kame_data.oracle.prompts import EXAMPLES, FUNCTION_WORDS, INSTRUCTIONS, content_words
from kame_data.text import to_spoken
from kame_data.text.numbers import NUMBER_WORD, TENS_WORDS, UNIT_WORDS, numbers_said

MIN_WORDS, MAX_WORDS = 3, 30
# Bump when `classify` or `clean_prediction` changes what is kept: the oracle step's identity carries
# it, so checkpointed ladders are rebuilt (the LLM cache still answers every request). 2: a run shared
# with a few-shot example counts as a copy only when it holds one of that example's own words; 3: a run
# copied from the conversation is no echo when the hint shows all of its content words.
# 4: the prompt's own instruction sentences are cut out of a prediction that repeats them, and a reply
# clipped to MAX_WORDS ends at its last clause break rather than mid-phrase; "twelve x four" is "twelve times four",
# "twenty-three" is "twenty three".
# 5: a reply that says the same words over and over is a LOOP; talk about the task ("a short sentence with
# all of these words", "guess what Assistant says") is META.
# 6: a reply at a level that shows a clue and says none of its words is IGNORES_CLUE: asked again, kept when
# no attempt does better.
# 7: a reply that names only other option letters, or only other numbers, than the clue shows is
# CONTRADICTS_CLUE ("The answer is A, three dollars." under "D, two dollars"): asked again, like IGNORES_CLUE.
# 8: a reply replaces a poor one only when it says at least as many of the clue's words (oracle/stage.py).
# 9: a reply names the letters it joins with "and"/"or" ("A and B") and one after "option"/"letter"/"choice"
# ("option B is right"), so "A and B." under "A, D" no longer contradicts the clue.
# 10: a reply that is one clause said twice and nothing else ("The answer is no, the answer is no.") is a LOOP.
# 11: so is one whose clause said twice fills three quarters of it while the rest adds no content word
# ("The answer is two, so the answer is two.").
REPLIES_VERSION = "11"

# Kinds of non-replies, in the order they are checked.
EMPTY, SHORT, META, ECHO, CUT, EXAMPLE, LOOP = "empty", "too_short", "meta", "echo", "cut", "example", "loop"
KINDS = (EMPTY, SHORT, META, ECHO, CUT, EXAMPLE, LOOP)
# A reply that is usable but poor: asked again within the retries, and kept when no attempt gives a
# reply (the event is not dropped for it).
IGNORES_CLUE, CONTRADICTS_CLUE = "ignores_clue", "contradicts_clue"
SOFT = (IGNORES_CLUE, CONTRADICTS_CLUE)

# A speaker label ("A:", "Assistant says", "Reply -"): a name, then a colon, a dash or a speech verb.
# Without one the word is the reply's own ("A baker makes…", "B, the Nile", "Answer is…"): kept.
_LABEL = re.compile(r"^\s*(?:(?:speaker\s+)?[AB]|assistant|user|answer|hint|clue|response|reply|model)\s*"
                    r"(?:(?:says|said|responds|replies)\s*[:,-]?|[:-])\s+", re.IGNORECASE)
_OTHER_LINE = re.compile(r"^\s*(?:(?:speaker\s+)?[AB]|assistant|user|###)\s*:?", re.IGNORECASE)

# Talk about the conversation instead of a reply in it.
_META = re.compile(
    r"\b(?:next\s+(?:response|reply|turn|sentence|thing\s+(?:they|he|she)\s+says?)|(?:speaker|person)\s+[AB]\b|"
    r"[AB]'s\s+(?:next|reply|response|answer|turn)|(?:cannot|can't|can\s+not|impossible\s+to)\s+(?:predict|tell|know)|"
    r"predictions?|the\s+(?:conversation|hint|clue|clue\s+words)\b|(?:no|a|any)\s+(?:hint|clue)|as\s+an\s+ai|"
    # the instruction, reworded into the answer: "I'll just make it a sentence with all of these words"
    r"all\s+(?:of\s+)?(?:these|the|those)\s+words|short\s+sentence|nearly\s+the\s+same\s+way|"
    r"guess\s+what\s+(?:assistant|user|the\s+other\s+speaker|(?:I|he|she|they)\s+(?:would\s+)?says?)\b)\b"
    r"|^\s*(?:responds|replies|says|answers|no\s+answer)\b",
    re.IGNORECASE)
_TIMES = re.compile(rf"\b({NUMBER_WORD})\s+[x×]\s+(?={NUMBER_WORD}\b)", re.IGNORECASE)
_HYPHENATED = re.compile(rf"\b({TENS_WORDS})-({UNIT_WORDS})\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?]['\")\]]*$")
_LETTER = re.compile(r"\b[A-Z]\b")  # an option letter a clue names
# An option letter a reply names: a capital alone before a clause break or the end ("It's B, the Nile",
# "The answer is D."), before "and"/"or" and another letter ("A and B", "A or C"), or after a word
# that announces one ("option B is right"); never "I", nor an article ("A baker makes").
_OPTION = re.compile(r"\b([A-HJ-Z])\b(?=\s*(?:[,.;:!?)]|$)|\s+(?:and|or)\s+[A-HJ-Z]\b)"
                     r"|\b(?:[Oo]ptions?|[Ll]etter|[Cc]hoice)\s+([A-HJ-Z])\b")


def _instruction_sentences() -> re.Pattern:
    """The sentences of the level instructions that hold no clue ("Say it nearly the same way."):
    a small model that was shown one right after the hint's last full stop may go on to write it
    as part of the reply (~8% of level-4 answers of SmolLM2-135M, prompts v5)."""
    said = set()
    for template in INSTRUCTIONS.values():
        for part in re.split(r"[^.?!]*\{clue\}", template):
            said.update(x.strip() for x in re.findall(r"[^.?!]+[.?!]?", part) if x.strip(" .?!"))
    alternatives = []
    for sentence in sorted(said, key=len, reverse=True):
        body = re.escape(sentence.rstrip(".?!")).replace(re.escape("{who}"), r"(?:assistant|user|the\s+other\s+speaker)")
        alternatives.append(body.replace(r"\ ", r"\s+"))
    return re.compile(r"(?:^|(?<=[.!?,;:]))\s*(?:%s)\s*[.!?]?(?=\s|$)" % "|".join(alternatives), re.IGNORECASE)


_INSTRUCTION = _instruction_sentences()


def clean_prediction(text: str) -> str:
    """Model output -> short spoken text: no labels, quotes, markup or lists; at most 30 words."""
    lines = text.replace("\r", "").split("\n")
    kept: list[str] = []
    for i, ln in enumerate(lines):
        if i > 0 and (_OTHER_LINE.match(ln) or (not ln.strip() and kept)):
            break  # the model went on to write another turn
        ln = re.sub(r"^\s*(?:[-*•>#]+|\d+[.)])\s*", "", ln)
        if ln.strip():
            kept.append(ln.strip())
    out = " ".join(kept)
    for _ in range(2):
        out = _LABEL.sub("", out)
    out = re.sub(r"[*_`#<>\[\]{}|\"“”]", "", out)
    out = _INSTRUCTION.sub(" ", out)
    out = re.sub(r"\s+", " ", out).strip().strip("'").strip()
    # The true reply is spoken text (number words, no symbols); a prediction says "twelve plus four
    # equals sixteen" the same way, not "12 + 4 = 16".
    out = to_spoken(out) if re.search(r"[0-9%$£€+=/^]", out) else out
    out = _TIMES.sub(r"\1 times ", out)  # "twelve x four": the letter a model writes for times
    out = _HYPHENATED.sub(r"\1 \2", out)  # "twenty-three" as spoken text writes it: "twenty three"
    return _clip(out)


def _clip(text: str) -> str:
    """At most MAX_WORDS words, ended where a speaker could stop: the last sentence end that keeps 10
    words or more, else the last clause break (',', ';', ':') that does, closed with a full stop;
    only with neither is the reply cut mid-phrase."""
    words = text.split()
    if len(words) <= MAX_WORDS:
        return text
    clipped = " ".join(words[:MAX_WORDS])
    end = max(clipped.rfind(f"{m} ") for m in ".?!")
    if end > 0 and len(clipped[:end].split()) >= 10:
        return clipped[:end + 1]
    brk = max(clipped.rfind(f"{m} ") for m in ",;:")
    if brk > 0 and len(clipped[:brk].split()) >= 10:
        return clipped[:brk] + "."
    return clipped


def repair_cut(text: str) -> str:
    """An output that ran out of tokens, back to its last whole sentence ('' when none is left)."""
    if _SENTENCE_END.search(text):
        return text
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)", text)]
    return text[: ends[-1]] if ends else ""


def _copied_runs(a: list[str], b: list[str], n: int) -> list[list[str]]:
    """Every run of `n` or more tokens of `a` that `b` holds too (as the tokens of `a`)."""
    runs = []
    prev = [0] * (len(b) + 1)
    for i, x in enumerate(a):
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                k = cur[j + 1] = prev[j] + 1
                if k >= n:
                    runs.append(a[i - k + 1: i + 1])
        prev = cur
    return runs


def _longest_common_run(a: list[str], b: list[str], holding: frozenset[str] | None = None) -> int:
    """Length of the longest run of tokens that `a` and `b` share (both short: quadratic is fine);
    with `holding`, of the longest such run that holds one of those tokens."""
    return max((len(run) for run in _copied_runs(a, b, 1) if holding is None or not holding.isdisjoint(run)),
               default=0)


def echoes(prediction: str, context: str, shown: str = "") -> bool:
    """True when the prediction mostly repeats the conversation: a run of at least 6 of its tokens,
    covering half of them or more, copied from the context and not accounted for by the hint the model
    was shown. A run is accounted for when the hint shows all of its content words: a multiple-choice
    answer may quote the option the hint names, "That would be C, one thousand nine hundred and
    eighty" under the clue "C, one, thousand, nine, hundred, eighty" (the clue drops the "and")."""
    p = tokens(prediction)
    allowed = set(content_words(shown))
    return any(not set(content_words(" ".join(run))) <= allowed
               for run in _copied_runs(p, tokens(context), max(6, math.ceil(len(p) / 2))))


_EXAMPLE_TOKENS = [tokens(f"{hint} {reply}") for _, _, hint, reply in EXAMPLES]
# Each example's own content words ("apples", "eight", "nile"), beyond what any answer says.
_GENERIC = frozenset("""answer say says guess think right sure okay well yes quick question help tricky here's
make makes take takes use uses many more has have buys one through runs flows level point times equals plus
hour hours""".split())
_EXAMPLE_WORDS = [frozenset(w for w in content_words(f"{conv} {hint} {reply}") if len(w) > 2 and w not in _GENERIC)
                  for conv, _, hint, reply in EXAMPLES]


def copies_example(prediction: str, context: str, shown: str = "") -> bool:
    """True when the prediction carries what a few-shot example says and the conversation and the
    hint do not account for: a run of 5+ of an example's tokens holding one of its own words, or 2+
    of one example's content words, one of them not a number (seen at level 0 on a question about
    notebooks or force: "The answer is eight apples.", "I'll just guess. It's eight apples.")."""
    p = tokens(prediction)
    # The run must hold one of the example's own words: "the answer is B, the" is how any
    # multiple-choice reply starts, not a copy of "The answer is B, the Nile".
    run = max(_longest_common_run(p, ex, words) for ex, words in zip(_EXAMPLE_TOKENS, _EXAMPLE_WORDS))
    if run >= 5 and _longest_common_run(p, tokens(f"{context} {shown}")) < run:
        return True
    own = set(content_words(prediction)) - set(content_words(f"{context} {shown}"))
    for words in _EXAMPLE_WORDS:
        borrowed = own & words
        if len(borrowed) >= 2 and any(not _is_number(w) for w in borrowed):
            return True
    return False


def _is_number(word: str) -> bool:
    return alpha2digit(word, "en", threshold=0).isdigit()


def classify(text: str, context: str, shown: str = "", truncated: bool = False, anchored: bool = False) -> str:
    """'' for a usable reply, else the kind of non-reply (one of KINDS) or of poor reply (SOFT).
    `text` is already cleaned; `truncated`: the model stopped at its token limit (the end may be cut
    mid-word); `anchored`: the answer was started on the hint's own words (prompts.reply_start), and
    is not judged for contradicting the clue (see `contradicts_clue`)."""
    if not text.strip():
        return EMPTY
    if truncated and not _SENTENCE_END.search(text):
        return CUT
    if len(text.split()) < MIN_WORDS:
        return SHORT
    if _META.search(text):
        return META
    if echoes(text, context, shown):
        return ECHO
    if copies_example(text, context, shown):
        return EXAMPLE
    if loops(text):
        return LOOP
    if ignores_clue(text, shown):
        return IGNORES_CLUE
    if not anchored and contradicts_clue(text, shown):
        return CONTRADICTS_CLUE
    return ""


def usable(kind: str) -> bool:
    """Whether a prediction of this kind ('' for a reply) may stand as the event's prediction."""
    return not kind or kind in SOFT


def ignores_clue(prediction: str, shown: str) -> bool:
    """True when the prompt showed a clue and the prediction says none of its content words: "The
    answer is B." under the clue "D", "No, it's not." under "Sure, Janet sells nine duck eggs". A
    simulator shown part of the reply builds on it; SmolLM2-135M ignored the clue in 42% of its
    level-1 and 12% of its level-2 replies (prompts v6, 64 fixture dialogues). Both sides are read
    as token-F1 reads them (`metrics.tokens`); an option letter counts ("D", and "A" though it is
    also the article), and a clue of function words only asks nothing."""
    words = _clue_words(shown)
    return bool(words) and words.isdisjoint(tokens(prediction))


def _clue_words(shown: str) -> set[str]:
    return {t for t in tokens(shown) if t not in FUNCTION_WORDS} | {x.lower() for x in _LETTER.findall(shown)}


def clue_words_said(prediction: str, shown: str) -> int:
    """How many of the clue's content words the prediction says (read as `ignores_clue` reads them)."""
    return len(_clue_words(shown) & set(tokens(prediction)))


# A number said in words: "fifteen", "one hundred and twenty one", "two point five", "twenty-three".
_NUMBER_RUN = re.compile(rf"\b{NUMBER_WORD}(?:(?:\s+|-)(?:(?:and|point)\s+)?{NUMBER_WORD})*\b", re.IGNORECASE)


def _number_runs(spoken: str) -> list[tuple[str, ...]]:
    """The numbers a spoken text says, as their words; "one" alone is left out ("the one that...")."""
    runs = [tuple(m.group(0).lower().replace("-", " ").split()) for m in _NUMBER_RUN.finditer(spoken)]
    return [r for r in runs if r != ("one",)]


def _same_number(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """The same value, or one said as the start of the other: a clue's last phrase may be cut ("B, one
    hundred" of "one hundred and twenty one dollars"), and so may a reply."""
    n = min(len(a), len(b))
    return a[:n] == b[:n] or numbers_said(" ".join(a)) == numbers_said(" ".join(b))


def contradicts_clue(prediction: str, shown: str) -> bool:
    """True when the prediction names option letters and none is one the clue shows ("The answer is
    A, three dollars." under "D, two dollars"), or says numbers and none is one the clue says ("the
    discount is fifty five cents" under "discount, 5 dollars, price, 15 dollars"). It builds on the
    clue's words but answers otherwise, so it is asked again, like a reply that ignores the clue
    (prompts v6, 64 fixture dialogues, SmolLM2-135M: 24% of level-2 and 13% of level-3 replies; their
    token-F1 0.29 and 0.51 against 0.36 and 0.64 for the rest). A reply that also names a shown
    letter or number is no contradiction: it may be weighing the options or working the sum.
    An answer started on the hint's own words (levels 3-4 of the embedded model) is not asked again for
    it: asked again, it wandered off ("I'd go the Inca Empire, but I'm not sure it's the one you're
    thinking of…"), and level-3 token-F1 fell by 0.007 where levels 1-2 rose."""
    letters = {x for x in _LETTER.findall(shown) if x != "I"}
    named = {x for pair in _OPTION.findall(prediction) for x in pair if x}
    if letters and named and letters.isdisjoint(named):
        return True
    numbers, said = _number_runs(to_spoken(shown)), _number_runs(prediction)
    return bool(numbers and said) and not any(_same_number(a, b) for a in numbers for b in said)


LOOP_RUN, LOOP_TIMES = 4, 3
# A clause said twice is a loop when the two copies hold at least this share of the reply and the rest
# adds no word of substance. On the 455 assistant replies the fixtures' scripts write, the longest
# clause said twice covers at most 0.67 of any 30 words ("First find the total number of spider legs,
# … Then find the total number of insect legs, …"; 99th percentile 0.48).
LOOP_COVER = 0.75
# Words that frame an answer without adding to it ("The correct answer is C, Max Weber.").
FRAMING = frozenset({"answer", "correct", "right", "okay", "sure", "yes", "say"})


def loops(prediction: str) -> bool:
    """True when a run of LOOP_RUN tokens comes LOOP_TIMES times or more: the sampler caught in a loop
    ("she will get the answer to her question, she will get the answer to her question, she will …"),
    or when the reply is one clause of three or more words said twice with nothing of substance
    besides: "The answer is no, the answer is no." (replies v10), "The answer is two, so the answer is
    two." or "… one thousand nine hundred and sixty one, which is one thousand nine hundred and sixty
    one.", "The answer is C, Max Weber. The correct answer is C, Max Weber." (v11). A reply that says
    its answer twice in other words ("It's B. So the answer is B.") or says more the second time
    ("The Chinese New Year. The Chinese New Year is a lunar holiday.") is no loop."""
    p = tokens(prediction)
    runs = [tuple(p[i:i + LOOP_RUN]) for i in range(len(p) - LOOP_RUN + 1)]
    if any(n >= LOOP_TIMES for n in Counter(runs).values()):
        return True
    said_twice = _clause_said_twice(p, max(3, math.ceil(LOOP_COVER * len(p) / 2)))
    if said_twice is None:
        return False
    first, second, n = said_twice
    rest = p[:first] + p[first + n:second] + p[second + n:]
    return not set(content_words(" ".join(rest))) - set(p[first:first + n]) - FRAMING


def _clause_said_twice(p: list[str], n: int) -> tuple[int, int, int] | None:
    """Where a run of at least `n` tokens comes twice without overlapping, grown to its longest:
    (first start, second start, length); None when no run of `n` does."""
    found = None
    while n <= len(p) // 2:
        starts: dict[tuple[str, ...], int] = {}
        for i in range(len(p) - n + 1):
            j = starts.setdefault(tuple(p[i:i + n]), i)
            if i >= j + n:
                found = (j, i, n)
                break
        else:
            return found
        n += 1
    return found
