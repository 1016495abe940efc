"""Roman numerals said as numbers where the context says they are numbers.

Benchmark rows write "World War II", "DSM-III", "type II diabetes", "Louis XIV", "Strain I and Strain
II", "I and III only"; a TTS engine reads "II" as two letters and "I" as the pronoun. A numeral is
only rewritten where its role is certain, because most capital I's are the pronoun and many capital
runs are acronyms ("IV" drip, "XX" chromosomes, "MIX"):

- after a noun that numbers things (war, type, phase, class, chapter, strain, photosystem, factor ...):
  the cardinal, "World War two", "photosystem one"; a lone I, V or X only after such a noun written
  with a capital ("Type I", not "in this section I argue") or after a term no pronoun follows
  ("photosystem I");
- after a regnal name (Louis, Henry, Elizabeth, Pius ...): "the" and the ordinal, "Louis the fourteenth";
- after an acronym and a hyphen: "DSM-III" -> "DSM three";
- in a list of numerals ("I, II and IV", "I and III only") or before "only" ("II only"; "I only" where the
  same text has such a list or "II only"): the cardinals;
- as a statement's label at the start of a sentence ("II. Groups are abelian" -> "two: Groups ..."; a
  lone "I." only where the text also has such a numbered label or list);
- in brackets, a label: "statement (IV)" -> "statement (four)"; not a lone letter, which is as often
  an option's letter "(I)", a unit "(V)" or a variable "(X)".

Numerals use I, V and X only (1-39): L, C, D and M make too many ordinary words and acronyms.
Oxidation states ("iron(III)") are read earlier, by symbols.oxidation_states.
"""

from __future__ import annotations

import re

from num2words import num2words


def _roman(n: int) -> str:
    out = ""
    for value, letters in ((10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= value:
            out, n = out + letters, n - value
    return out


VALUES = {_roman(n): n for n in range(1, 40)}
_NUMERAL = "(?:" + "|".join(sorted(VALUES, key=len, reverse=True)) + ")"
_ALONE = r"(?<![\w'’-])%s(?![\w'’])"
_ONE = _ALONE % f"({_NUMERAL})"

# Nouns after which a numeral counts ("Type II", "World War I", "RNA polymerase II"), singular or plural.
COUNTED = frozenset("""
war type phase article title chapter part book volume act section class stage grade level strain statement
bipolar schedule amendment vatican apollo gemini category option case step experiment figure table appendix
division tier model series region complex photosystem factor topoisomerase polymerase hypersensitivity
collagen trial era dynasty kingdom period council paragraph clause item question problem exercise lesson unit
""".split())
# ... of which these never precede the pronoun I, so a lone I, V or X after them is a number in any case.
TERMS = frozenset("war bipolar photosystem polymerase topoisomerase hypersensitivity collagen".split())
# First names of monarchs and popes, after which a numeral is an ordinal ("Henry the eighth").
REGNAL = frozenset("""
Louis Henry Edward George William Charles James Richard Elizabeth Mary Anne Philip Frederick Peter Catherine
Alexander Nicholas Ferdinand Pius Leo Gregory Innocent Benedict Clement Boniface Urban Paul John Napoleon
Ramesses Ramses Thutmose Amenhotep Ptolemy Otto Wilhelm Francis Gustav Gustavus Ivan Sixtus Alfonso Ludwig
Rudolf Constantine Justinian Leopold Sancho Victor Emmanuel Umberto Carlos Juan Felipe Isabella Isabel Darius
Xerxes Artaxerxes Cyrus Antiochus Seleucus Tiglath Sargon Shalmaneser Nebuchadnezzar Mehmed Murad Selim
Suleiman Mahmud Abdul Rama Haakon Olaf Harald Christian Sigismund Casimir Stanislaus Wladyslaw Bolesław
Boleslaw Manuel Michael Basil Romanus Andronicus Lothair Pepin Childeric Clovis Hugh Robert David
Malcolm Duncan Kenneth Alexios Honorius Valentinian Theodosius Julius Marcellus Adrian Hadrian Eugene Eugenius
""".split())

_LIST_SEP = r"(?:\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|to|through|and/or)\s+)"
_CHAIN = rf"{_ONE}((?:{_LIST_SEP}{_ALONE % _NUMERAL})*)"
_AFTER_NOUN = re.compile(rf"(?<![\w'’])([A-Za-z]+)(\s+){_CHAIN}")
_AFTER_NAME = re.compile(rf"(?<![\w'’])([A-Z][a-z]+)(\s+){_ONE}")
_AFTER_ACRONYM = re.compile(rf"(?<![\w'’])([A-Z]{{2,}})-({_NUMERAL})(?![\w'’])")
_LIST = re.compile(rf"{_ALONE % _NUMERAL}(?:{_LIST_SEP}{_ALONE % _NUMERAL})+")
_ONLY = re.compile(rf"{_ONE}(?=\s+only\b)")
_BRACKETED = re.compile(rf"\(({_NUMERAL})\)")
_LABEL = re.compile(rf"(?:^|(?<=[.?!:;]\s)|(?<=\n)){_ONE}[.)]\s+(?=[A-Z])")


def _cardinal(numeral: str) -> str:
    return num2words(VALUES[numeral])


def _chain(first: str, rest: str) -> str:
    """'II, III and IV' -> 'two, three and four' (the separators kept)."""
    return _cardinal(first) + re.sub(_ALONE % f"({_NUMERAL})", lambda m: _cardinal(m.group(1)), rest)


def _counted(m: re.Match) -> str:
    noun, space, first, rest = m.groups()
    base = noun.lower()
    known = base in COUNTED or (base.endswith("s") and base[:-1] in COUNTED)
    if not known or (len(first) == 1 and not noun[0].isupper() and base not in TERMS):  # "section I argue"
        return m.group(0)
    return f"{noun}{space}{_chain(first, rest or '')}"


def _regnal(m: re.Match) -> str:
    """'Henry VIII' -> 'Henry the eighth'; a lone I only before a stop, 'of' or 'and' ("Elizabeth I and
    James I"), since "when I met Michael I was" is the pronoun."""
    name, space, numeral = m.groups()
    after = m.string[m.end():]
    if name not in REGNAL or (numeral == "I" and not re.match(r"\s*(?:$|[,.;:!?)]|(?:of|and)\b)", after)):
        return m.group(0)
    return f"{name}{space}the {num2words(VALUES[numeral], to='ordinal')}"


def _listed(m: re.Match) -> str:
    items = re.findall(_ALONE % f"({_NUMERAL})", m.group(0))
    if len(set(items)) < 2 or all(len(x) == 1 for x in items):  # "I, I"; "I or V": letters as likely
        return m.group(0)
    return _chain(items[0], m.group(0)[len(items[0]):])


def roman_numerals(text: str) -> str:
    """Roman numerals read as numbers where the context makes them numbers (see the module doc)."""
    text = _BRACKETED.sub(lambda m: f"({_cardinal(m.group(1))})" if len(m.group(1)) > 1 else m.group(0), text)
    text = _AFTER_ACRONYM.sub(lambda m: f"{m.group(1)} {_cardinal(m.group(2))}", text)
    text = _AFTER_NOUN.sub(_counted, text)
    text = _AFTER_NAME.sub(_regnal, text)
    # Does the text number statements? Then a lone "I." label and "I only" are numerals too.
    numbered = _LIST.sub(_listed, text) != text or any(len(m.group(1)) > 1 for p in (_LABEL, _ONLY)
                                                       for m in p.finditer(text))

    def numeral(m: re.Match, said: str) -> str:
        return said if len(m.group(1)) > 1 or numbered else m.group(0)

    # Labels first: "II. III and V" is the label of a statement that starts with a list.
    text = _LABEL.sub(lambda m: numeral(m, f"{_cardinal(m.group(1))}: "), text)
    text = _LIST.sub(_listed, text)
    return _ONLY.sub(lambda m: numeral(m, _cardinal(m.group(1))), text)
