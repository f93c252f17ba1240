"""Grounded answers (responses/grounded_answer.py), spoken arithmetic, language cues, search queries, the clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from respstream.server.responses.grounded_answer import Fact, GroundedFacts, check_calculation, check_datetime
from respstream.server.routing.router import classify, ground_first
from respstream.server.tools.calculator import evaluate, format_number
from respstream.server.tools.clock import describe_datetime
from respstream.server.tools.search_query import search_query

NOON = datetime(2026, 12, 1, 10, 25, 7, tzinfo=UTC)  # a Tuesday; 11:25 in Amsterdam
AMS = describe_datetime("Europe/Amsterdam", now=lambda: NOON)


def test_describe_datetime_has_weekday_zone_and_iso() -> None:
    assert AMS == ("Tuesday 1 December 2026, 11:25:07 in Europe/Amsterdam (CET, UTC+01:00); "
                   "ISO 8601: 2026-12-01T11:25:07+01:00")
    assert describe_datetime(None, now=lambda: NOON).startswith("Tuesday 1 December 2026, 10:25:07 in UTC (UTC+00:00)")


@pytest.mark.parametrize(("spoken", "value"), [
    ("15% of 80", "12"), ("square root of 144", "12"), ("12 keer 12", "144"), ("7 mal 6", "42"),
    ("3 fois 4", "12"), ("9 times 9", "81"), ("2^10", "1024"), ("10 % 3", "1"), ("100 gedeeld door 4", "25"),
    ("5 squared", "25"), ("wortel uit 81", "9"), ("racine carrée de 49", "7"), ("20 procent van 50", "10"),
])
def test_spoken_arithmetic(spoken: str, value: str) -> None:
    assert format_number(evaluate(spoken)) == value


@pytest.mark.parametrize(("question", "tool", "arguments"), [
    ("Hoe laat is het in Amsterdam?", "current_datetime", {"timezone": "Europe/Amsterdam"}),
    ("Wie spät ist es in Berlin?", "current_datetime", {"timezone": "Europe/Berlin"}),
    ("Quelle heure est-il à Paris ?", "current_datetime", {"timezone": "Europe/Paris"}),
    ("Welke dag is het vandaag?", "current_datetime", {"timezone": "UTC"}),
    ("Welcher Tag ist heute?", "current_datetime", {"timezone": "UTC"}),
    ("Wat is 12 keer 12?", "calculator", {"expression": "12 * 12"}),
    ("Was ist 7 mal 6?", "calculator", {"expression": "7 * 6"}),
    ("Combien font 3 fois 4 ?", "calculator", {"expression": "3 * 4"}),
    ("What is the square root of 144?", "calculator", {"expression": "sqrt(144)"}),
])
def test_language_cues_pick_the_tool(question: str, tool: str, arguments: dict[str, str]) -> None:
    category, reasoning = classify(question)
    assert ground_first(question, category) == (tool, arguments)
    assert f"{tool} first" in reasoning


def test_percent_question_is_computed() -> None:
    category, _ = classify("What is 15% of 80?")
    found = ground_first("What is 15% of 80?", category)
    assert found is not None and found[0] == "calculator" and format_number(evaluate(found[1]["expression"])) == "12"


def test_search_query_comes_from_the_question() -> None:
    prompt = "Some pasted context that is long.\n\nHey, could you tell me what the latest news about the Mars rover is?"
    assert search_query(prompt) == "latest news mars rover"
    assert search_query('Who made "Open Responses"?') == '"Open Responses" made'
    assert search_query("Wat is het laatste nieuws over de Eiffeltoren?") == "laatste nieuws eiffeltoren"
    assert search_query("what is it?") == "what is it?"  # only stop words: the question itself


def test_calculation_stated_corrected_or_annotated() -> None:
    assert check_calculation("17 * 23 = 391.", "17 * 23", "391") is None
    assert check_calculation("The answer is 1,024.", "2^10", "1024") is None
    assert check_calculation("It is about 1.41.", "sqrt(2)", "1.4142135623730951") is None
    assert check_calculation("17 * 23 = 367.", "17 * 23", "391") == "17 * 23 = 391."
    fixed = check_calculation("Glad to help!", "17 * 23", "391")
    assert fixed == "Glad to help!\n\n(Calculator: 17 * 23 = 391.)"


def test_time_stated_corrected_or_annotated() -> None:
    assert check_datetime("Het is nu 11:25 in Amsterdam.", AMS) is None
    assert check_datetime("It is 11:25:07 AM on Tuesday.", AMS) is None
    assert check_datetime("It is 11:24:43 PM (UTC).", AMS) == "It is 11:25 (UTC)."  # wrong half of the day
    assert check_datetime("Es ist 22:22 Uhr.", AMS) == "Es ist 11:25 Uhr."
    assert check_datetime("Vandaag is het dinsdag.", AMS) is None  # a date question answered with the weekday
    noted = check_datetime("I cannot know that.", AMS)
    assert noted is not None and noted.endswith("(current_datetime: Tuesday 1 December 2026, 11:25:07 in "
                                                "Europe/Amsterdam (CET, UTC+01:00).)")


async def test_grounded_facts_step_reports_what_it_changed() -> None:
    step = GroundedFacts([Fact("calculator", {"expression": "17 * 23"}, "391"), Fact("web_search", {}, "[]")])
    assert await step("17 * 23 = 367", None) == "17 * 23 = 391" and step.changed == ["calculator"]
    assert GroundedFacts([Fact("calculator", {"expression": "2+2"}, "4")]).apply("2+2 is 4") == "2+2 is 4"


# -- issue 31: number words, place names in four languages, weekdays, never UTC over a right local time ---------------

TOKYO = describe_datetime("Asia/Tokyo", now=lambda: NOON)  # Tuesday 19:25 in Tokyo
UTC_NOW = describe_datetime("UTC", now=lambda: NOON)  # Tuesday 10:25 UTC


@pytest.mark.parametrize(("question", "expression", "value"), [
    ("What is seven times eight plus twelve?", "7 * 8 + 12", "68"),
    ("Hoeveel is zeven keer acht plus twaalf?", "7 * 8 + 12", "68"),
    ("Was ist sieben mal acht plus zwölf?", "7 * 8 + 12", "68"),
    ("Combien font sept fois huit plus douze ?", "7 * 8 + 12", "68"),
    ("Hoeveel is zevenentwintig keer drie?", "27 * 3", "81"),
    ("Was ist siebenundzwanzig geteilt durch drei?", "27 / 3", "9"),
    ("Combien font quatre-vingt-dix-sept moins vingt et un ?", "97 - 21", "76"),
    ("What is two hundred and five minus ninety-nine?", "205 - 99", "106"),
    ("Wat is tweeduizend vierhonderd gedeeld door twaalf?", "2400 / 12", "200"),
])
def test_number_words_run_the_calculator(question: str, expression: str, value: str) -> None:
    category, reasoning = classify(question)
    assert ground_first(question, category) == ("calculator", {"expression": expression})
    assert "calculator first" in reasoning and format_number(evaluate(expression)) == value


@pytest.mark.parametrize("prose", [
    "I have one question and two answers.", "Onthoud dit getal voor me: 4711.", "Five cents is not much.",
    "Een keer per week.", "one two three four",
])
def test_prose_with_number_words_runs_no_calculator(prose: str) -> None:
    assert ground_first(prose, classify(prose)[0]) is None


@pytest.mark.parametrize(("question", "zone"), [
    ("Hoe laat is het in Tokio?", "Asia/Tokyo"), ("What time is it in Tokyo?", "Asia/Tokyo"),
    ("Wie spät ist es in Peking?", "Asia/Shanghai"), ("Quelle heure est-il à Pékin ?", "Asia/Shanghai"),
    ("Hoe laat is het in Londen?", "Europe/London"), ("Hoe laat is het in Parijs?", "Europe/Paris"),
    ("Hoe laat is het in Moskou?", "Europe/Moscow"), ("Hoe laat is het in Kaapstad?", "Africa/Johannesburg"),
    ("Hoe laat is het nu in Japan?", "Asia/Tokyo"), ("Quelle heure est-il au Japon ?", "Asia/Tokyo"),
    ("Wie spät ist es in Zürich?", "Europe/Zurich"), ("Welke dag is het in Zuid-Afrika?", "Africa/Johannesburg"),
    ("What time is it in São Paulo?", "America/Sao_Paulo"), ("What day is Easter this year?", None),
    ("What time is it in the West?", "UTC"),
])
def test_place_names_in_four_languages_give_the_zone(question: str, zone: str | None) -> None:
    category, _ = classify(question)
    found = ground_first(question, category)
    if zone is None:
        assert found is None or found[0] != "current_datetime" or found[1]["timezone"] == "UTC"
    else:
        assert found == ("current_datetime", {"timezone": zone})


def test_a_wrong_weekday_is_corrected_in_its_language() -> None:
    assert check_datetime("In Tokio is het nu 19:25 op dinsdag.", TOKYO) is None
    assert check_datetime("In Tokyo it is 19:25 on Wednesday.", TOKYO) == "In Tokyo it is 19:25 on Tuesday."
    assert check_datetime("Es ist Mittwoch, 19:25 Uhr.", TOKYO) == "Es ist Dienstag, 19:25 Uhr."
    assert check_datetime("Het is woensdag 22:22.", TOKYO) == "Het is dinsdag 19:25."  # time and day both wrong
    assert check_datetime("Today is Tuesday, tomorrow is Wednesday.", TOKYO) is None  # the right day is named


def test_a_local_time_is_never_replaced_by_the_utc_fallback() -> None:
    # No place was recognised, so the tool ran in UTC: the model's 19:25 may be right where the asker is.
    answer = "Het is nu 19:25."
    fixed = GroundedFacts([Fact("current_datetime", {"timezone": "UTC"}, UTC_NOW)]).apply(answer)
    assert fixed.startswith(answer) and "19:25" in fixed and "10:25:07 in UTC" in fixed
    # With a known zone a wrong time is still repaired.
    fixed = GroundedFacts([Fact("current_datetime", {"timezone": "Asia/Tokyo"}, TOKYO)]).apply("Het is nu 10:25.")
    assert fixed == "Het is nu 19:25."


def test_a_result_written_in_words_is_accepted() -> None:
    assert check_calculation("Zeven keer acht plus twaalf is achtenzestig.", "7 * 8 + 12", "68") is None
    assert check_calculation("Seven times eight plus twelve is sixty-eight.", "7 * 8 + 12", "68") is None
    assert check_calculation("Seven times eight plus twelve is sixty.", "7 * 8 + 12", "68") is not None


def test_number_words_are_read_in_linear_time() -> None:
    import time

    from respstream.server.tools.number_words import words_to_digits

    def cost(n: int) -> float:
        text = "zevenentwintig en negentig keer quatre-vingt-dix-sept and " * n
        start = time.perf_counter()
        words_to_digits(text)
        return time.perf_counter() - start

    cost(200)
    assert cost(4000) < cost(1000) * 4 * 2  # four times the input, at most ~4x the time (slack 2x)
