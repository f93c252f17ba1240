"""Arithmetic as people say it, in English, Dutch, German and French, rewritten into calculator syntax. No IO.

``spoken_to_expression("15% of 80")`` -> ``"(15/100)*80"``; ``"square root of 144"`` -> ``"sqrt(144)"``;
``"12 keer 12"`` -> ``"12 * 12"``; ``"7 mal 6"``, ``"3 fois 4"``, ``"9 times 9"``, ``"10 x 3"`` -> ``*``;
``"plus"``, ``"minus"``/``"min"``/``"moins"``, ``"divided by"``/``"gedeeld door"``/``"geteilt durch"``/
``"divisé par"``, ``"to the power of"``/``"tot de macht"``/``"hoch"``, ``"squared"``/``"kwadraat"``. Words are
replaced only between (or, for roots and percentages, before) numbers, so ordinary prose is left alone. Numbers
written as words become digits first (``"seven times eight plus twelve"`` -> ``"7 * 8 + 12"``,
``"zevenentwintig keer drie"`` -> ``"27 * 3"``; server/tools/number_words.py). A handful of regular-expression
passes: linear in the text.
"""

from __future__ import annotations

import re

from respstream.server.tools.number_words import words_to_digits

__all__ = ["spoken_to_expression"]

_NUMBER = r"(\d+(?:\.\d+)?)"
# A number that starts where a digit run starts: without the look-behind a search retries the pattern inside every
# run of digits, each retry backtracking over the rest of it (quadratic on "1" * n; issue 42 H2v).
_NUMBER_START = r"(?<!\d)(?<!\d\.)" + _NUMBER
_PERCENT_OF = re.compile(_NUMBER_START + r"\s*(?:%|percent|procent|prozent|pour\s*cent)\s+(?:of|van|von|de|du|des)\s+",
                         re.IGNORECASE)
_PERCENT = re.compile(_NUMBER_START + r"\s*%(?!\s*[\d(])")
_ROOT = re.compile(
    r"(?:the\s+)?(?:square\s+root|sqrt|(?:vierkants)?wortel|(?:quadrat)?wurzel|racine\s+carr[ée]e)\s+"
    r"(?:of|uit|van|aus|von|de)\s+(?:the\s+number\s+)?" + _NUMBER + r"|√\s*" + _NUMBER,
    re.IGNORECASE,
)
_BETWEEN = r"(?<=[\d)])\s+(?:{words})\s+(?=[\d(]|sqrt\()"
_OPERATORS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(_BETWEEN.format(words=w), re.IGNORECASE), op)
    for w, op in (
        (r"to\s+the\s+power\s+of|tot\s+de\s+macht|hoch|puissance", " ^ "),
        (r"multiplied\s+by|times|keer|maal|mal|fois|multipli[ée]\s+par|x", " * "),
        (r"divided\s+by|gedeeld\s+door|geteilt\s+durch|durch|divis[ée]\s+par|over", " / "),
        (r"plus|und|et", " + "),
        (r"minus|min|moins|weniger", " - "),
    )
]
_SQUARED = re.compile(r"(?<=[\d)])\s*(?:squared|kwadraat|au\s+carr[ée]|zum\s+quadrat)\b", re.IGNORECASE)
_ANCHOR = re.compile(r"[\d)]")
_SIGNS = str.maketrans({"\u00d7": "*", "\u00f7": "/", "\u2212": "-", "\u00b7": "*"})  # x, divide, minus, dot


def spoken_to_expression(text: str) -> str:
    """``text`` with spoken arithmetic rewritten (see the module docstring); everything else unchanged."""
    out = words_to_digits(text.translate(_SIGNS))
    if _ANCHOR.search(out) is None:  # every rewrite needs a digit or ")" next to its words: prose stays as it is
        return out
    out = _ROOT.sub(lambda m: f"sqrt({m.group(1) or m.group(2)})", out)
    out = _PERCENT_OF.sub(lambda m: f"({m.group(1)}/100)*", out)
    out = _SQUARED.sub("^2", out)
    for pattern, op in _OPERATORS:
        out = pattern.sub(op, out)
    return _PERCENT.sub(lambda m: f"({m.group(1)}/100)", out)
