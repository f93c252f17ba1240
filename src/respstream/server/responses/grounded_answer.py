"""Answers faithful to deterministic tools: the instruction that gives a model the result, and the check after it.

How this works: when grounding ran ``calculator`` or ``current_datetime`` for a question (see
:func:`~respstream.server.routing.router.ground_first`), :func:`grounding_instruction` is the system note the model gets
with the result ("state exactly this"). After generation, :class:`GroundedFacts` is a rewrite step that checks the
final text states the result, and otherwise repairs it:

- ``calculator`` (result ``391``): the text must contain the number, as written, in words (``achtenzestig``) or with
  thousands separators or, for a long decimal, rounded to 1-6 places (``1.41``, ``1,41``). If it does not and it
  claims ``<expression> = N``, the wrong ``N`` is replaced; otherwise a short note with the result is appended.
- ``current_datetime``: the text must give the tool's time (``HH:MM``; a 12-hour time must have the right AM/PM) or,
  when it names no time at all, the weekday or the date (English, Dutch, German or French names), and it must not
  name a wrong weekday. A wrong time is replaced by the tool's 24-hour time, a wrong weekday by the right one in the
  same language; an answer with neither gets a note appended. When the tool ran in UTC only because no known place
  was named, a different time is never replaced (it may be the asker's right local time): a UTC note is added.

Changed text goes out through the usual rewrite path, so the stream carries ``response.rewrite.in_progress`` before
the corrected ``output_text.done``. Pure and linear in the text (a few regular-expression scans).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from respstream.server.tools.number_words import words_to_digits

__all__ = ["Fact", "GroundedFacts", "check_calculation", "check_datetime", "grounding_instruction"]


@dataclass(frozen=True, slots=True)
class Fact:
    """A deterministic tool's answer for this response: ``tool`` name, its ``arguments`` and ``output``."""

    tool: str
    arguments: dict[str, str]
    output: str


def grounding_instruction(fact: Fact) -> str:
    """The system note that hands the model a computed result and asks it to state it as given."""
    if fact.tool == "calculator":
        return (f"The calculator computed {fact.arguments.get('expression', '')} = {fact.output} for the user's "
                f"question. This result is exact: state {fact.output} as the answer, without recomputing it, "
                "in the language of the question.")
    return (f"The current_datetime tool says it is now {fact.output}. This is exact: answer with this time and "
            "date as given (24-hour clock, with the weekday and time zone when they help), without inventing "
            "another, in the language of the question.")


# -- calculator -----------------------------------------------------------------------------------------------------

_NUMBERISH = re.compile(r"(?<![\w.,])-?\d[\d,. \u00a0\u202f']*\d(?![\w])|(?<![\w.,])-?\d(?![\w])")


def _plain_number(token: str) -> str:
    """``"1,024"`` / ``"1.024"`` / ``"1 024"`` -> ``"1024"``; ``"1,41"`` -> ``"1.41"`` (one comma, not a thousands
    group: a decimal comma)."""
    token = token.replace("\u00a0", " ").replace("\u202f", " ").replace("'", "").strip()
    if re.fullmatch(r"-?\d{1,3}(?:[ ,.]\d{3})+", token) and not re.fullmatch(r"-?\d+\.\d{3}", token.replace(" ", "")):
        return re.sub(r"[ ,.]", "", token)
    token = token.replace(" ", "")
    if token.count(",") == 1 and "." not in token:
        token = token.replace(",", ".")
    return token


def _accepted_forms(result: str) -> set[str]:
    forms = {result}
    try:
        value = float(result)
    except ValueError:
        return forms
    if "." in result or "e" in result.lower():
        for places in range(1, 7):
            forms.add(f"{value:.{places}f}".rstrip("0").rstrip(".") if places else f"{value:.0f}")
            forms.add(f"{value:.{places}f}")
    if value.is_integer():
        forms.add(str(int(value)))
    return forms


def check_calculation(text: str, expression: str, result: str) -> str | None:
    """None when ``text`` states ``result``; else the repaired text (see the module docstring)."""
    forms = _accepted_forms(result)
    in_digits = words_to_digits(text)
    for match in (*_NUMBERISH.finditer(text), *(_NUMBERISH.finditer(in_digits) if in_digits != text else ())):
        if _plain_number(match.group(0)) in forms:
            return None
    claim = re.compile(re.escape(expression.strip()) + r"\s*(?:=|is|equals|gives|makes|ist|est|fait|gleich)\s*"
                       r"(-?\d+(?:[,.]\d+)*)", re.IGNORECASE) if expression.strip() else None
    found = claim.search(text) if claim is not None else None
    if found is not None:
        return text[: found.start(1)] + result + text[found.end(1):]
    return f"{text.rstrip()}\n\n(Calculator: {expression} = {result}.)" if text.strip() else f"{expression} = {result}."


# -- current_datetime -------------------------------------------------------------------------------------------------

_TIME = re.compile(r"(?<![\d:+\-])([01]?\d|2[0-3])[:.h]([0-5]\d)(?::[0-5]\d)?(?:\s*([AaPp])\.?\s*[Mm]\.?)?(?![\d])")
_WEEKDAYS = (
    ("monday", "maandag", "montag", "lundi"), ("tuesday", "dinsdag", "dienstag", "mardi"),
    ("wednesday", "woensdag", "mittwoch", "mercredi"), ("thursday", "donderdag", "donnerstag", "jeudi"),
    ("friday", "vrijdag", "freitag", "vendredi"), ("saturday", "zaterdag", "samstag", "samedi"),
    ("sunday", "zondag", "sonntag", "dimanche"),
)  # fmt: skip


def _moment(output: str) -> datetime | None:
    iso = output.rsplit(" ", 1)[-1]
    try:
        return datetime.fromisoformat(iso)
    except ValueError:
        return None


_WORD = re.compile(r"[^\W\d_]+")
_WEEKDAY_OF = {name: (day, language) for day, names in enumerate(_WEEKDAYS) for language, name in enumerate(names)}


def _weekdays_named(text: str) -> list[re.Match[str]]:
    return [m for m in _WORD.finditer(text) if m.group(0).lower() in _WEEKDAY_OF]


def _with_weekday(text: str, named: list[re.Match[str]], right: int) -> str | None:
    """``text`` with each wrong weekday replaced by the right one in the same language and case, or None when it
    names none or names the right one (then any other day it names is about another day: "tomorrow is Friday")."""
    if not named or any(_WEEKDAY_OF[m.group(0).lower()][0] == right for m in named):
        return None
    out, kept = [], 0
    for match in named:
        word = _WEEKDAYS[right][_WEEKDAY_OF[match.group(0).lower()][1]]
        out += [text[kept:match.start()], word.capitalize() if match.group(0)[0].isupper() else word]
        kept = match.end()
    return "".join(out) + text[kept:]


def check_datetime(text: str, output: str, *, zone_known: bool = True) -> str | None:
    """None when ``text`` states the tool's time (or, naming no time, its weekday or date) and names no wrong
    weekday; else the repaired text. ``zone_known``: False when the tool ran in UTC only because the question named
    no place the gateway knows: a different time in the text may then be a right local time, so it is never replaced
    by the UTC one; a note with the UTC time is added instead."""
    moment = _moment(output)
    if moment is None:
        return None
    wrong: re.Match[str] | None = None
    right_time = False
    for match in _TIME.finditer(text):
        hour, minute, half = int(match.group(1)), int(match.group(2)), (match.group(3) or "").lower()
        if half:
            hour = hour % 12 + (12 if half == "p" else 0)
        if (hour, minute) == (moment.hour, moment.minute) or (
            hour * 60 + minute - moment.hour * 60 - moment.minute
        ) in (-1, 1):
            right_time = True
            break
        wrong = wrong or match
    fixed = text
    if not right_time and wrong is not None:
        if not zone_known:
            return f"{text.rstrip()}\n\n(current_datetime: {output.split('; ISO')[0]}.)"
        fixed = text[: wrong.start()] + f"{moment:%H:%M}" + text[wrong.end():]
    named = _weekdays_named(fixed)
    weekday_fixed = _with_weekday(fixed, named, moment.weekday())
    if weekday_fixed is not None:
        return weekday_fixed
    if right_time or wrong is not None or named:
        return None if fixed == text else fixed
    if moment.date().isoformat() in text:
        return None
    day = re.search(rf"(?<!\d){moment.day}(?:st|nd|rd|th|e|er|\.)?\s+\w+", text.lower())
    if day is not None and day.group(0).split()[-1][:3] in _month_stems(moment.month):
        return None
    note = f"(current_datetime: {output.split('; ISO')[0]}.)"
    if not text.strip():
        return f"It is {output.split('; ISO')[0]}."
    return f"{text.rstrip()}\n\n{note}"


def _month_stems(month: int) -> set[str]:
    names = (("jan",), ("feb", "fév"), ("mar", "maa", "mär"), ("apr", "avr"), ("may", "mei", "mai"),
             ("jun", "jui"), ("jul", "jui"), ("aug", "aoû"), ("sep",), ("oct", "okt"), ("nov",), ("dec", "dez", "déc"))
    return set(names[month - 1])


class GroundedFacts:
    """The rewrite step over one response's tool facts (see the module docstring). ``changed`` says what it did."""

    name = "grounded_facts"

    def __init__(self, facts: list[Fact]) -> None:
        self.facts = facts
        self.changed: list[str] = []

    async def __call__(self, text: str, language: str | None) -> str:
        return self.apply(text)

    def apply(self, text: str) -> str:
        for fact in self.facts:
            if fact.tool == "calculator":
                fixed = check_calculation(text, fact.arguments.get("expression", ""), fact.output)
            elif fact.tool == "current_datetime":
                fixed = check_datetime(text, fact.output,
                                       zone_known=fact.arguments.get("timezone", "UTC") not in ("", "UTC"))
            else:
                continue
            if fixed is not None:
                self.changed.append(fact.tool)
                text = fixed
        return text
