"""The text-delta template (protocol/delta_template.py, issue 33): a run of text deltas that repeat one event's bytes
around their number and delta is read with no decode of each event, and leaves the core exactly as reading the
events one by one does, on every grouping and byte cut; events that do not fit (another order of fields, a varying
field such as OpenAI's ``obfuscation``, a duplicated key, a bad escape, a second value in the delta's place) are read
by the probes as before, and bad input is still caught where it is."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.upstream.test_native_text_runs import cut, grouped, state, stream, translate

from respstream.protocol import delta_template
from respstream.protocol.delta_template import DeltaTemplate, decode_delta_probe, learn_delta_template
from respstream.server.upstream.base import Finish

_FIRST_DELTA = 3  # stream(): created, item added, part added, then the deltas


def edit(events: list[bytes], index: int, old: bytes, new: bytes) -> list[bytes]:
    """``events`` with delta ``index``'s bytes ``old`` replaced by ``new`` (once)."""
    out = list(events)
    at = _FIRST_DELTA + index
    assert old in out[at], (old, out[at])
    out[at] = out[at].replace(old, new, 1)
    return out


def every_delta(events: list[bytes], change: Any) -> list[bytes]:
    return [change(e) if b'"type":"response.output_text.delta"' in e else e for e in events]


def reordered(event: bytes) -> bytes:
    """The delta event with ``sequence_number`` after ``delta`` (another server's field order)."""
    head, data = event.split(b"data: ", 1)
    fields = json.loads(data)
    number = fields.pop("sequence_number")
    return head + b"data: " + json.dumps({**fields, "sequence_number": number}, separators=(",", ":")).encode() + \
        b"\n\n"


def spaced(event: bytes) -> bytes:
    head, data = event.split(b"data: ", 1)
    return head + b"data: " + json.dumps(json.loads(data)).encode() + b"\n\n"


FIT: dict[str, list[bytes]] = {
    "openai shape, numbers of 1 to 4 digits": stream(1100),
    "unnumbered (llama.cpp)": stream(300, numbered=False, named=False),
    "data lines only": stream(300, named=False),
    "number after the delta": every_delta(stream(300), reordered),
    "spaces after colons and commas": every_delta(stream(300), spaced),
    "escapes and non-ASCII": stream(200, words=[f' "q{i}" \\ é\n💡' for i in range(200)]),
    "empty deltas": stream(300, words=["" if i % 3 else f" w{i}" for i in range(300)]),
}
MISFIT: dict[str, list[bytes]] = {
    "a gap mid-run": stream(300, tweak={150: {"sequence_number": 999}}),
    "another item mid-run": stream(300, tweak={120: {"item_id": "msg_2"}}),
    "a null delta": stream(300, tweak={60: {"delta": None}}),
    "an extra field mid-run": stream(300, tweak={70: {"extra": 1}}),
    "obfuscation on every event (OpenAI)": stream(300, tweak={i: {"obfuscation": f"{i:x}" * (i % 5)}
                                                               for i in range(300)}),
    "a second delta string in the delta's place": edit(stream(300), 90, b'"delta":" w90"', b'"delta":" w90"," w"'),
    "a second delta key in every event": every_delta(stream(300), lambda e: e.replace(b',"logprobs"',
                                                                                       b',"delta":"dup","logprobs"')),
    "a bad escape mid-run": edit(stream(300), 150, b'"delta":" w150"', b'"delta":" w\\q150"'),
    "a raw control character mid-run": edit(stream(300), 160, b'"delta":" w160"', b'"delta":" w\x01160"'),
    "a delta that is a number": edit(stream(300), 40, b'"delta":" w40"', b'"delta":40'),
    "a number with a leading zero": edit(stream(300), 30, b'"sequence_number":33', b'"sequence_number":033'),
}


def counting_fits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patch ``DeltaTemplate.fit`` to count the events it read; the list holds one total."""
    fitted = [0]
    real = DeltaTemplate.fit

    def fit(self: DeltaTemplate, raw: bytes, at: int, head: bytes, parts: list[bytes], first: int) -> Any:
        got = real(self, raw, at, head, parts, first)
        fitted[0] += len(got) if got is not None else 0
        return got

    monkeypatch.setattr(delta_template.DeltaTemplate, "fit", fit)
    return fitted


@pytest.mark.parametrize("name", list(FIT) + list(MISFIT))
@pytest.mark.parametrize("group", [3, 50, 2000])
def test_grouped_reads_leave_what_one_event_a_read_leaves(name: str, group: int) -> None:
    events = {**FIT, **MISFIT}[name]
    want, one_by_one = translate(events)
    got, many = translate(grouped(events, group))
    assert [c for c in got if not isinstance(c, Finish)] == [c for c in want if not isinstance(c, Finish)]
    assert state(many) == state(one_by_one)


@pytest.mark.parametrize("name", ["openai shape, numbers of 1 to 4 digits", "number after the delta",
                                  "unnumbered (llama.cpp)", "a bad escape mid-run", "a gap mid-run"])
@pytest.mark.parametrize("size", [1, 13, 700, 4096, 20000])
def test_reads_cut_anywhere_give_the_same(name: str, size: int) -> None:
    events = {**FIT, **MISFIT}[name]
    want, one_by_one = translate(events)
    got, many = translate(cut(events, size))
    assert [c for c in got if not isinstance(c, Finish)] == [c for c in want if not isinstance(c, Finish)]
    assert state(many) == state(one_by_one)


@pytest.mark.parametrize("name", list(FIT))
def test_the_template_reads_most_of_a_fitting_run(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fitted = counting_fits(monkeypatch)
    events = FIT[name]
    deltas = sum(b'"response.output_text.delta"' in e for e in events)
    translate(grouped(events, 50))
    # (Not all: the part's first delta opens the lane, the next go one by one and through the probes until the
    # template is learned, the windows where the numbers gain a digit or a run ends go to the probes.)
    assert fitted[0] >= deltas * 0.6


def test_a_varying_field_never_fits_and_bad_input_is_still_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    fitted = counting_fits(monkeypatch)
    translate(grouped(MISFIT["obfuscation on every event (OpenAI)"], 50))
    assert fitted[0] == 0
    _, translator = translate(grouped(MISFIT["a bad escape mid-run"], 2000))
    assert translator.failure is not None and "not a Responses event stream" in translator.failure.message


def test_a_duplicated_key_or_a_slot_out_of_place_keeps_no_template() -> None:
    data = b'{"type":"response.output_text.delta","sequence_number":7,"item_id":"m","output_index":0,' \
           b'"content_index":0,"delta":"hi"}'
    template = learn_delta_template((), data, decode_delta_probe(data))
    assert template is not None and template.numbered and template.digits_first
    duplicated = data[:-1] + b',"delta":"later"}'
    assert learn_delta_template((), duplicated, decode_delta_probe(duplicated)) is None
    renumbered = data[:-1] + b',"sequence_number":8}'
    assert learn_delta_template((), renumbered, decode_delta_probe(renumbered)) is None
    # The delta's text also appears earlier (as the item id): the slot found first is not the delta's.
    early = data.replace(b'"item_id":"m"', b'"item_id":"hi"')
    assert learn_delta_template((), early, decode_delta_probe(early)) is not None  # ("delta" key, not the value)
    multiline = data.replace(b",", b",\n", 1)
    assert learn_delta_template((), multiline, decode_delta_probe(multiline)) is None


def test_fit_refuses_what_is_not_the_template() -> None:
    head = b"data: "
    data = b'{"type":"response.output_text.delta","sequence_number":%d,"item_id":"m","output_index":0,' \
           b'"content_index":0,"delta":%s}'
    template = learn_delta_template((), data % (5, b'"a"'), decode_delta_probe(data % (5, b'"a"')))
    assert template is not None

    def run(*events: tuple[int, bytes]) -> list[str] | None:
        parts = [data % event for event in events]
        raw = b"".join(head + part + b"\n\n" for part in parts)
        return template.fit(raw, 0, head, parts, events[0][0])

    assert run((6, b'"x"'), (7, b'"y \\" z"')) == ["x", 'y " z']
    assert run((6, b'"x"'), (8, b'"y"')) is None  # (a number out of turn)
    assert run((6, b'"x"'), (7, b'"y","z"')) is None  # (two strings in one slot)
    assert run((6, b'"x'), (7, b'y"')) is None  # (a string split over two slots)
    assert run((6, b'"x"'), (7, b'7')) is None  # (not a string)
    assert run((6, b'"\\q"'),) is None  # (a bad escape)
