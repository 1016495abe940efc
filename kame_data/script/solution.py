"""A worked solution as a person would explain it aloud: the reasoning, with each calculation said
as its result.

"She makes 9 * 2 = $18 every day" becomes "She makes $18 every day"; "He spent $160 on games
because 8 x 20 = 160" loses its "because" clause; a step that is only a calculation ("3 * (16.50 +
22.50 + 42) = $243") is dropped; "...find the time until Windows restarts: 80 GB / 2 GB/minute = 40
minutes" ends ", that's 40 minutes". Algebra with unknowns ("x + x + 30 = 110") stays: it is
reasoning, not arithmetic. Sentences are then taken whole from the start, never from the middle.
"""

from __future__ import annotations

import re

from kame_data.text.numbers import FRACTION

_NUM = r"\d[\d,]*(?:\.\d+)?|\.\d+"
_OP = r"[-+*/x×÷–−]"
# Units written onto a number in worked solutions ("300g", "60g", "2GB").
_ATTACHED = r"(?:g|kg|km|m|cm|mm|lb|lbs|oz|ft|mi|ml|l|L|h|hr|hrs|min|s|GB|MB)"
_WORD = r"(?!x\b)(?!(?:and|or|is|are|was|were|of|to|the|a|an|so|then|which|that|for|in|on|at|by|if|it|per)\b)[A-Za-z]+['’]?"
# a qualifier after the quantity's noun ('5 cars that exited', '50 pieces of straw for hamsters', '7 days
# in a week'): a short phrase with no verb of its own that could start a new clause
_FREE = r"(?!(?:x|and|or|is|are|was|were|so|then|which|if|it|because|since|as|but|when|while)\b)[A-Za-z]+['’]?"
_QUALIFIER = rf"(?:\s+(?:that|who|for|in|on|at|from)(?:\s+{_FREE}){{1,3}})?"
_WORDS = rf"(?:\s+{_WORD}(?:/(?:1\s+)?{_WORD})?){{0,3}}(?:\s+(?:of|per)(?:\s+{_WORD}){{1,2}}){{0,2}}{_QUALIFIER}"
# a quantity in a calculation: '$12', '80,000', '3 1/2', '2/3', '20%', '80 miles/train', '15 4-packs', '(5280 feet/1 mile)'
# A term matches its text one way only, so a long chain without its '=' fails in linear time
# instead of trying every way to share it out (exponential): spaces belong to a bracket or a '$'
# (or to the operator between terms), never to two optional parts in a row, and a fraction is two
# terms and an operator ('2/2 = 1' is a calculation), never a term of its own as well.
_TERM = rf"(?:\(\s*)?(?:\$\s?)?(?:\d+\s+{FRACTION}|{_NUM})(?:{_ATTACHED}\b)?%?(?:/{_WORD})?{_WORDS}(?:\s*\))?"
_EXPR = rf"{_TERM}(?:\s*{_OP}\s*{_TERM})+"
_RESULT = rf"\$?\s?-?(?:\d+/\d+|{_NUM})%?"
# 'E = R', 'E = E = R': the result is kept, the working goes (not inside algebra: nothing
# before the expression may be an operator or a letter glued to it, nothing after the result
# may be an operator)
_CALC = re.compile(rf"(?<![\w.$%)])(?<!{_OP})(?<!{_OP} )(?:{_EXPR}\s*=\s*)+({_RESULT})(?!\s*{_OP}\s*\(?\$?\d)(?![\d.,]*\d)")
_BARE_EQ = re.compile(rf"(?<![\w.$%)(])(?<!{_OP})(?<!{_OP} )\(?\s*\$?\s?(?:{_NUM})\s*\)?\s*=\s*({_RESULT})(?!\s*{_OP})")
_CONNECTIVE = re.compile(r"^(?:so|thus|therefore|hence|then|and|also|but|which|now)\b,?\s*", re.IGNORECASE)


def collapse(step: str) -> str:
    """One worked sentence with each calculation replaced by its result."""
    s = re.sub(r"(?<=\d)\((?=\s*[\d.$])", " * (", step)  # '4(100)=400': a product
    s = re.sub(r"\)\s*\((?=\s*[\d.$])", ") * (", s)
    for _ in range(3):  # nested or chained calculations
        new = _CALC.sub(_result, s)
        new = _BARE_EQ.sub(_result, new)  # "(520) = 520"
        if new == s:
            break
        s = new
    # "because 8 x 20 = 160" -> "because 160": the reason was the calculation; drop it
    s = re.sub(rf",?\s*\b(?:because|since|as)\s+(?:{_RESULT})(?:\s+[a-z]+)?\s*(?=[.!?]?$)", "", s)
    # "...to find the time until Windows restarts: 40 minutes" -> "..., that's 40 minutes"
    s = re.sub(rf":\s*(?=\$?\d[^:]*$)", ", that's ", s)
    return " ".join(s.split())


def _result(m: re.Match) -> str:
    """The result of a calculation, keeping the space before it ("So, 16 students")."""
    return m.group(0)[: len(m.group(0)) - len(m.group(0).lstrip())] + m.group(1).strip()


def _has_words(sentence: str) -> bool:
    """A sentence with something to say besides numbers, units and signs."""
    words = re.findall(r"[A-Za-z]{2,}", re.sub(r"\b(?:that's|that|is)\b", " ", sentence))
    return len(words) >= 2


def sentences(explanation: str) -> list[str]:
    """The solution's sentences, each said with its results only; empty ones dropped."""
    parts = [p for p in re.split(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\b[MD]r\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bvs\.)"
                                 r"(?<=[.!?])\s+(?=[A-Z$\d(\"'‘“]|[a-z]\s*[-+*/=])", " ".join(explanation.split())) if p]
    out = []
    for part in parts:
        said = collapse(part)
        if not _has_words(said):
            continue
        said = said.rstrip(" ,;:")
        out.append(said if said[-1:] in ".!?" else said + ".")
    if out:  # the first sentence starts the explanation: no "So," or "Thus" before anything was said
        first = _CONNECTIVE.sub("", out[0])
        out[0] = first[:1].upper() + first[1:]
    return out


def lead(explanation: str, max_words: int) -> tuple[list[str], bool]:
    """Whole sentences from the start of the solution within `max_words` (the first one may run to
    twice that), and whether they are the whole solution."""
    said = sentences(explanation)
    kept: list[str] = []
    for s in said:
        limit = 2 * max_words if not kept else max_words
        if len(" ".join(kept + [s]).split()) > limit:
            break
        kept.append(s)
    return kept, len(kept) == len(said)
