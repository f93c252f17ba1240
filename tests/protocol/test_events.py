"""The typed catalogue: every known type decodes to its class, unknown types never fail, bad fields are tolerated."""

from __future__ import annotations

import json

import msgspec
import pytest

from respstream.protocol import events as ev
from respstream.protocol.events import (
    ALL_EVENT_TYPES,
    EVENT_ALIASES,
    EVENT_CLASSES,
    ErrorEvent,
    EventDecodeError,
    OutputTextDelta,
    UnknownEvent,
    decode_event,
    encode_event,
)


def test_catalogue_has_the_58_openai_types_the_5_newer_ones_the_platform_two_and_their_other_names() -> None:
    # 58 (spec/openai-responses-events.md) + compaction.compacting, rate_limits.updated, steer.accepted|pending|failed
    # (tests/protocol/test_catalogue_sdk.py keeps this in step with the installed openai SDK) + the seed's two
    # + Open Responses' two reasoning names; the two `respstream:`-prefixed names of our own dialects are aliases.
    ours = [cls for cls in EVENT_CLASSES if not str(cls.__struct_config__.tag).startswith("respstream:")]
    assert len(ours) == 67
    assert len({t for t in ALL_EVENT_TYPES if not t.startswith("respstream:")}) == 67
    assert len(ALL_EVENT_TYPES) == 69
    assert {"response.routing.completed", "response.rewrite.in_progress"} <= ALL_EVENT_TYPES
    assert {"respstream:response.routing.completed", "respstream:response.rewrite.in_progress",
            "response.reasoning.delta", "response.reasoning.done"} <= ALL_EVENT_TYPES
    assert "keepalive" not in ALL_EVENT_TYPES


@pytest.mark.parametrize(("alias", "canonical"), list(EVENT_ALIASES.items()),
                         ids=lambda c: str(c.__struct_config__.tag))
def test_every_alias_decodes_to_a_subclass_of_the_event_it_renames(alias: type, canonical: type) -> None:
    name = str(alias.__struct_config__.tag)
    event = decode_event(b'{"type":"%b","sequence_number":3}' % name.encode())
    assert type(event) is alias and isinstance(event, canonical)
    assert event.type == name and encode_event(event).startswith(b'{"type":"%b"' % name.encode())


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda cls: str(cls.__struct_config__.tag))
def test_each_type_decodes_from_a_bare_envelope_to_its_class(cls: type[ev.Event]) -> None:
    tag = str(cls.__struct_config__.tag)
    event = decode_event(json.dumps({"type": tag, "sequence_number": 7, "future_field": [1, 2]}).encode())
    assert type(event) is cls
    assert event.type == tag
    assert event.sequence_number == 7
    assert event.invalid_fields == ()
    assert json.loads(encode_event(event)) == {"type": tag, "sequence_number": 7}


@pytest.mark.parametrize(
    ("payload", "event_type"),
    [
        (b'{"type":"keepalive","sequence_number":466}', "keepalive"),
        (b'{"type":"response.future_thing.started","sequence_number":3}', "response.future_thing.started"),
        (b'{"type":"response.done","response":{}}', "response.done"),
        (b'{"sequence_number":1}', ""),
        (b'{"type":42}', ""),
    ],
    ids=["keepalive", "future-event", "codex-done", "no-type", "non-string-type"],
)
def test_unknown_or_missing_types_become_unknown_event(payload: bytes, event_type: str) -> None:
    event = decode_event(payload)
    assert isinstance(event, UnknownEvent)
    assert event.type == event_type
    assert event.raw == json.loads(payload)
    assert encode_event(event) == msgspec.json.encode(json.loads(payload))


def test_unknown_event_keeps_a_valid_sequence_number_only() -> None:
    assert decode_event(b'{"type":"keepalive","sequence_number":5}').sequence_number == 5
    assert decode_event(b'{"type":"keepalive","sequence_number":"5"}').sequence_number is None
    assert decode_event(b'{"type":"keepalive","sequence_number":true}').sequence_number is None


def test_both_error_shapes_decode_to_one_error_event() -> None:
    flat = decode_event(b'{"type":"error","code":"internal_error","message":"Unexpected upstream failure"}')
    nested = decode_event(
        b'{"type":"error","sequence_number":2,"error":{"type":"insufficient_quota","code":"insufficient_quota",'
        b'"message":"You exceeded your current quota","param":null}}'
    )
    inner_type_only = decode_event(b'{"type":"error","error":{"type":"server_error"}}')
    assert isinstance(flat, ErrorEvent) and isinstance(nested, ErrorEvent)
    assert (flat.error_code, flat.error_message) == ("internal_error", "Unexpected upstream failure")
    assert (nested.error_code, nested.error_message) == ("insufficient_quota", "You exceeded your current quota")
    assert isinstance(inner_type_only, ErrorEvent)
    assert (inner_type_only.error_code, inner_type_only.error_message) == ("server_error", None)
    bare = decode_event(b'{"type":"error"}')
    assert isinstance(bare, ErrorEvent)
    assert (bare.error_code, bare.error_message) == (None, None)


def test_wrong_field_types_are_dropped_and_named() -> None:
    event = decode_event(
        b'{"type":"response.output_text.delta","sequence_number":3,"delta":5,"output_index":"0","item_id":"m"}'
    )
    assert isinstance(event, OutputTextDelta)
    assert event.sequence_number == 3
    assert event.item_id == "m"
    assert event.delta is None and event.output_index is None
    assert set(event.invalid_fields) == {"delta", "output_index"}


def test_a_wrong_sequence_number_type_is_named_too() -> None:
    event = decode_event(b'{"type":"response.output_text.delta","sequence_number":"3","delta":"x"}')
    assert isinstance(event, OutputTextDelta)
    assert event.sequence_number is None
    assert event.delta == "x"
    assert event.invalid_fields == ("sequence_number",)


def test_an_invalid_fields_key_on_the_wire_is_not_trusted() -> None:
    event = decode_event(b'{"type":"response.output_text.delta","delta":7,"invalid_fields":["spoof"]}')
    assert event.invalid_fields == ("delta",)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"[DONE]", "not valid JSON"),
        (b"{bad", "not valid JSON"),
        (b"", "not valid JSON"),
        (b'{"type":', "not valid JSON"),
        (b"[1, 2]", "JSON array, not an object"),
        (b'"text"', "JSON string, not an object"),
        (b"42", "JSON number, not an object"),
        (b"true", "JSON boolean, not an object"),
        (b"null", "JSON null, not an object"),
    ],
)
def test_non_objects_raise_event_decode_error(payload: bytes, message: str) -> None:
    with pytest.raises(EventDecodeError, match=message):
        decode_event(payload)


def test_str_payloads_decode_like_bytes() -> None:
    assert decode_event('{"type":"response.output_text.delta","delta":"é"}') == decode_event(
        '{"type":"response.output_text.delta","delta":"é"}'.encode()
    )


def test_encode_puts_type_first_and_omits_defaults() -> None:
    encoded = encode_event(OutputTextDelta(sequence_number=4, item_id="msg_1", output_index=0, delta="Hi"))
    assert encoded.startswith(b'{"type":"response.output_text.delta"')
    assert json.loads(encoded) == {
        "type": "response.output_text.delta",
        "sequence_number": 4,
        "item_id": "msg_1",
        "output_index": 0,
        "delta": "Hi",
    }


def test_unknown_type_followed_by_malformed_json_is_a_decode_error() -> None:
    # The tagged decoder stops at the unknown tag; the malformed rest is found by the generic decoder.
    with pytest.raises(EventDecodeError, match="not valid JSON"):
        decode_event(b'{"type":"keepalive","sequence_number":}')


def test_when_the_bad_field_cannot_be_named_only_the_sequence_number_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ev, "_offending_field", lambda message, fields: None)
    event = decode_event(b'{"type":"response.output_text.delta","sequence_number":9,"delta":1,"item_id":"m"}')
    assert isinstance(event, OutputTextDelta)
    assert (event.sequence_number, event.delta, event.item_id) == (9, None, None)
    assert set(event.invalid_fields) == {"delta", "item_id"}


def test_offending_field_reads_msgspec_paths() -> None:
    fields = {"delta": 1, "logprobs": "x"}
    assert ev._offending_field("Expected `str | null`, got `int` - at `$.delta`", fields) == "delta"
    assert ev._offending_field("Expected `array`, got `str` - at `$.logprobs[0]`", fields) == "logprobs"
    assert ev._offending_field("Expected `str`, got `int` - at `$.other`", fields) is None
    assert ev._offending_field("no path in this message", fields) is None


def test_every_event_class_type_is_its_tag_and_unknown_events_keep_their_own() -> None:
    """``type`` is a plain class attribute of each event class (not the base's property, which builds a StructConfig
    on every read); it must say what the tag says, for aliases too, and leave UnknownEvent's own ``type`` alone."""
    for cls in ev.EVENT_CLASSES:
        tag = str(cls.__struct_config__.tag)
        assert cls.type == tag
        event = ev.decode_event(msgspec.json.encode({"type": tag, "sequence_number": 3}))
        assert event.__class__ is cls and event.type == tag
    unknown = ev.decode_event(b'{"type":"response.something_new","sequence_number":1}')
    assert isinstance(unknown, ev.UnknownEvent) and unknown.type == "response.something_new"
    assert ev.decode_event(b'{"sequence_number":1}').type == ""
