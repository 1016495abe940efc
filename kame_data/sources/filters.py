"""Speech-suitability filters: is an item something two people could say to each other?

Each filter is a pure function `(item, cfg) -> Flag | None`: a reason code (the one written to
rejects.jsonl) and a human detail, or None when the item passes. `check` runs them in a fixed
order and returns the first flag, so an item's reason does not depend on anything but itself.
Duplicates are the one cross-item check; `dedup_key` gives the text they are compared on.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable, NamedTuple

from kame_data.records import LETTERS, SourceItem
from kame_data.sources.config import FilterConfig
from kame_data.sources.pictures import context_reference, picture_reference
from kame_data.text import spoken_seconds, spoken_words, to_spoken


class Flag(NamedTuple):
    reason: str
    detail: str


def _texts(item: SourceItem) -> list[str]:
    """The user-side text: what would be read to the assistant."""
    return [item.question] + [f.question for f in item.followups]


def _all_text(item: SourceItem) -> str:
    parts = _texts(item) + list(item.options) + [item.answer] + [f.answer for f in item.followups]
    return "\n".join(p for p in parts if p)


# ---------------------------------------------------------------- malformed answer

def malformed_answer(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """An answer with nothing to say (e.g. only punctuation) cannot close a dialogue."""
    if item.answer and not spoken_words(to_spoken(item.answer)):
        return Flag("malformed_answer", f"answer {item.answer[:40]!r} has no speakable words")
    if item.answer_letter and item.options and not item.answer.strip():
        return Flag("malformed_answer", "the answer option is empty")
    return None


# ---------------------------------------------------------------- language

# Function words of the languages benchmarks are most often translated into, minus any that are
# also English words: a Latin-script question with more of these than English ones is not English.
_FUNCTION_WORDS = {
    "en": frozenset("the of and to is are was were that this which what with for from by how why who not "
                    "be been have has had will would can could should does did it its they their there".split()),
    "fr": frozenset("le la les des est une et dans pour que qui sur avec pas du au ce cette sont aux ou "
                    "nous vous leur".split()),
    "es": frozenset("el los las del es una y en por que con para se su como más pero sus al lo".split()),
    "de": frozenset("der das und ist nicht ein eine mit zu den von auf für sich dem auch wie oder wird".split()),
    "it": frozenset("il gli della è una di che per non sono nel alla dei delle anche come più".split()),
    "pt": frozenset("os da do não uma em que com para são no na dos das como mais ao".split()),
}


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0] if name else "UNKNOWN"


def not_english(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """English TTS voices cannot read other scripts, and Latin-script text in another language
    would be read with English sounds. Greek letters pass: they are math symbols, read as words."""
    text = _all_text(item)
    foreign: dict[str, int] = {}
    for ch in text:
        if ch.isalpha() and not ch.isascii():
            script = _script(ch)
            if script not in ("LATIN", "GREEK", "MATHEMATICAL", "SCRIPT", "DOUBLE-STRUCK"):
                foreign[script] = foreign.get(script, 0) + 1
    if sum(foreign.values()) > cfg.max_foreign_letters:
        top = max(sorted(foreign), key=lambda s: foreign[s])
        return Flag("not_english", f"{sum(foreign.values())} letters of other scripts (mostly {top})")
    for k, text in enumerate([item.question] + list(item.options)):
        words = re.findall(r"[^\W\d_]{2,}", text.lower())
        counts = {lang: sum(w in vocab for w in words) for lang, vocab in _FUNCTION_WORDS.items()}
        lang = max(sorted(counts), key=lambda k: counts[k])
        if lang != "en" and counts[lang] >= cfg.min_foreign_words and counts[lang] > 2 * counts["en"]:
            where = "question" if k == 0 else f"option {k}"
            return Flag("not_english", f"{where}: {counts[lang]} function words of {lang!r}, {counts['en']} English ones")
    return None


# ---------------------------------------------------------------- things that need a picture or a missing text

# Option texts that are only marks on a picture: "①", "②—④".
_MARKS = re.compile(r"[\s①-⑳㉑-㉟\-—–,、()]+")


def needs_image(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """A question that points at a picture, map, chart or table it does not contain
    (kame_data/sources/pictures.py says what points; a picture that is only the subject passes).

    HSSBench is an image benchmark: nearly every item leans on `pic_path`; those that say so
    ("the picture", "this painting", "Figure 6-3", "Observe the ...", options that are only
    marks on a map) are refused here. Items that need their picture without saying so pass."""
    for text in _texts(item):
        phrase = picture_reference(text)
        if phrase:
            return Flag("needs_image", f"refers to {phrase!r}")
    if item.options and all(re.fullmatch(r"\(?[A-Z]\)?\.?", o.strip()) for o in item.options):
        return Flag("needs_image", f"options are only labels: {', '.join(item.options[:4])}")
    if item.options and all(_MARKS.fullmatch(o) for o in item.options):
        marks = set(re.findall(r"[①-⑳㉑-㉟]", "".join(item.options)))
        if marks and not marks <= set(item.question):
            return Flag("needs_image", f"options are marks on a picture: {', '.join(item.options[:4])}")
    return None


def needs_context(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """A question built on a passage, document, formula or list that is not in the item
    ("Questions 9-12 refer to the following information.", "According to Document 2, ...")."""
    for text in _texts(item):
        ref = context_reference(text)
        if ref:
            phrase, named = ref
            return Flag("needs_context", f"refers to {phrase!r}" if named else f"{phrase!r} is not given")
    return None


# ---------------------------------------------------------------- tables, code, LaTeX

def table(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """Tabular text (pipes, tabs, or rows of numbers) has no natural spoken form."""
    for text in [item.question] + [f.question for f in item.followups]:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        piped = sum("|" in ln for ln in lines)
        tabbed = sum(ln.count("\t") >= 2 for ln in lines)
        numeric = sum(len(re.findall(r"(?<![\w.])-?\d[\d,.]*%?(?![\w.])", ln)) >= 3
                      and len(re.findall(r"[A-Za-z]{3,}", ln)) <= 3 for ln in lines)
        if piped >= 2 or tabbed >= 2 or numeric >= 3:
            return Flag("table", f"{max(piped, tabbed, numeric)} table rows in the text")
    return None


_CODE_LINE = re.compile(
    r"^\s*(?:def \w+\s*\(|from \S+ import|#include|for\s*\(|while\s*\(|if\s*\(|print\(|printf|cout|System\.out|"
    r"console\.log|[A-Za-z_]\w*\s*=\s*[^=].*;\s*$|[{}]\s*$|PROCEDURE|REPEAT)")
# Keywords that are also English words ("return farmland to the samurai", "class struggle",
# "else"): a line starting with one is code only when the rest reads as code, not as words.
_CODE_WORD = re.compile(r"^\s*(?:def|class|import|else|elif|return|public|private|static|int|void|float|double|char|"
                        r"String|var|let|const|function|end|begin)\b(.*)$")
_CODE_REST = re.compile(r"[;{}()\[\]=<>]|:\s*$|^\s*$")
_CODE_NAME = re.compile(r"^\s*[\w.]+(?:\s+as\s+\w+)?\s*$")  # "return x", "import numpy as np"
_CODE_TOKEN = re.compile(r"```|==|!=|\+\+|\+=|&&|\|\||;\s*$|\bdef\s+\w+\(|\w+\[\w*\]\s*=|\bprint\(|"
                         r"\breturn\s+[\w.]+\s*(?:;|$|[-+*/%(\[<>=])", re.MULTILINE)


def _code_line(line: str) -> bool:
    if _CODE_LINE.match(line):
        return True
    m = _CODE_WORD.match(line)
    if not m:
        return False
    return bool(_CODE_REST.search(m.group(1))) or (line.split()[0] in ("return", "import")
                                                    and bool(_CODE_NAME.match(m.group(1))))


def code(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """Program text: read aloud it is noise, and a listener cannot follow it."""
    text = _all_text(item)
    if "```" in text:
        return Flag("code", "a fenced code block")
    code_lines = sum(_code_line(ln) for ln in text.splitlines())
    tokens = len(_CODE_TOKEN.findall(text))
    if code_lines >= 2 or (code_lines and tokens) or tokens >= 3:
        return Flag("code", f"{code_lines} code lines, {tokens} code tokens")
    return None


# Constructs the normaliser has no spoken form for.
_HARD_LATEX = re.compile(r"\\(?:begin|end|int|iint|oint|sum|prod|lim|partial|nabla|mathcal|mathbb|overline|"
                         r"underline|binom|choose|matrix|pmatrix|bmatrix|cases|otimes|oplus|wedge|bigcup|bigcap|"
                         r"cup|cap|subset|subseteq|forall|exists|mapsto|ldots|cdots|vdots)(?![A-Za-z])")
# Formatting commands: many of them do not make a formula harder to say.
_LAYOUT_LATEX = re.compile(r"\\(?:mathrm|text|textbf|textit|mathbf|mathit|mathscr|operatorname|left|right|"
                           r"displaystyle|quad|qquad)(?![A-Za-z])")


def heavy_latex(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """Formulas beyond simple fractions, powers and symbols are not speakable reliably."""
    text = _all_text(item)
    hard = _HARD_LATEX.search(text)
    if hard:
        return Flag("heavy_latex", f"uses {hard.group(0)}")
    n = len(re.findall(r"\\[A-Za-z]+", text)) - len(_LAYOUT_LATEX.findall(text))
    if n > cfg.max_latex_commands:
        return Flag("heavy_latex", f"{n} LaTeX commands > {cfg.max_latex_commands}")
    return None


# Formal notation: logic connectives, set braces, angle-bracket tuples ("E = {<1,2>,<2,4>}").
_MATH_SYMBOLS = re.compile(r"[∀∃∨∧¬⊃≡•→↔⊢∥⇒⇔∈∉⊂⊆∪∩<>{}|]")


def heavy_math(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """Symbolic logic and set notation read symbol by symbol cannot be followed by ear."""
    text = "\n".join([item.question] + list(item.options))
    # LaTeX is measured by heavy_latex: leave out math spans and command arguments
    text = re.sub(r"\$[^$]*\$|\\\[.*?\\\]|\\\(.*?\\\)", " ", text, flags=re.DOTALL)
    text = re.sub(r"\\[A-Za-z]+\s*(?:\{[^{}]*\})?|\\[{}|]|<<[^<>]*>>", " ", text)
    n = len(_MATH_SYMBOLS.findall(text))
    if n > cfg.max_math_symbols:
        return Flag("heavy_math", f"{n} logic or set symbols > {cfg.max_math_symbols}")
    return None


# ---------------------------------------------------------------- length

def too_long(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """A user turn too long to say in one go even at its shortest: the question with the answer
    and the shortest other options (`options_read` in all; the script drops options, never the
    answer, until its turn fits `script.max_turn_seconds`, so what passes here can be said)."""
    answers = [item.options[LETTERS.index(a)] for a in item.answer_letter.split(",") if a] if item.options else []
    others = sorted((o for o in item.options if o not in answers), key=len)
    first = " ".join([item.question] + answers + others[: max(0, cfg.options_read - len(answers))])
    for k, text in enumerate([first] + [f.question for f in item.followups]):
        secs = spoken_seconds(to_spoken(text), cfg.words_per_second)
        if secs > cfg.max_seconds:
            which = "question" if k == 0 else f"follow-up {k}"
            return Flag("too_long", f"{which}: about {secs:.0f} s spoken > {cfg.max_seconds:.0f} s")
    return None


# Spoken text has at least one word per this many characters of its source text, however much
# markup the normaliser drops: a text longer than that for a whole turn is too long unread.
CHARS_PER_WORD_BOUND = 40


def oversized(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """`too_long` told by length alone, before any filter normalises the text: a row with a
    megabyte question is refused in microseconds (normalising it would take hours: the cost of the
    normaliser grows faster than the text)."""
    bound = int(cfg.max_seconds * cfg.words_per_second * CHARS_PER_WORD_BOUND)
    named = [("question", item.question), ("answer", item.answer)]
    named += [(f"option {k}", o) for k, o in enumerate(item.options, 1)]
    named += [(f"follow-up {k}", f.question) for k, f in enumerate(item.followups, 1)]
    named += [(f"follow-up {k} answer", f.answer) for k, f in enumerate(item.followups, 1)]
    for which, text in named:
        if len(text) > bound:
            return Flag("too_long", f"{which}: {len(text)} characters, far more than {cfg.max_seconds:.0f} s can say")
    return None


FILTERS: dict[str, Callable[[SourceItem, FilterConfig], Flag | None]] = {
    "malformed_answer": malformed_answer,
    "not_english": not_english,
    "table": table,
    "needs_image": needs_image,
    "needs_context": needs_context,
    "code": code,
    "heavy_latex": heavy_latex,
    "heavy_math": heavy_math,
    "too_long": too_long,
}


def check(item: SourceItem, cfg: FilterConfig, rewrite_length: bool = False) -> Flag | None:
    """The first filter that refuses the item, in FILTERS order; None if it is speakable.
    `rewrite_length`: an LLM rewrite will condense what the template cannot fit (script.style llm),
    so `too_long` is left to the script step; a text far past any spoken length (`oversized`) is
    refused all the same."""
    if "too_long" not in cfg.skip and (flag := oversized(item, cfg)) is not None:
        return flag
    for name, fn in FILTERS.items():
        if name in cfg.skip or (rewrite_length and name == "too_long"):
            continue
        flag = fn(item, cfg)
        if flag is not None:
            return flag
    return None


def dedup_key(item: SourceItem) -> str:
    """Question and options, case-folded, punctuation and spacing removed: the same item copied
    into two sources (or twice into one) gets the same key."""
    def norm(s: str) -> str:
        s = unicodedata.normalize("NFKC", s).casefold()
        return " ".join(re.sub(r"[^\w]+", " ", s).split())

    return " | ".join([norm(item.question)] + [norm(o) for o in item.options])
