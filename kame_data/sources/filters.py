"""Speech-suitability filters: is an item something two people could say to each other?

Each filter is a pure function `(item, cfg) -> Flag | None`: a reason code (the one written to
rejects.jsonl) and a human detail, or None when the item passes. `check` runs them in a fixed
order and returns the first flag, so an item's reason does not depend on anything but itself.
Duplicates are the one cross-item check; `dedup_key` gives the text they are compared on.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, NamedTuple

from kame_data.records import SourceItem
from kame_data.text import spoken_words, to_spoken


class Flag(NamedTuple):
    reason: str
    detail: str


@dataclass(frozen=True)
class FilterConfig:
    """The recipe's `filters:` section."""

    skip: tuple[str, ...] = ()  # reason codes whose filter is turned off
    max_seconds: float = 75.0  # the user's turn (question and the options read) at `words_per_second`
    options_read: int = 4  # options counted in that turn: the longest ones (the script reads a subset)
    words_per_second: float = 2.6
    max_latex_commands: int = 8  # more LaTeX commands than this in an item is too much to read aloud
    max_math_symbols: int = 8  # logic / set symbols (∨ ⊃ ∀ { } < >) in the question and options
    max_foreign_letters: int = 0  # letters outside the Latin and Greek scripts (Han, Cyrillic, ...)
    min_foreign_words: int = 3  # function words of another language that mark Latin-script text as foreign


REASONS = ("malformed_answer", "not_english", "table", "needs_image", "needs_context", "code", "heavy_latex",
           "heavy_math", "too_long", "duplicate")


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

_PICTURE = (r"(?:picture|image|photo|photograph|figure|diagram|illustration|map|chart|graph|table|cartoon|comic|"
            r"painting|drawing|sketch|poster|portrait|artwork|mural|woodcut|engraving|screenshot)s?")
# Words that point at a picture only after "this", "the following", ...: "this scene", "this detail".
_SHOWN = (r"(?:picture|image|photo|photograph|diagram|illustration|map|chart|graph|table|cartoon|comic|painting|"
          r"drawing|sketch|poster|portrait|artwork|mural|woodcut|engraving|screenshot|scene|composition|detail|"
          r"curve|sculpture|statue)s?")
# Definite "the sketch" with nothing introducing it points at an unseen picture (tables, figures and
# images have common other senses and need a stronger cue).
_THE_PICTURE = (r"(?:picture|photo|photograph|diagram|illustration|map|chart|graph|cartoon|comic|painting|drawing|"
                r"sketch|poster|portrait|artwork|mural|woodcut|engraving|screenshot)s?")
_DEICTIC = r"(?:this|these|the following|the above|the below|the attached|the accompanying|the given)"
_FILLER = r"(?:(?!(?:is|are|was|were|a|an|the|of|and|or|that|which|to|in|on|for)\b)[\w-]+\s+)"
# Things shown in exam pictures that a "The following are ..." sentence names without giving them.
_OBJECTS = r"(?:works?|coupons?|posters?|stamps?|banknotes?|trademarks?|relics?|artifacts?|photos?|maps?|paintings?)"
_VISUAL_PATTERNS = [
    # "in the picture", "on this map", "from the table"
    re.compile(rf"\b(?:in|on|from|of)\s+(?:the|this|these)\s+(?:above\s+|following\s+|given\s+|attached\s+)?"
               rf"{_PICTURE}\b", re.IGNORECASE),
    # "this painting", "the following war film posters", "this detail"
    re.compile(rf"\b{_DEICTIC}\s+{_FILLER}{{0,3}}?{_SHOWN}\b", re.IGNORECASE),
    # "the table below", "the graph shows"
    re.compile(rf"\bthe\s+{_FILLER}{{0,2}}?{_PICTURE}\s+(?:below|above|shows?|displays?|depicts?|illustrates?)\b",
               re.IGNORECASE),
    # "The simple sketch of a thatched pavilion", "the comic 'It's Raining'"
    re.compile(rf"(?:^|[.?!]\s+)The\s+{_FILLER}{{0,2}}?{_THE_PICTURE}\b"),
    re.compile(r"\b(?:a|an|the|this|these)\s+(?:political\s+)?(?:cartoon|comic)s?\b(?!\s+(?:book|relief|strip))",
               re.IGNORECASE),
    # "as depicted above", "pictured here"
    re.compile(r"\b(?:shown|depicted|pictured|illustrated|displayed)\s+(?:above|below|here)\b", re.IGNORECASE),
    # "Figure 6-3", "Table 3-4", "Diagrams A, B, and C", "the curves D and D1"
    re.compile(r"\b(?:Figure|Fig\.|Table|Exhibit|Diagram|Chart|Graph|Map|Picture|Image|Photo)s?\s*(?:\d|[A-Z]\b)"),
    re.compile(r"\bcurves?\s+[A-Z]\d?\b"),
    # "Observe the ...", "Observing the dancers ...", "Read the seasonal variation curves"
    re.compile(r"(?:^|[.?!:]\s+)(?:please\s+)?(?:observe|observing|look at|looking at|examine|examining)\b",
               re.IGNORECASE),
    re.compile(r"\b(?:read|see|study|analy[sz]e)\s+the\s+(?:[\w-]+\s+){0,3}?"
               r"(?:curves?|charts?|graphs?|maps?|tables?|figures?|diagrams?|pictures?|images?)\b", re.IGNORECASE),
    re.compile(rf"\bthe\s+following\s+(?:is|are)\s+(?:a\s+|an\s+|some\s+)?{_FILLER}{{0,3}}?{_OBJECTS}\b",
               re.IGNORECASE),
    # an unnamed maker of the (unseen) work: "the painter's core intention"
    re.compile(r"\bthe\s+(?:painter|artist|sculptor|photographer|cartoonist)\b(?!\s+[A-Z])", re.IGNORECASE),
    re.compile(r"\b(?:person|people|man|woman|figure|object|building)s?\s+on\s+the\s+(?:left|right)\b", re.IGNORECASE),
    re.compile(r"\bthe\s+(?:red|blue|green|yellow|shaded|highlighted|marked|dotted|dashed)\s+"
               r"(?:areas?|regions?|parts?|lines?|zones?)\b", re.IGNORECASE),
    re.compile(r"\bthe\s+(?:thickness|size|colou?r)\s+of\s+the\s+(?:arrows?|circles?|bars?|dots?)\b", re.IGNORECASE),
    re.compile(r"\bpayoff\s+matri(?:x|ces)\b", re.IGNORECASE),
]
_NOUN = re.compile(rf"{_SHOWN}\b|{_PICTURE}\b", re.IGNORECASE)
# Graph theory, maps in the mathematical sense and images in optics are words, not pictures.
_OTHER_SENSE = {
    "graph": re.compile(r"\b(?:vert(?:ex|ices)|edges?|nodes?|undirected|directed|complete graph|graph G|bipartite|"
                        r"clique|planar|tree)\b", re.IGNORECASE),
    "map": re.compile(r"\b(?:identity map|linear map|map(?:s|ping)?\s+[A-Za-z]\b|onto|injective|surjective|"
                      r"homomorphism)\b", re.IGNORECASE),
    "image": re.compile(r"\b(?:lens|lenses|mirror|focal|magnif\w*|converging|diverging|real image|virtual image|"
                        r"object distance|homomorphism|kernel|inverse image)\b", re.IGNORECASE),
}
# Option texts that are only marks on a picture: "①", "②—④".
_MARKS = re.compile(r"[\s①-⑳㉑-㉟\-—–,、()]+")


def _introduced(text: str, start: int, noun: str) -> bool:
    """True when the noun was introduced in words before the reference ("A certain map ... this map")."""
    stem = noun.lower().rstrip("s")
    return re.search(rf"\b(?:a|an|one|certain|some)\s+(?:[\w-]+\s+){{0,2}}{stem}s?\b", text[:start],
                     re.IGNORECASE) is not None


def _not_given(text: str, end: int, min_words: int = 25) -> bool:
    """True when, after the sentence that announces something ("the following passages ..."),
    fewer than `min_words` words follow: the announced material is not in the text."""
    stop = re.search(r"[.?!:\n]", text[end:])
    rest = text[end + stop.end():] if stop else ""
    return len(rest.split()) < min_words


def needs_image(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """A question that points at a picture, map, chart or table it does not contain.

    HSSBench is an image benchmark: nearly every item leans on `pic_path`; those that say so
    ("the picture", "this painting", "Figure 6-3", "Observe the ...", options that are only
    marks on a map) are refused here. Items that need their picture without saying so pass."""
    for text in _texts(item):
        for pat in _VISUAL_PATTERNS:
            for m in pat.finditer(text):
                phrase = " ".join(m.group(0).split()).strip(" .?!:")
                noun = _NOUN.search(phrase)
                word = noun.group(0).lower().rstrip("s") if noun else ""
                if word in _OTHER_SENSE and _OTHER_SENSE[word].search(text):
                    continue
                if phrase.lower().endswith("figures") and not phrase.lower().startswith("in "):
                    continue  # "one can get some idea from the figures alone": numbers, not pictures
                if word == "table" and phrase.lower().startswith("on "):
                    continue  # "a block resting on the table": furniture
                if noun and _introduced(text, m.start(), noun.group(0)):
                    continue
                return Flag("needs_image", f"refers to {phrase!r}")
    if item.options and all(re.fullmatch(r"\(?[A-Z]\)?\.?", o.strip()) for o in item.options):
        return Flag("needs_image", f"options are only labels: {', '.join(item.options[:4])}")
    if item.options and all(_MARKS.fullmatch(o) for o in item.options):
        marks = set(re.findall(r"[①-⑳㉑-㉟]", "".join(item.options)))
        if marks and not marks <= set(item.question):
            return Flag("needs_image", f"options are marks on a picture: {', '.join(item.options[:4])}")
    return None


_CONTEXT_REF = re.compile(r"\b(?:from|in|to|of|see|according to|based on)\s+(?:the\s+)?"
                          r"(?:Documents?|Sources?|Scenario|Passages?|Excerpts?|Texts?|Materials?)\s+\d(?:[\d.]*\d)?|"
                          r"\bQuestions?\s+\d+(?:\s*[-–]\s*\d+)?\s+refers?\s+to\b")
_FOLLOWING = re.compile(r"(?<!of )\bthe\s+following\s*(?:[\w-]+\s+){0,2}?"
                        r"(?:information|passages?|excerpts?|documents?|texts?|quotations?|formulas?|equations?|"
                        r"data|materials?|matrix|matrices)\b", re.IGNORECASE)
_FOLLOWING_ARE = re.compile(r"(?:^|[.?!]\s+)The\s+following\s+(?:[\w-]+\s+){0,3}?(?:is|are)\b")


def needs_context(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """A question built on a passage, document, formula or list that is not in the item
    ("Questions 9-12 refer to the following information.", "According to Document 2, ...")."""
    for text in _texts(item):
        m = _CONTEXT_REF.search(text)
        if m:
            return Flag("needs_context", f"refers to {' '.join(m.group(0).split())!r}")
        for pat in (_FOLLOWING, _FOLLOWING_ARE):
            for m in pat.finditer(text):
                if _not_given(text, m.end()):
                    phrase = " ".join(m.group(0).split()).strip(" .?!")
                    return Flag("needs_context", f"{phrase!r} is not given")
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
    r"^\s*(?:def |class |import |from \S+ import|#include|for\s*\(|while\s*\(|if\s*\(|else\b|return\b|"
    r"public |private |static |int |void |float |double |char |String |var |let |const |function\b|print\(|"
    r"printf|cout|System\.out|console\.log|[A-Za-z_]\w*\s*=\s*[^=].*;\s*$|[{}]\s*$|end\b|begin\b|PROCEDURE|REPEAT)")
_CODE_TOKEN = re.compile(r"```|==|!=|\+\+|\+=|&&|\|\||;\s*$|\bdef\s+\w+\(|\w+\[\w*\]\s*=|\bprint\(|\breturn\s+\w",
                         re.MULTILINE)


def code(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """Program text: read aloud it is noise, and a listener cannot follow it."""
    text = _all_text(item)
    if "```" in text:
        return Flag("code", "a fenced code block")
    code_lines = sum(bool(_CODE_LINE.match(ln)) for ln in text.splitlines())
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

def spoken_seconds(text: str, words_per_second: float) -> float:
    return len(spoken_words(to_spoken(text))) / words_per_second


def too_long(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """A user turn too long to say in one go: the question with its longest options (an upper
    bound of what the script reads, whatever options it picks)."""
    first = " ".join([item.question] + sorted(item.options, key=len, reverse=True)[: cfg.options_read])
    for k, text in enumerate([first] + [f.question for f in item.followups]):
        secs = spoken_seconds(text, cfg.words_per_second)
        if secs > cfg.max_seconds:
            which = "question" if k == 0 else f"follow-up {k}"
            return Flag("too_long", f"{which}: about {secs:.0f} s spoken > {cfg.max_seconds:.0f} s")
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


def check(item: SourceItem, cfg: FilterConfig) -> Flag | None:
    """The first filter that refuses the item, in FILTERS order; None if it is speakable."""
    for name, fn in FILTERS.items():
        if name in cfg.skip:
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
