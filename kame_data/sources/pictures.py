"""Does a question point at a picture, or at a passage, that it does not contain?

A question needs its picture only when it points at one: "the picture below", "shown in the
figure", "this map", "according to the graph", "Figure 2". A picture, photo or painting that is
merely what the question is about ("2000 likes on his photo", "selling a painting for $400", "the
posters cost $2 each" after "300 posters") is a word like any other. So a definite reference
without a pointing word ("in the painting") counts only when nothing in the text introduced that
thing before; a pointing word ("this", "below", "shown") counts unless an indefinite "a map"
introduced it.

`picture_reference` and `context_reference` return the phrase that points (the reject detail),
or None; the filters (kame_data/sources/filters.py) turn them into reason codes.
"""

from __future__ import annotations

import re

_PICTURE = (r"(?:picture|image|photo|photograph|figure|diagram|illustration|map|chart|graph|table|cartoon|comic|"
            r"painting|drawing|sketch|poster|portrait|artwork|mural|woodcut|engraving|screenshot)s?")
# Words that point at a picture only after "this", "the following", ...: "this scene", "this detail".
_SHOWN = (r"(?:picture|image|photo|photograph|diagram|illustration|map|chart|graph|table|cartoon|comic|painting|"
          r"drawing|sketch|poster|portrait|artwork|mural|woodcut|engraving|screenshot|scene|composition|detail|"
          r"curve|sculpture|statue)s?")
# Definite "the sketch" at the start of a sentence (tables, figures and images have common other
# senses and need a stronger cue).
_THE_PICTURE = (r"(?:picture|photo|photograph|diagram|illustration|map|chart|graph|cartoon|comic|painting|drawing|"
                r"sketch|poster|portrait|artwork|mural|woodcut|engraving|screenshot)s?")
# "the photo album", "the picture frame": the picture word only names another thing.
_COMPOUND = (r"(?!\s+(?:album|frame|shoot|booth|studio|gallery|contest|competition|book|paper|printer|session|class|"
             r"exhibition|collection|editor|card|puzzle|ID|id|lab|camera|club|store|shop|sale|day)s?\b)")
_DEICTIC = r"(?:this|these|the following|the above|the below|the attached|the accompanying|the given)"
_FILLER = r"(?:(?!(?:is|are|was|were|a|an|the|of|and|or|that|which|to|in|on|for)\b)[\w-]+\s+)"
# Things shown in exam pictures that a "The following are ..." sentence names without giving them.
_OBJECTS = r"(?:works?|coupons?|posters?|stamps?|banknotes?|trademarks?|relics?|artifacts?|photos?|maps?|paintings?)"
# Words that look at something: "according to the graph", "look at the photo", "in the picture".
_POINT = (r"(?:in|on|from|of|according to|based on|refer(?:ring)? to|look(?:ing)? at|see|using|as shown in|"
          r"as seen in|shown in|depicted in|illustrated in|pictured in)")
_I = re.IGNORECASE
# (pattern, strong): a strong reference points by itself; a weak one is a plain definite "the
# painting", which points only when the text never mentioned that thing before.
_VISUAL_PATTERNS: list[tuple[re.Pattern, bool]] = [
    # "in the picture", "according to the graph", "look at the photo", "on this map"
    (re.compile(rf"\b{_POINT}\s+(?:the|these)\s+(?:above\s+|following\s+|given\s+|attached\s+)?{_PICTURE}\b{_COMPOUND}",
                _I), False),
    (re.compile(rf"\b{_POINT}\s+this\s+{_PICTURE}\b{_COMPOUND}", _I), True),
    # "this painting", "the following war film posters", "this detail"
    (re.compile(rf"\b{_DEICTIC}\s+{_FILLER}{{0,3}}?{_SHOWN}\b{_COMPOUND}", _I), True),
    # "the table below", "the picture above", "the map here"
    (re.compile(rf"\bthe\s+{_FILLER}{{0,2}}?{_PICTURE}\s+(?:below|above|here|opposite)\b", _I), True),
    # "the graph shows": a definite picture that shows something
    (re.compile(rf"\bthe\s+{_FILLER}{{0,2}}?{_PICTURE}\s+(?:shows?|displays?|depicts?|illustrates?)\b", _I), False),
    # "The simple sketch of a thatched pavilion", "The comic 'It's Raining'"
    (re.compile(rf"(?:^|[.?!]\s+)The\s+{_FILLER}{{0,2}}?{_THE_PICTURE}\b{_COMPOUND}"), False),
    (re.compile(r"\b(?:the|this|these)\s+(?:political\s+)?(?:cartoon|comic)s?\b(?!\s+(?:book|relief|strip))", _I), False),
    # "as depicted above", "pictured here"
    (re.compile(r"\b(?:shown|depicted|pictured|illustrated|displayed)\s+(?:above|below|here)\b", _I), True),
    # "Figure 6-3", "Table 3-4", "Diagrams A, B, and C", "the curves D and D1"
    (re.compile(r"\b(?:Figure|Fig\.|Table|Exhibit|Diagram|Chart|Graph|Map|Picture|Image|Photo)s?\s*(?:\d|[A-Z]\b)"), True),
    (re.compile(r"\bcurves?\s+[A-Z]\d?\b"), True),
    # "Observe the ...", "Observing the dancers ...", "Read the seasonal variation curves"
    (re.compile(r"(?:^|[.?!:]\s+)(?:please\s+)?(?:observe|observing|look at|looking at|examine|examining)\b", _I), True),
    (re.compile(r"\b(?:read|see|study|analy[sz]e)\s+the\s+(?:[\w-]+\s+){0,3}?"
                r"(?:curves?|charts?|graphs?|maps?|tables?|figures?|diagrams?|pictures?|images?)\b", _I), True),
    (re.compile(rf"\bthe\s+following\s+(?:is|are)\s+(?:a\s+|an\s+|some\s+)?{_FILLER}{{0,3}}?{_OBJECTS}\b", _I), True),
    # an unnamed maker of the (unseen) work: "the painter's core intention" (a name after it,
    # "the painter Rembrandt", is not; the name check is case-sensitive)
    (re.compile(r"\bthe\s+(?:painter|artist|sculptor|photographer|cartoonist)s?\b(?!\s+(?-i:[A-Z]))", _I), False),
    (re.compile(r"\b(?:person|people|man|woman|figure|object|building)s?\s+on\s+the\s+(?:left|right)\b", _I), True),
    (re.compile(r"\bthe\s+(?:red|blue|green|yellow|shaded|highlighted|marked|dotted|dashed)\s+"
                r"(?:areas?|regions?|parts?|lines?|zones?)\b", _I), True),
    (re.compile(r"\bthe\s+(?:thickness|size|colou?r)\s+of\s+the\s+(?:arrows?|circles?|bars?|dots?)\b", _I), True),
    (re.compile(r"\bpayoff\s+matri(?:x|ces)\b", _I), True),
]
_NOUN = re.compile(rf"{_SHOWN}\b|{_PICTURE}\b|\b(?:painter|artist|sculptor|photographer|cartoonist)s?\b", _I)
# Graph theory, maps in the mathematical sense and images in optics are words, not pictures.
_OTHER_SENSE = {
    "graph": re.compile(r"\b(?:vert(?:ex|ices)|edges?|nodes?|undirected|directed|complete graph|graph G|bipartite|"
                        r"clique|planar|tree)\b", _I),
    "map": re.compile(r"\b(?:identity map|linear map|map(?:s|ping)?\s+[A-Za-z]\b|onto|injective|surjective|"
                      r"homomorphism)\b", _I),
    "image": re.compile(r"\b(?:lens|lenses|mirror|focal|magnif\w*|converging|diverging|real image|virtual image|"
                        r"object distance|homomorphism|kernel|inverse image)\b", _I),
}


def _stem(noun: str) -> str:
    return noun.lower().removesuffix("s")


def _introduced(text: str, start: int, noun: str) -> bool:
    """The thing was introduced in words before the reference: "A certain map ... this map",
    "Malcolm posted his photo ...", "300 posters ..."."""
    stem = re.escape(_stem(noun))
    return re.search(rf"\b(?:a|an|one|certain|some|another|his|her|their|its|my|your|our|\w+'s|\d[\d,]*|"
                     rf"two|three|four|five|six|seven|eight|nine|ten|several|many|each|every)\s+"
                     rf"(?:[\w-]+\s+){{0,2}}{stem}s?\b", text[:start], _I) is not None


def _mentioned(text: str, start: int, noun: str) -> bool:
    """The same thing was named earlier in any way: a later "the painting" refers back to it."""
    return re.search(rf"\b{re.escape(_stem(noun))}s?\b", text[:start], _I) is not None


def picture_reference(text: str) -> str | None:
    """The phrase of `text` that points at a picture it does not hold, or None."""
    hits = sorted(((m, strong) for pat, strong in _VISUAL_PATTERNS for m in pat.finditer(text)),
                  key=lambda h: h[0].start())
    for m, strong in hits:
        phrase = " ".join(m.group(0).split()).strip(" .?!:")
        noun = _NOUN.search(phrase)
        word = _stem(noun.group(0)) if noun else ""
        if word in _OTHER_SENSE and _OTHER_SENSE[word].search(text):
            continue
        if phrase.lower().endswith("figures") and not phrase.lower().startswith("in "):
            continue  # "one can get some idea from the figures alone": numbers, not pictures
        if word == "table" and phrase.lower().startswith("on "):
            continue  # "a block resting on the table": furniture
        if noun and _introduced(text, m.start(), noun.group(0)):
            continue
        if not strong and noun and _mentioned(text, m.start(), noun.group(0)):
            continue
        return phrase
    return None


_CONTEXT_REF = re.compile(r"\b(?:from|in|to|of|see|according to|based on)\s+(?:the\s+)?"
                          r"(?:Documents?|Sources?|Scenario|Passages?|Excerpts?|Texts?|Materials?)\s+\d(?:[\d.]*\d)?|"
                          r"\bQuestions?\s+\d+(?:\s*[-–]\s*\d+)?\s+refers?\s+to\b")
_FOLLOWING = re.compile(r"(?<!of )\bthe\s+following\s*(?:[\w-]+\s+){0,2}?"
                        r"(?:information|passages?|excerpts?|documents?|texts?|quotations?|formulas?|equations?|"
                        r"data|materials?|matrix|matrices)\b", _I)
_FOLLOWING_ARE = re.compile(r"(?:^|[.?!]\s+)The\s+following\s+(?:[\w-]+\s+){0,3}?(?:is|are)\b")


def _not_given(text: str, end: int, min_words: int = 25) -> bool:
    """True when, after the sentence that announces something ("the following passages ..."),
    fewer than `min_words` words follow: the announced material is not in the text."""
    stop = re.search(r"[.?!:\n]", text[end:])
    rest = text[end + stop.end():] if stop else ""
    return len(rest.split()) < min_words


def context_reference(text: str) -> tuple[str, bool] | None:
    """(phrase, is a named reference) when `text` is built on a passage, document or list that
    is not in it ("Questions 9-12 refer to ...", "the following passage" with nothing after)."""
    m = _CONTEXT_REF.search(text)
    if m:
        return " ".join(m.group(0).split()), True
    for pat in (_FOLLOWING, _FOLLOWING_ARE):
        for m in pat.finditer(text):
            if _not_given(text, m.end()):
                return " ".join(m.group(0).split()).strip(" .?!"), False
    return None
