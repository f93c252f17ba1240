"""Numbers written as words, in English, Dutch, German and French, turned into digits. No IO, linear time.

``words_to_digits("What is seven times eight plus twelve?")`` -> ``"What is 7 times 8 plus 12?"``;
``"zevenentwintig keer drie"`` -> ``"27 keer drie"``... -> ``"27 keer 3"``; ``"siebenundzwanzig"`` -> ``"27"``;
``"quatre-vingt-dix-sept"`` -> ``"97"``; ``"two hundred and five"`` -> ``"205"``; ``"tweeduizend"`` -> ``"2000"``.

How this works: one scan cuts the text into words (letters, hyphens joining them); each word is read as a number
by a small fixed grammar (units, teens, tens; Dutch/German "unit + en/und + tens" compounds; a hundreds and a
thousands multiplier), at most a handful of dictionary look-ups per split point, so a word costs O(its length).
Neighbouring number words then combine the way speech does ("twenty" "one" -> 21, "seven" "hundred" -> 700) as long
as each part is smaller than the place it fills ("one two" stays "1 2"). Words that are not numbers, and the text
between them, are kept as they are. Used to find arithmetic in a question (server/tools/arith_words.py) and to accept
an answer that writes the calculator's result in words (server/responses/grounded_answer.py).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

__all__ = ["words_to_digits"]

_UNITS: dict[str, int] = {}
for _value, _names in enumerate((
    ("zero", "nul", "null", "zero"), ("one", "een", "eins", "ein", "eine", "un", "une"),
    ("two", "twee", "zwei", "deux"), ("three", "drie", "drei", "trois"), ("four", "vier", "quatre"),
    ("five", "vijf", "funf", "cinq"), ("six", "zes", "sechs"), ("seven", "zeven", "sieben", "sept"),
    ("eight", "acht", "huit"), ("nine", "negen", "neun", "neuf"),
)):
    _UNITS.update((name, _value) for name in _names)
_TEENS = {
    "ten": 10, "tien": 10, "zehn": 10, "dix": 10, "eleven": 11, "elf": 11, "onze": 11, "twelve": 12, "twaalf": 12,
    "zwolf": 12, "douze": 12, "thirteen": 13, "dertien": 13, "dreizehn": 13, "treize": 13, "fourteen": 14,
    "veertien": 14, "vierzehn": 14, "quatorze": 14, "fifteen": 15, "vijftien": 15, "funfzehn": 15, "quinze": 15,
    "sixteen": 16, "zestien": 16, "sechzehn": 16, "seize": 16, "seventeen": 17, "zeventien": 17, "siebzehn": 17,
    "eighteen": 18, "achttien": 18, "achtzehn": 18, "nineteen": 19, "negentien": 19, "neunzehn": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "twintig": 20, "zwanzig": 20, "vingt": 20, "thirty": 30, "dertig": 30, "dreissig": 30,
    "trente": 30, "forty": 40, "veertig": 40, "vierzig": 40, "quarante": 40, "fifty": 50, "vijftig": 50,
    "funfzig": 50, "cinquante": 50, "sixty": 60, "zestig": 60, "sechzig": 60, "soixante": 60, "seventy": 70,
    "zeventig": 70, "siebzig": 70, "eighty": 80, "tachtig": 80, "achtzig": 80, "quatrevingt": 80,
    "quatrevingts": 80, "ninety": 90, "negentig": 90, "neunzig": 90,
}  # fmt: skip
_SMALL = {**_UNITS, **_TEENS, **_TENS}
_HUNDRED = ("hundred", "honderd", "hundert")
_THOUSAND = ("thousand", "duizend", "tausend", "mille")
_JOINS = ("en", "und")  # Dutch/German "unit and tens" inside one word: een|en|twintig, sieben|und|zwanzig
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
# Words that join two number words of one number: "two hundred and five", "vingt et un".
_CONNECTORS: dict[str, Callable[[int, int], bool]] = {
    "and": lambda left, right: left % 100 == 0,
    "et": lambda left, right: left % 10 == 0 and right in (1, 11),
}


def _fold(word: str) -> str:
    decomposed = unicodedata.normalize("NFKD", word.lower().replace("ß", "ss"))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _below_hundred(word: str) -> int | None:
    if word in _SMALL:
        return _SMALL[word]
    for join in _JOINS:  # eenentwintig, tweeentwintig (folded from tweeëntwintig), siebenundzwanzig
        at = word.find(join, 2)
        while 0 < at <= 6:
            unit, tens = word[:at], word[at + len(join):]
            if unit in _UNITS and _UNITS[unit] > 0 and tens in _TENS:
                return _UNITS[unit] + _TENS[tens]
            at = word.find(join, at + 1)
    return None


def _below_thousand(word: str) -> int | None:
    for name in _HUNDRED:
        at = word.find(name)
        if at >= 0:
            head, tail = word[:at], word[at + len(name):]
            count = _UNITS.get(head, 0) if head else 1
            rest = _below_hundred(tail) if tail else 0
            if count and rest is not None:
                return count * 100 + rest
            return None
    return _below_hundred(word)


def _number(word: str) -> int | None:
    """The value of one word (no spaces or hyphens), or None."""
    if len(word) > 40:
        return None
    for name in _THOUSAND:
        at = word.find(name)
        if at >= 0:
            head, tail = word[:at], word[at + len(name):]
            count = _below_thousand(head) if head else 1
            rest = _below_thousand(tail) if tail else 0
            if count and rest is not None:
                return count * 1000 + rest
            return None
    return _below_thousand(word)


def _parts(word: str) -> list[int] | None:
    """The values of a (possibly hyphenated) word's pieces: ``"vingt-sept"`` -> ``[20, 7]``, or None."""
    folded = _fold(word).replace("quatre-vingt", "quatrevingt")
    values = []
    for piece in folded.split("-"):
        value = _number(piece)
        if value is None:
            return None
        values.append(value)
    return values


_FRENCH_UNITS = frozenset(("deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf"))


State = tuple[int, int, int]  # (thousands part, the part below it, the last part added); (0, 0, 0): nothing yet


def _add(state: State, values: list[int]) -> State | None:
    """``state`` after the parts ``values`` of one word, or None when they do not continue the number: each part
    must be smaller than the place it fills ("twenty" "one", never "one" "two"; "dix-sept"; "soixante-douze")."""
    high, low, last = state
    for value in values:
        started = high or low or last
        if value == 1000:
            if high or last == 1000:
                return None
            high, low, last = (low or 1) * 1000, 0, 1000
        elif value == 100:
            if low >= 10 or last == 100:
                return None
            low, last = (low or 1) * 100, 100
        elif value > 100:  # one word that is a whole number already: tweehonderdvijftig, zweitausend
            if started and not (last == 1000 and low == 0 and value < 1000):
                return None
            high, low = high + value - value % 1000, value % 1000
            last = value % 100 or (100 if value % 1000 else 1000)
        elif started and not (
            (last in (100, 1000) and value < 100 and low % 100 == 0)
            or (last in (60, 80) and value < 20)
            or (last >= 20 and last % 10 == 0 and value < 10)
            or (last == 10 and 7 <= value <= 9)
        ):
            return None
        else:
            low, last = low + value, value
    return high, low, last


def _word_values(word: str, previous: str) -> list[int] | None:
    folded = _fold(word)
    if folded in ("cent", "cents"):  # French hundreds only after a French unit: "five cents" is money, not 500
        return [100] if previous in _FRENCH_UNITS else None
    return _parts(word)


def words_to_digits(text: str) -> str:
    """``text`` with every number written in words replaced by its digits (see the module docstring)."""
    out: list[str] = []
    kept = 0  # text[:kept] is already in out
    start = end = -1  # the number being read: text[start:end]; start < 0 when none
    state: State = (0, 0, 0)
    connector_end = -1  # the end of an "and"/"et" right after the number, which may join the next word to it
    connector = ""
    previous = ""

    for match in _WORD.finditer(text):
        word = match.group(0)
        values = _word_values(word, previous)
        previous = _fold(word)
        if values is None:
            folded = word.lower()
            if start >= 0 and connector_end < 0 and folded in _CONNECTORS and text[end:match.start()].isspace():
                connector_end, connector = match.end(), folded
                continue
            if start >= 0:
                out.append(text[kept:start] + str(state[0] + state[1]))
                kept, start = end, -1
            connector_end = -1
            continue
        joined: State | None = None
        if start >= 0:
            gap_from = connector_end if connector_end >= 0 else end
            if text[gap_from:match.start()].isspace() and (
                    connector_end < 0 or _CONNECTORS[connector](state[0] + state[1], values[0])):
                joined = _add(state, values)
        if joined is not None:
            state, end = joined, match.end()
        else:
            if start >= 0:
                out.append(text[kept:start] + str(state[0] + state[1]))
                kept, start = end, -1
            fresh = _add((0, 0, 0), values)
            if fresh is not None:  # "een-twee" is not one number: the word stays as it is
                state, start, end = fresh, match.start(), match.end()
        connector_end = -1
    if start >= 0:
        out.append(text[kept:start] + str(state[0] + state[1]))
        kept = end
    out.append(text[kept:])
    return "".join(out)
