"""The Open Responses wire rules (spec 2026-04-24) that go beyond the event grammar of ``rules.py``.

How this works: :class:`SpecWireChecker` sees every SSE message of one stream (the raw message and its decoded
event) when a checker is asked for the ``openresponses`` dialect, and reports :class:`Violation`\\ s with these
codes (each once per stream, except schema problems: once per event type and message):

- ``envelope.id_line``: an ``id:`` line (the spec: servers SHOULD NOT use ``id``);
- ``envelope.missing_done``: the stream ended without the literal ``data: [DONE]`` after its terminal;
- ``envelope.after_done``: an event after ``[DONE]``;
- ``extension.unprefixed``: an event or output item type that is neither the spec's nor prefixed with an
  implementor slug (``acme:...``), as the spec requires of extensions;
- ``schema.invalid_event``: an event (or the Response it carries) that does not validate against the spec's schema
  (:mod:`respstream.protocol.spec_schema`); prefixed extensions are not judged.

``event:`` == ``type`` is ``rules.event_name_violation``; sequence order is the sequencer's. The public compliance
suite checks none of these except the schemas.
"""

from __future__ import annotations

from typing import Any

import msgspec

from respstream.protocol.rules import Violation
from respstream.protocol.spec_schema import SPEC_EVENT_TYPES, SPEC_ITEM_TYPES, event_problems, is_extension

__all__ = ["SpecWireChecker"]

_decode = msgspec.json.Decoder().decode
_MAX_SCHEMA_REPORTS = 50  # one stream cannot flood the report with the same schema problem


class SpecWireChecker:
    def __init__(self) -> None:
        self.done_seen = False
        self._terminal_seen = False
        self._once: set[str] = set()
        self._schema_seen: set[tuple[str, str]] = set()

    def _report_once(self, code: str, seq: int | None, message: str) -> tuple[Violation, ...]:
        if code in self._once:
            return ()
        self._once.add(code)
        return (Violation(code, seq, message),)

    def _unprefixed(self, seq: int | None, what: str, kind: object) -> tuple[Violation, ...]:
        key = f"{what}:{kind}"
        if key in self._once:
            return ()
        self._once.add(key)
        return (Violation("extension.unprefixed", seq, f"{what} type {kind!r} is neither the spec's nor prefixed "
                          "with an implementor slug (e.g. `respstream:`)"),)

    def message(self, *, data: bytes, event_id: str, event_type: str, seq: int | None) -> tuple[Violation, ...]:
        """One decoded event's message: ``data`` its JSON, ``event_id`` the SSE last-event-id in force."""
        found: list[Violation] = []
        if event_id:
            found += self._report_once("envelope.id_line", seq, "the stream sends `id:` lines (Open Responses: "
                                       "servers SHOULD NOT use `id`)")
        if self.done_seen:
            found += self._report_once("envelope.after_done", seq, f"{event_type or 'an event'} after data: [DONE]")
        if event_type in ("response.completed", "response.failed", "response.incomplete"):
            self._terminal_seen = True
        if event_type not in SPEC_EVENT_TYPES and not is_extension(event_type):
            found += self._unprefixed(seq, "event", event_type)
            return tuple(found)
        try:
            obj: Any = _decode(data)
        except msgspec.DecodeError:
            return tuple(found)  # bad JSON is the stream core's to report
        item = obj.get("item") if isinstance(obj, dict) else None
        if isinstance(item, dict):
            kind = item.get("type")
            if kind not in SPEC_ITEM_TYPES and not is_extension(kind):
                found += self._unprefixed(seq, "output item", kind)
                return tuple(found)
        for problem in event_problems(obj):
            key = (event_type, problem)
            if key in self._schema_seen or len(self._schema_seen) >= _MAX_SCHEMA_REPORTS:
                continue
            self._schema_seen.add(key)
            found.append(Violation("schema.invalid_event", seq, f"{event_type}: {problem} (Open Responses schema)"))
        return tuple(found)

    def done(self, seq: int | None) -> None:
        """A ``data: [DONE]`` arrived (``seq``: the last sequence number seen)."""
        self.done_seen = True

    def finish(self, seq: int | None) -> tuple[Violation, ...]:
        """EOF: the sentinel must have come."""
        if self.done_seen:
            return ()
        return self._report_once("envelope.missing_done", seq, "the stream ended without `data: [DONE]` after its "
                                 "terminal event (Open Responses: the terminal event MUST be the literal [DONE])")
