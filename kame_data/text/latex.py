"""Formulas: `$...$`, `$$...$$`, `\\(...\\)`, `\\[...\\]` and bare LaTeX commands to words.

Fractions, roots, powers, subscripts, Greek letters and common operators have a spoken form;
unknown commands are dropped and their arguments kept. A `$` pair that holds prices rather than a
formula ('$6 + $8 = $14') is left for the currency pass (kame_data/text/units.py).
"""

from __future__ import annotations

import re

from kame_data.text.numbers import say_ordinal
from kame_data.text.symbols import GREEK

_LATEX_WORDS = {
    r"\times": " times ", r"\cdot": " times ", r"\div": " divided by ", r"\pm": " plus or minus ",
    r"\mp": " minus or plus ", r"\leq": " less than or equal to ", r"\le": " less than or equal to ",
    r"\geq": " greater than or equal to ", r"\ge": " greater than or equal to ", r"\neq": " is not equal to ",
    r"\ne": " is not equal to ", r"\approx": " approximately ", r"\sim": " about ", r"\propto": " is proportional to ",
    r"\infty": " infinity ", r"\rightarrow": " to ", r"\to": " to ", r"\leftarrow": " gets ", r"\Rightarrow": " implies ",
    r"\rightleftarrows": " is in equilibrium with ", r"\rightleftharpoons": " is in equilibrium with ",
    r"\leftrightarrow": " if and only if ", r"\in": " in ", r"\notin": " not in ", r"\%": " percent ", r"\$": " dollars ", r"\&": " and ", r"\log": " log ",
    r"\ln": " natural log of ", r"\sin": " sine ", r"\cos": " cosine ", r"\tan": " tangent ", r"\exp": " exp ",
    r"\max": " max ", r"\min": " min ", r"\gcd": " gcd ", r"\deg": " degree ", r"\circ": " degrees ",
    r"\prime": " prime ", r"\ell": " l ", r"\hbar": " h bar ", r"\angle": " angle ", r"\triangle": " triangle ",
    r"\|": " ∥ ", r"\{": " ", r"\}": " ",
    r"\left": "", r"\right": "", r"\,": " ", r"\;": " ", r"\:": " ", r"\!": "", r"\quad": " ", r"\qquad": " ",
    r"\ ": " ", r"\\": " ", r"\AA": " Å ", r"\textemdash": ", ", r"\textendash": ", ", r"\surd": " the square root of ",
    r"\leftrightarrows": " is in equilibrium with ", r"\vert": "|", r"\ast": " star ", r"\textquotedblleft": ' "', r"\textquotedblright": '" ', r"\textcent": " ¢ ",
    r"\bullet": " · ", r"\textbullet": " · ", r"\textasteriskcentered": " * ", r"\AAngstrom": " Å ", r"\leqslant": " ≤ ",
    r"\geqslant": " ≥ ", r"\textsterling": " £ ", r"\uparrow": " ", r"\downarrow": " ",  # a gas given off, a precipitate r"\lvert": "|", r"\rvert": "|", r"\mid": " | ", r"\sum": " the sum of ", r"\int": " the integral of ",
    r"\partial": " partial ", r"\nabla": " del ", r"\forall": " for all ", r"\exists": " there is ",
    r"\wedge": " and ", r"\vee": " or ", r"\neg": " not ", r"\lnot": " not ", r"\land": " and ", r"\lor": " or ",
    r"\supset": " implies ", r"\equiv": " is equivalent to ", r"\cong": " is congruent to ", r"\perp": " is perpendicular to ",
    r"\parallel": " is parallel to ", r"\degree": " degrees ", r"\implies": " implies ", r"\iff": " if and only if ",  # the angstrom, read by the units pass after its number
}
_LATEX_GREEK = {f"\\{name}": f" {name} " for name in sorted(set(GREEK.values()))}
_LATEX_GREEK.update({f"\\{name.capitalize()}": f" {name} " for name in sorted(set(GREEK.values()))})
_LATEX_GREEK.update({r"\varepsilon": " epsilon ", r"\vartheta": " theta ", r"\varphi": " phi ", r"\varrho": " rho "})

# Every command `_latex` reads, or drops knowing it says nothing (layout, fonts, sizes): any other is
# unknown, and a turn holding one is refused by the inventory check (kame_data/text/inventory.py)
# rather than said with its command dropped ('\\ding{217}', a list bullet, said "two hundred and seventeen").
_LAYOUT = ("displaystyle textstyle scriptstyle limits nolimits big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr "
           "mathcal mathsf mathtt mathbb boldsymbol bm rm bf it cal underline overline hline nonumber quad qquad "
           "left right cdots ldots dots vdots text textrm textbf textit mathrm mathbf mathit mathscr operatorname "
           "mbox widetilde rule frac dfrac tfrac sqrt hat bar vec tilde dot factorial nactorial mu circ textemdash textendash").split()
KNOWN_COMMANDS = frozenset([k[1:] for k in (*_LATEX_WORDS, *_LATEX_GREEK) if k[1:].isalpha()] + _LAYOUT)


_GREEK_NAMES = "|".join(sorted({*(k[1:] for k in _LATEX_GREEK), "mu"}, key=len, reverse=True))
# A word command glued to the letters after it ('\\DeltaE', '\\partialV', '\\musmust'): the command, then the letters.
_GLUED_NAMES = "|".join(sorted({*_GREEK_NAMES.split("|"), *(k[1:] for k in _LATEX_WORDS if k[1:].isalpha() and len(k) > 3),
                                  "partial", "nabla", "text", "vert", "textquotedblleft", "textquotedblright",
                                  "bullet", "textbullet", "AAngstrom"}, key=len, reverse=True))
_GLUED_GREEK = re.compile(rf"\\({_GLUED_NAMES})(?!(?:{_GLUED_NAMES})(?![A-Za-z]))([A-Za-z]+)")


def known_command(name: str) -> bool:
    """Whether `_latex` has a reading for `\\name` (a Greek letter glued to a variable, '\\DeltaE', has)."""
    glued = _GLUED_GREEK.fullmatch("\\" + name)
    greek = name.startswith("text") and name[4:] in _GREEK_NAMES.split("|")
    return name in KNOWN_COMMANDS or name == "ding" or greek or bool(glued and glued[1] != "text")


def _is_math(inner: str) -> bool:
    """Is `$inner$` a formula (rather than the text between two prices)?"""
    inner = inner.strip()
    if not inner:
        return False
    if re.search(r"[\\^_{}=!]", inner) or not re.match(r"[\d.,]", inner):
        return True  # a pair that opens on a letter or a command ('$D0$', '$F(8,4)$', '$Å$') is a formula
    return bool(re.fullmatch(r"[A-Za-z](?:\s*[-+*/]\s*[A-Za-z0-9]+)*|[A-Za-z]\(\w\)|\d+\s*[A-Za-z]", inner))


def _latex(text: str) -> str:
    """Simple LaTeX to words: fractions, roots, powers, subscripts, Greek, common operators."""
    # chemical formulas: \mathrm{H}_2 \mathrm{O} -> H2 O (read "H two O", not "H sub two")
    text = re.sub(r"\\mathrm\s*\{\s*~?([A-Z][A-Za-z]*)\s*\}\s*_\s*\{?\s*(\d+)\s*\}?", r"\1\2", text)
    text = re.sub(r"\\(?:mathrm|text|textrm|textbf|textit|mathbf|mathit|mathscr|operatorname|mbox)\s*\{\s*~?([^{}]*)\}",
                  r" \1 ", text)
    text = text.replace("~", " ")
    text = re.sub(r"\\sim\s*(?=[A-Z]\b|[A-Z][a-z]*\s*\()", " is distributed as ", text)  # 'X \\sim N(0,1)'
    text = re.sub(r"\\n?f?actorial\s*\{([^{}]*)\}", r" \1 factorial ", text)  # also MMLU-Pro's "\nactorial" typo
    text = re.sub(r"(?<=[A-Za-z0-9}])\s*!", " factorial ", text)
    text = re.sub(r"\b([A-Z][a-z]?(?:[A-Z][a-z]?)+)\s*_\s*\{?\s*(\d+)\s*\}?", r"\1\2", text)  # CO_2 -> CO2
    for _ in range(3):  # nested fractions, innermost first
        text = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", lambda m: f" {_over(m.group(1), m.group(2))} ", text)
        text = re.sub(r"\\[dt]?frac\s*(\d)(\d)", lambda m: f" {_over(m.group(1), m.group(2))} ", text)
    text = re.sub(r"\\sqrt\s*\[(\d)\]\s*\{([^{}]*)\}", lambda m: f" the {say_ordinal(int(m.group(1)))} root of {m.group(2)} ", text)
    text = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r" the square root of \1 ", text)
    text = re.sub(r"\\(hat|bar|vec|tilde|dot)\s*\{([^{}]*)\}",
                  lambda m: f" {m.group(2)} {'vector' if m.group(1) == 'vec' else m.group(1)} ", text)
    text = re.sub(r"\^\s*\{?\s*\\circ\s*\}?\s*(?:\\mathrm\s*\{\s*~?([CFK])\s*\}|([CFK])\b)?",
                  lambda m: "°" + (m.group(1) or m.group(2) or ""), text)
    text = powers(text)
    # a micro prefix before a unit ('\\mu m', '\\mu\\mathrm{g}'): the unit symbol the units pass reads
    text = re.sub(r"\\mu\s*(?=(?:m|g|s|L|l|F|C|A|H|T|W|V|mol)\b)", "μ", text)
    text = re.sub(r"\\ding\s*\{\s*\d+\s*\}", ", ", text)
    text = re.sub(r"\^\s*\{?\s*\\rule\s*\{[^{}]*\}\s*\{[^{}]*\}", "^-", text)  # a rule drawn as a superscript's minus
    text = re.sub(r"\\rule\s*\{[^{}]*\}\s*\{[^{}]*\}", " blank ", text)  # a fill-in line  # a dingbat: a list's bullet or arrow, not a number
    text = re.sub(r"\\text(?=(?:" + _GREEK_NAMES + r")(?![A-Za-z]))", r"\\", text)  # '\\textphi' is '\\phi'
    text = re.sub(r"\\sqrt\s*(\w)", r" the square root of \1 ", text)  # '\\sqrt 2'
    text = re.sub(r"\\mu(m|g|s|F|H|A|V|C|L|mol)(?=[a-z]{2})", r"μ\1 ", text)  # '\\muFcapacitor'
    text = _GLUED_GREEK.sub(lambda m: m[0] if m[1] == "text" or m[0][1:] in KNOWN_COMMANDS else f"\\{m[1]} {m[2]}",
                            text)  # '\\DeltaE', '\\rhoV': a Greek letter and a variable
    text = re.sub(r"_\s*\{([^{}]*)\}", r" sub \1 ", text)
    text = re.sub(r"_\s*([A-Za-z0-9])", r" sub \1 ", text)
    for table in (_LATEX_GREEK, _LATEX_WORDS):
        for k in sorted(table, key=len, reverse=True):
            text = re.sub(re.escape(k) + (r"(?![A-Za-z])" if k[-1].isalpha() else ""), table[k], text)
    text = re.sub(r"\\[A-Za-z]+", " ", text)  # unknown commands: drop the command, keep its arguments
    text = re.sub(r"\$(?!\s?\.?\d)", " ", text).replace("{", " ").replace("}", " ")  # a price keeps its sign
    return re.sub(r"(?<=\w)\s*/\s*(?=\w)", "/", text)  # '\\mathrm{m}/\\mathrm{s}' is 'm/s', a unit the units pass reads


def _closes_math(inner: str) -> bool:
    """A `$` pair is a formula when it is not padded inside; a pair opening on a letter or a command may end in a
    space ('$F(8, 4) $'); one opening on a number may not ('$20 = $34' is two prices)."""
    return inner[:1] not in " \t" and (inner == inner.rstrip() or not re.match(r"[\d.,]", inner))


def _over(num: str, den: str) -> str:
    num, den = num.strip(), den.strip()
    if re.fullmatch(r"\d+", num) and re.fullmatch(r"\d+", den):
        return f"{num}/{den}"  # read later as a fraction
    return f"{num} over {den}"


def powers(text: str) -> str:
    # an ion's charge as a superscript ('Sn^2+(a = 0.1)', 'Fe^{3+},'): 'two plus', never 'squared plus'
    text = re.sub(r"(?<=[A-Za-z])\^\s*\{?\s*(?:(\d)\s*([+-])\s*\}?(?=\s*[(,;.)]|\s*$)|([+-])\s*\}?(?=\s*[,;.)]|\s*$))",
                  lambda m: f" {m[1] or ''} {'plus' if (m[2] or m[3]) == '+' else 'minus'} ", text)
    text = re.sub(r"(\^\s*(?:\{[^{}]*\}|\d+|[A-Za-z]))-(?=[\w(])", r"\1 minus ", text)  # 'x^2-y'
    # a spaced hyphen after a power subtracts ('x^2 - y^2'); after the words it becomes it would read as a pause
    text = re.sub(r"(\^\s*(?:\{[^{}]*\}|-?[\w.]+))\s+-\s+(?=[\w(])", r"\1 minus ", text)
    text = re.sub(r"\^\s*\{?\s*2\s*\}?(?!\d|\.\d)", " squared ", text)  # a full stop after it ends a sentence
    text = re.sub(r"\^\s*\{?\s*3\s*\}?(?!\d|\.\d)", " cubed ", text)
    text = re.sub(r"\^\s*\{\s*-\s*([^{}]+)\}", r" to the minus \1 ", text)
    text = re.sub(r"\^\s*-\s*(\d+|[A-Za-z]|\([^()]*\))", r" to the minus \1 ", text)
    text = re.sub(r"\^\s*\{([^{}]*)\}", r" to the \1 ", text)
    return re.sub(r"\^\s*(\d+(?:\.\d+)?|[A-Za-z])", r" to the \1 ", text)


def _replace_math(text: str, say) -> str:
    """Every span `math_spans` takes for a formula, replaced by `say(inner)` (a number alone between
    dollar signs by itself, or by nothing when `say` is `without_math`'s)."""
    text = re.sub(r"(?<=[\d.}])\$\$(?=\s*[-\d.\\])", r"$ \\times $", text)
    text = re.sub(r"(?<![\w$\\])\$\s?(-?\d[\d,]*(?:\.\d+)?|-?\.\d+)\s?\$(?![\d$])",
                  lambda m: f" {m.group(1) if say is _latex else ''} ", text)
    text = re.sub(r"\$\$(.+?)\$\$", lambda m: " " + say(m.group(1)) + " ", text, flags=re.DOTALL)
    text = re.sub(r"\\\[(.+?)\\\]|\\\((.+?)\\\)", lambda m: " " + say(m.group(1) or m.group(2)) + " ", text,
                  flags=re.DOTALL)
    out, pos = [], 0
    for m in re.finditer(r"(?<!\\)\$([^$]*)(?<!\\)\$", text):
        # "$6 + $8 + $20 = $34": a closing "$" that opens a price, or padded with spaces, is money
        if _is_math(m.group(1)) and not re.match(r"\d", text[m.end():]) and _closes_math(m.group(1)):
            out.append(text[pos:m.start()] + " " + say(m.group(1)) + " ")
            pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def without_math(text: str) -> str:
    """The text with its formulas taken out, as the money pass sees it: a '$' left is a price
    (the inventory check counts them, kame_data/text/inventory.py)."""
    return _replace_math(text, lambda inner: " ")


def math_spans(text: str) -> str:
    """`$...$`, `$$...$$`, `\\[...\\]` and `\\(...\\)` that hold formulas are spoken as math.

    A number alone between dollar signs (`$-5$`, `$1.3$$10^7$`) is LaTeX, never a price: two
    spans side by side are a product ('one point three times ten to the seven')."""
    text = re.sub(r"\$\s*\^\s*\{?\s*\\circ\s*\}?\s*\$\s*(?=[CFK]\b)", "°", text)  # '25 $^\\circ$C'
    text = re.sub(r"\$\s*\\mu\s*\$\s*(?=(?:m|g|s|L|l|F|C|A|H|T|W|V|mol)\b)", "μ", text)  # '5 $\\mu$m'
    text = _replace_math(text, _latex)
    if "\\" in text:
        text = _latex(text)
    return text
