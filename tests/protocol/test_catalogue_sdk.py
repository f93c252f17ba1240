"""Our event catalogue against the installed official openai SDK: a type OpenAI adds upstream must fail here.

The SDK's ``ResponseStreamEvent`` union (SSE) and ``ResponsesServerEvent`` union (WebSocket, adds steering) are read
through ``typing``: each member's ``type`` field is a one-value ``Literal``. Every such value must be a typed class
of ours (not an ``UnknownEvent``), so a new upstream type shows up as this failing test instead of a silent gap.
"""

from __future__ import annotations

import typing

import pytest

from respstream.protocol import events as ev

responses_types = pytest.importorskip("openai.types.responses")


def _literal_types(union: object) -> set[str]:
    args = typing.get_args(union)
    if args and typing.get_origin(union) is typing.Annotated:
        args = typing.get_args(args[0])
    found: set[str] = set()
    for member in args:
        if typing.get_origin(member) is typing.Annotated:
            member = typing.get_args(member)[0]
        field = member.model_fields["type"]
        values = typing.get_args(field.annotation)
        assert len(values) == 1, f"{member.__name__}.type is not a one-value Literal: {field.annotation}"
        found.add(values[0])
    return found


SDK_STREAM_TYPES = _literal_types(responses_types.ResponseStreamEvent)
_server_union = getattr(responses_types, "ResponsesServerEvent", None)
SDK_SERVER_TYPES = _literal_types(_server_union) if _server_union is not None else set()


def test_the_sdk_unions_were_read() -> None:
    # A guard against this test reading nothing: the SDK has held more than 50 stream types since 2025.
    assert len(SDK_STREAM_TYPES) > 50
    assert "response.output_text.delta" in SDK_STREAM_TYPES


@pytest.mark.parametrize("event_type", sorted(SDK_STREAM_TYPES | SDK_SERVER_TYPES))
def test_every_sdk_event_type_is_in_our_catalogue(event_type: str) -> None:
    assert event_type in ev.ALL_EVENT_TYPES, (
        f"the installed openai SDK knows {event_type!r} but respstream.protocol.events does not type it: add a "
        "class (and its REQUIRED_FIELDS / ITEM_ROLES rows in rules.py)"
    )
    decoded = ev.decode_event(f'{{"type":"{event_type}","sequence_number":1}}'.encode())
    assert not isinstance(decoded, ev.UnknownEvent)


def test_our_extra_types_are_the_documented_ones() -> None:
    # What we type beyond the SDK: the seed platform's two events and OpenAI's live `rate_limits.updated`
    # (sent after response.completed, not yet in the SDK). Anything else here would be a name we made up.
    # Extension events of our own carry the `respstream:` prefix (the openresponses dialect's rule).
    extra = {t for t in ev.ALL_EVENT_TYPES - SDK_STREAM_TYPES - SDK_SERVER_TYPES if not t.startswith("respstream:")}
    allowed = {
        "response.routing.completed",
        "response.rewrite.in_progress",
        "response.rate_limits.updated",
        # in ResponsesServerEvent only when the SDK has that union
        "response.steer.accepted",
        "response.steer.pending",
        "response.steer.failed",
        # the Open Responses spec's names for raw reasoning text (OpenAI says response.reasoning_text.*)
        "response.reasoning.delta",
        "response.reasoning.done",
    }
    assert extra <= allowed, sorted(extra - allowed)
