"""Conformance rules: events in sequence order -> :class:`Violation` (DESIGN §3 codes; spec §4 grammar).

API (incremental; the server's writer checks each event *before* it encodes it)::

    checker = RuleChecker()                  # owns an Assembler for the text/output comparisons
    for event in events:                     # in sequence order (after the Sequencer)
        problems = checker.check(event)      # tuple of Violations found at this event (usually empty)
    problems = checker.finish()              # EOF: lifecycle.no_terminal
    checker.violations                       # everything found so far

``RuleChecker(assembler=shared)`` reuses an :class:`Assembler` the caller feeds itself (``StreamCore`` does: call
``check(event)`` first, then ``assembler.feed(event)``); without one, ``check`` feeds its own. ``expect_created=False``
for resumed streams (``starting_after = N``): no ``response.created`` is replayed, and nothing that depends on events
at or before N is judged. An item whose ``output_item.added`` was not seen may have been added before the cursor, so
its ``done`` or deltas are not ``item.*_before/without_added``; a ``*.done`` is compared with its deltas only when the
part's (or its item's) opening event was seen; ``completed.output_mismatch`` compares only the output items whose
whole life was seen, by ``output_index`` (and ``output_text`` only when that covers every item).
``dialect="platform"`` accepts the seed's deltas without ``item_id`` when the indices are there. ``check`` never
raises on stream content. ``keep=False`` stops ``violations`` from growing (the caller keeps what ``check`` returns).

The tables below are the rules: which fields each event must carry, and what each event does to the life of an
item or a part (``None`` -> open -> done). Reports are bounded: ``delta_before_added`` and ``index_mismatch`` once per
item/part, ``envelope.missing_field`` once per field name, ``sequence.*`` come from the Sequencer.

Why one module of ~530 lines: the rules are data in one place (STYLE §4), the tables and the checker reading them.
"""

from __future__ import annotations

from typing import Any, Final

from respstream.protocol import events as ev
from respstream.protocol.annotation_check import annotation_problems, part_annotation_problems
from respstream.protocol.assembler import Assembler
from respstream.protocol.output_check import output_problems
from respstream.protocol.sequencer import Violation

__all__ = ["ITEM_ROLES", "REQUIRED_FIELDS", "TERMINAL_TYPES", "RuleChecker", "Violation", "event_name_violation"]

TERMINAL_TYPES: Final = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})

_ID, _OI, _CI, _DELTA = "item_id", "output_index", "content_index", "delta"
_ITEM = (_ID, _OI)
_PART = (_ID, _OI, _CI)

# Event-level fields that locate or carry content (DESIGN §3 envelope.missing_field; spec §2 tables).
REQUIRED_FIELDS: Final[dict[type[ev.Event], tuple[str, ...]]] = {
    ev.ResponseCreated: ("response",),
    ev.ResponseQueued: ("response",),
    ev.ResponseInProgress: ("response",),
    ev.ResponseCompleted: ("response",),
    ev.ResponseIncomplete: ("response",),
    ev.ResponseFailed: ("response",),
    ev.OutputItemAdded: (_OI, "item"),  # spec §2.3
    ev.OutputItemDone: (_OI, "item"),
    ev.ContentPartAdded: (*_PART, "part"),
    ev.ContentPartDone: (*_PART, "part"),
    ev.OutputTextDelta: (*_PART, _DELTA),  # spec §2.4
    ev.OutputTextDone: _PART,
    ev.OutputTextAnnotationAdded: _PART,
    ev.RefusalDelta: (*_PART, _DELTA),
    ev.RefusalDone: _PART,
    ev.FunctionCallArgumentsDelta: (*_ITEM, _DELTA),  # spec §2.5
    ev.FunctionCallArgumentsDone: _ITEM,
    ev.CustomToolCallInputDelta: (*_ITEM, _DELTA),
    ev.CustomToolCallInputDone: _ITEM,
    ev.ReasoningSummaryPartAdded: (*_ITEM, "part"),  # spec §2.6
    ev.ReasoningSummaryPartDone: (*_ITEM, "part"),
    ev.ReasoningSummaryTextDelta: (*_ITEM, _DELTA),
    ev.ReasoningSummaryTextDone: _ITEM,
    ev.ReasoningTextDelta: (*_PART, _DELTA),
    ev.ReasoningTextDone: _PART,
    ev.CodeInterpreterCallCodeDelta: (*_ITEM, _DELTA),  # spec §2.7
    ev.McpCallArgumentsDelta: (*_ITEM, _DELTA),
    ev.ShellCallCommandAdded: (_OI,),  # shell command events carry no item_id
    ev.ShellCallCommandDelta: (_OI, _DELTA),
    ev.ShellCallCommandDone: (_OI,),
    ev.ShellCallOutputContentDelta: (*_ITEM, _DELTA),
    ev.AudioDelta: (_DELTA,),  # spec §2.8
    ev.AudioTranscriptDelta: (_DELTA,),
}
_cls: type[ev.Event]
for _cls in (
    ev.WebSearchCallInProgress, ev.WebSearchCallSearching, ev.WebSearchCallCompleted, ev.FileSearchCallInProgress,
    ev.FileSearchCallSearching, ev.FileSearchCallCompleted, ev.CodeInterpreterCallInProgress,
    ev.CodeInterpreterCallCodeDone, ev.CodeInterpreterCallInterpreting, ev.CodeInterpreterCallCompleted,
    ev.ImageGenerationCallInProgress, ev.ImageGenerationCallGenerating, ev.ImageGenerationCallPartialImage,
    ev.ImageGenerationCallCompleted, ev.McpListToolsInProgress, ev.McpListToolsCompleted, ev.McpListToolsFailed,
    ev.McpCallInProgress, ev.McpCallArgumentsDone, ev.McpCallCompleted, ev.McpCallFailed,
    ev.ShellCallOutputContentDone, ev.CompactionCompacting,
):  # fmt: skip
    REQUIRED_FIELDS.setdefault(_cls, _ITEM)

# What an event does to the life of its item or part (spec §4: item := added body done; DESIGN §3 item.*):
#   "item.added"  opens an item          "item.done"  closes it
#   "item"        an event inside an open item (args, hosted-tool status, code...)
#   "part.added"  opens a content part (and, the seed's way, a message that was never added)
#   "part"        a delta inside an open part       "part.done"  closes the part's text (a later delta is late)
#   "part.close"  content_part.done: closes the part for good
#   "summary.added" / "summary" / "summary.done"   the same for reasoning summary parts
ITEM_ROLES: Final[dict[type[ev.Event], str]] = {
    ev.OutputItemAdded: "item.added",
    ev.OutputItemDone: "item.done",
    ev.ContentPartAdded: "part.added",
    ev.ContentPartDone: "part.close",
    ev.OutputTextDelta: "part",
    ev.OutputTextAnnotationAdded: "part",
    ev.OutputTextDone: "part.done",
    ev.RefusalDelta: "part",
    ev.RefusalDone: "part.done",
    ev.ReasoningTextDelta: "part",
    ev.ReasoningTextDone: "part.done",
    ev.ReasoningSummaryPartAdded: "summary.added",
    ev.ReasoningSummaryTextDelta: "summary",
    ev.ReasoningSummaryTextDone: "summary.done",
    ev.ReasoningSummaryPartDone: "summary.close",
}
for _cls in REQUIRED_FIELDS:
    if _cls not in ITEM_ROLES and (_ID in REQUIRED_FIELDS[_cls] or REQUIRED_FIELDS[_cls][0] == _OI):
        ITEM_ROLES[_cls] = "item"

# *.done events whose value must equal their deltas joined (DESIGN §3 text.done_mismatch): event -> value field.
DONE_VALUES: Final[dict[type[ev.Event], str]] = {
    ev.OutputTextDone: "text",
    ev.RefusalDone: "refusal",
    ev.FunctionCallArgumentsDone: "arguments",
}

# Events that carry (or settle) a text part's annotations (text.annotation_out_of_range); terminals too.
_ANNOTATED: Final = frozenset({ev.OutputTextDone, ev.ContentPartDone, ev.OutputItemDone})

# Other dialects' names for the same events (Open Responses' `response.reasoning.*`, `respstream:` extensions).
for _table in (REQUIRED_FIELDS, ITEM_ROLES, DONE_VALUES):
    _table.update(ev.with_aliases(_table))  # type: ignore[attr-defined]

# What _check does with each event class, in one lookup: (required fields, item role, done-value field, whether it
# carries annotations). Filled from the tables above on first sight of a class (_plan).
_Plan = tuple[tuple[str, ...] | None, str | None, str | None, bool]
_PLANS: dict[type[ev.Event], _Plan] = {}


def _plan(cls: type[ev.Event]) -> _Plan:
    tag = cls.__struct_config__.tag
    plan = _PLANS[cls] = (REQUIRED_FIELDS.get(cls), ITEM_ROLES.get(cls), DONE_VALUES.get(cls),
                          cls in _ANNOTATED or (tag in TERMINAL_TYPES and tag != "error"))
    return plan


# Item / part states.
# _IMPLICIT: a message opened by content_part.added alone (the seed's flow); _RESUMED: first seen in a resumed
# stream, so it was opened before the point we resumed from (its deltas before that point are not ours to check).
_OPEN, _IMPLICIT, _DONE, _RESUMED = 1, 2, 3, 4
_PART_OPEN, _TEXT_DONE, _PART_DONE = 1, 2, 3


def event_name_violation(
    name: str, event: ev.Event, dialect: str | None, *, unnamed: bool = False
) -> Violation | None:
    """The SSE ``event:`` name against the dialect: ``platform`` sends ``message``, ``openai`` and ``openresponses``
    the JSON ``type``. Only checked when a dialect is chosen. ``unnamed``: the stream had no ``event:`` line at all
    (``name`` is then the WHATWG default ``message``), which the message says as such."""
    if dialect in ("openai", "openresponses") and event.type and name != event.type:
        expected = event.type
    elif dialect == "platform" and name != "message":
        expected = "message"
    else:
        return None
    if unnamed:
        what = "the stream has no SSE `event:` line (data-only framing)"
        expected_line = f"`event: {expected}`"
        return Violation(
            "envelope.event_name_mismatch",
            event.sequence_number,
            f"{what} where the {dialect} dialect sends {expected_line}",
        )
    return Violation(
        "envelope.event_name_mismatch",
        event.sequence_number,
        f"SSE event name {name!r} where the {dialect} dialect sends {expected!r}",
    )


class RuleChecker:
    """Checks events one at a time against the rules; see the module docstring for the API."""

    def __init__(
        self,
        assembler: Assembler | None = None,
        *,
        expect_created: bool = True,
        dialect: str | None = None,
        keep: bool = True,
    ) -> None:
        self._keep = keep  # False: do not accumulate `violations` (the caller keeps what check() returns)
        self._own = assembler is None
        self.assembler = Assembler() if assembler is None else assembler
        self.expect_created = expect_created
        self.dialect = dialect
        self.violations: list[Violation] = []
        self.terminal: str | None = None
        self._seen_any = False
        self._rewrite = False
        self._last_error = False  # the previous event was a terminal `error` (a response.failed may follow)
        self._reported_fields: set[str] = set()
        self._items: dict[int, int] = {}
        self._ids: dict[int, str] = {}
        self._parts: dict[tuple[int, Any], int] = {}
        # Resumed streams only: items whose output_item.added was seen, and parts whose opening event was seen
        # (their whole life is after the cursor, so their deltas are all ours to compare).
        self._whole_items: set[int] = set()
        self._whole_parts: set[tuple[int, Any]] = set()
        self._once: set[tuple[Any, ...]] = set()
        # Fast path: the last text delta that was clean; an identical target needs no checks.
        self._ok: tuple[str | None, int | None, int | None] | None = None

    # --- public -------------------------------------------------------------------------------------------------

    def check(self, event: ev.Event) -> tuple[Violation, ...]:
        """Violations found at this event (in sequence order). Feeds the own assembler, if any, afterwards."""
        if (
            event.__class__ is ev.OutputTextDelta
            and self._ok is not None
            and event.delta is not None  # type: ignore[attr-defined]
            and self._ok == (event.item_id, event.output_index, event.content_index)  # type: ignore[attr-defined]
        ):
            if self._own:
                self.assembler.feed(event)
            return ()
        self._ok = None
        found: list[Violation] = []
        self._check(event, found)
        if self._own:
            self.assembler.feed(event)
        if found:
            if self._keep:
                self.violations.extend(found)
            return tuple(found)
        if event.__class__ is ev.OutputTextDelta:
            self._ok = (event.item_id, event.output_index, event.content_index)  # type: ignore[attr-defined]
        return ()

    def check_text_delta(
        self, sequence_number: int, item_id: str | None, output_index: int, content_index: int, delta: str
    ) -> bool:
        """The hot path of :meth:`check` for ``response.output_text.delta`` without building the event: True when
        this delta targets the same part as the previous event, a clean text delta (nothing to report), and the
        checker's state (and its own assembler's) were updated exactly as ``check`` would. False: nothing was done;
        call ``check`` with the event. A checker that shares an assembler leaves feeding it to the caller."""
        ok = self._ok  # compared field by field: no tuple per delta
        if ok is None or ok[0] != item_id or ok[1] != output_index or ok[2] != content_index:
            return False
        return not self._own or self.assembler.feed_text_delta(sequence_number, output_index, content_index, delta)

    def check_text_deltas(
        self, first_sequence_number: int, item_id: str | None, output_index: int, content_index: int,
        deltas: list[str],
    ) -> bool:
        """:meth:`check_text_delta` for a run of deltas numbered from ``first_sequence_number`` (one apart), in one
        step: True when all were such clean deltas and the state was updated as ``check`` of each would; False:
        nothing was done."""
        ok = self._ok
        if ok is None or ok[0] != item_id or ok[1] != output_index or ok[2] != content_index:
            return False
        return not self._own or self.assembler.feed_text_deltas(first_sequence_number, output_index, content_index,
                                                                deltas)

    def finish(self) -> tuple[Violation, ...]:
        """EOF: the stream must have had a terminal event."""
        if self.terminal is not None:
            return ()
        v = Violation(
            "lifecycle.no_terminal",
            self.assembler.last_sequence_number,
            "the stream ended without response.completed, response.incomplete, response.failed or error",
        )
        if self._keep:
            self.violations.append(v)
        return (v,)

    # --- the checks ---------------------------------------------------------------------------------------------

    def _check(self, event: ev.Event, out: list[Violation]) -> None:
        cls = event.__class__
        seq = event.sequence_number
        etype = event.type
        if cls is ev.UnknownEvent:
            if not etype:
                out.append(Violation("envelope.missing_type", seq, "an event has no string `type`"))
            self._lifecycle(event, etype, seq, out)
            return
        plan = _PLANS.get(cls)
        required, role, value_field, annotated = _plan(cls) if plan is None else plan
        if required is not None:
            self._fields(event, required, seq, out)
        self._lifecycle(event, etype, seq, out)
        if role is not None:
            self._item_rule(event, role, seq, out)
        if value_field is not None and not self._rewrite:
            self._done_value(event, value_field, seq, out)
        if annotated:
            self._annotations(event, seq, out)

    def _fields(self, event: ev.Event, required: tuple[str, ...], seq: int | None, out: list[Violation]) -> None:
        for name in required:
            if getattr(event, name) is not None or name in self._reported_fields:
                continue
            if (
                name == _ID
                and self.dialect == "platform"
                and getattr(event, _OI, None) is not None
                and getattr(event, _CI, 0) is not None
            ):
                continue  # the seed platform documents deltas located by indices alone
            self._reported_fields.add(name)
            how = "has the wrong JSON type" if name in event.invalid_fields else "is missing"
            out.append(Violation("envelope.missing_field", seq, f"`{name}` {how} on {event.type}"))

    def _lifecycle(self, event: ev.Event, etype: str, seq: int | None, out: list[Violation]) -> None:
        first = not self._seen_any
        self._seen_any = True
        if etype == "response.created":
            if not first:
                out.append(Violation("lifecycle.created_not_first", seq, "response.created is not the first event"))
        elif first and self.expect_created:
            out.append(
                Violation("lifecycle.created_not_first", seq, f"the first event is {etype or 'typeless'}, not "
                          "response.created")
            )
        if isinstance(event, ev.RewriteInProgress):  # also its `respstream:` name
            self._rewrite = True
        is_terminal = etype in TERMINAL_TYPES
        if self.terminal is not None:
            if etype in ev.AFTER_TERMINAL_TYPES:
                return  # a response-level notice OpenAI sends after the terminal (rate limits, pending steer)
            if self._last_error and etype == "response.failed":
                self._last_error = False  # `error` + `response.failed`: one terminal
                return
            self._last_error = False
            out.append(Violation("lifecycle.terminal_not_last", seq, f"{etype or 'an event'} after the terminal "
                                 f"{self.terminal}"))
            if is_terminal:
                out.append(Violation("lifecycle.multiple_terminal", seq, f"a second terminal event ({etype}) after "
                                     f"{self.terminal}"))
            return
        if not is_terminal:
            return
        self.terminal = etype
        self._last_error = etype == "error"
        if etype == "response.completed":
            self._not_done(seq, out)
        if etype != "error":
            self._output_matches(event, seq, out)

    def _not_done(self, seq: int | None, out: list[Violation]) -> None:
        # DESIGN §3: only a completed response must have closed every item; the seed's implicitly opened
        # messages have no output_item.done, so their parts must be done instead. An item first seen mid-life in a
        # resumed stream may be such a message: with parts, those must be done; without, the item must be.
        for oi, state in sorted(self._items.items()):
            if state == _OPEN:
                still_open = True
            elif state in (_IMPLICIT, _RESUMED):
                parts = [s for (o, _), s in self._parts.items() if o == oi]
                still_open = _PART_OPEN in parts or (state == _RESUMED and not parts)
            else:
                continue
            if still_open:
                out.append(Violation("item.not_done", seq, f"output item {oi} is still open at response.completed"))

    def _output_matches(self, event: ev.Event, seq: int | None, out: list[Violation]) -> None:
        response = getattr(event, "response", None)
        if not isinstance(response, dict):
            return
        whole = None if self.expect_created else self._whole_items
        problems = output_problems(response, self.assembler, whole)
        if problems:
            out.append(Violation("completed.output_mismatch", seq, f"{event.type}: " + "; ".join(problems[:5])))

    def _locate(self, event: Any, role: str = "") -> int | None:
        if role in ("item.added", "item.done"):
            item = event.item if isinstance(event.item, dict) else {}
            iid = item.get("id")
            oi: int | None = self.assembler.resolve_index(event.output_index, iid if isinstance(iid, str) else "")
            if oi is None and role == "item.added":
                oi = self.assembler.next_index()
            return oi
        return self.assembler.resolve_index(event.output_index, getattr(event, "item_id", None))

    def _item_rule(self, event: Any, role: str, seq: int | None, out: list[Violation]) -> None:
        oi = self._locate(event, role)
        if role == "item.added":
            item = event.item if isinstance(event.item, dict) else {}
            iid = item.get("id")
            assert oi is not None
            if oi in self._items or (isinstance(iid, str) and iid in self._ids.values()):
                out.append(Violation("item.duplicate_added", seq, f"output item {oi} was already added"))
            self._items[oi] = _OPEN
            self._whole_items.add(oi)
            if isinstance(iid, str):
                self._ids[oi] = iid
            return
        if oi is None:
            return  # nothing to locate it by; envelope.missing_field said so
        item_id = getattr(event, "item_id", None)
        if role == "item.done":
            item = event.item if isinstance(event.item, dict) else {}
            item_id = item.get("id") if isinstance(item.get("id"), str) else None
        self._index_rule(oi, item_id, seq, out)
        state = self._items.get(oi)
        if role == "item.done":
            if state is None and self.expect_created:
                out.append(Violation("item.done_without_added", seq, f"output item {oi} is done but was never added"))
            elif state == _DONE:
                out.append(Violation("item.delta_after_done", seq, f"output item {oi} is done a second time"))
            self._items[oi] = _DONE
            if item_id is not None:
                self._ids.setdefault(oi, item_id)
            return
        if state == _DONE:
            out.append(Violation("item.delta_after_done", seq, f"{event.type} for output item {oi} after its "
                                 "output_item.done"))
            return
        if role == "item":
            if state is None:
                self._before_added(oi, event, seq, out)
            return
        if role.startswith("summary"):
            key: tuple[int, Any] = (oi, ("summary", event.summary_index or 0))
            opening = role == "summary.added"
        else:
            key = (oi, event.content_index if event.content_index is not None else 0)
            opening = role == "part.added"
        part = self._parts.get(key)
        if opening:
            if state is None:
                if role == "part.added":
                    self._items[oi] = _IMPLICIT  # the seed's flow: a message opened by its first part
                else:
                    self._before_added(oi, event, seq, out)
            self._parts[key] = _PART_OPEN
            self._whole_parts.add(key)
            return
        if state is None and part is None:
            self._before_added(oi, event, seq, out)
            part = self._parts[key] = _PART_OPEN
        elif part is None:
            part = self._parts[key] = _PART_OPEN  # inside an added item: the part's own added is optional
        if part == _PART_DONE or (part == _TEXT_DONE and role in ("part", "part.done", "summary", "summary.done")):
            out.append(Violation("item.delta_after_done", seq, f"{event.type} for output item {oi} after that "
                                 "part's done"))
            return
        if role in ("part.done", "summary.done"):
            self._parts[key] = _TEXT_DONE
        elif role in ("part.close", "summary.close"):
            self._parts[key] = _PART_DONE

    def _before_added(self, oi: int, event: ev.Event, seq: int | None, out: list[Violation]) -> None:
        if not self.expect_created:
            self._items[oi] = _RESUMED
            return
        self._items[oi] = _OPEN  # report once per item, then treat it as open
        out.append(Violation("item.delta_before_added", seq, f"{event.type} for output item {oi} before its "
                             "output_item.added"))

    def _index_rule(self, oi: int, item_id: str | None, seq: int | None, out: list[Violation]) -> None:
        if item_id is None:
            return
        known = self._ids.get(oi)
        # Once per item, however many ids it goes through (some servers mint a new item_id on every event).
        if known is not None and known != item_id and ("index", oi) not in self._once:
            self._once.add(("index", oi))
            out.append(Violation("item.index_mismatch", seq, f"item_id {item_id!r} but output item {oi} is "
                                 f"{known!r}"))

    def _annotations(self, event: Any, seq: int | None, out: list[Violation]) -> None:
        """``text.annotation_out_of_range``: annotations (from ``annotation.added`` events, or inside a done part,
        item or terminal response) must lie within their part's text. Once per part."""
        # A part without annotations (None, [], absent) has nothing to judge: skipped before any work.
        found: list[tuple[int, int, list[str]]] = []
        cls = event.__class__
        if cls is ev.OutputTextDone:
            oi = self._locate(event)
            if oi is None or not isinstance(event.text, str):
                return
            ci = event.content_index if event.content_index is not None else 0
            annotations = self.assembler.part_annotations(oi, ci)
            if annotations:
                found.append((oi, ci, annotation_problems(event.text, annotations)))
        elif cls is ev.ContentPartDone:
            if not (isinstance(event.part, dict) and event.part.get("annotations")):
                return
            oi = self._locate(event)
            if oi is None:
                return
            ci = event.content_index if event.content_index is not None else 0
            found.append((oi, ci, part_annotation_problems(event.part)))
        else:
            if cls is ev.OutputItemDone:
                oi = self._locate(event, "item.done")
                items: Any = ((oi, event.item),) if oi is not None else ()
            else:
                response = getattr(event, "response", None)
                output = response.get("output") if isinstance(response, dict) else None
                items = enumerate(output) if isinstance(output, list) else ()
            for oi, item in items:
                content = item.get("content") if isinstance(item, dict) else None
                if not isinstance(content, list):
                    continue
                for ci, part in enumerate(content):
                    if isinstance(part, dict) and part.get("annotations"):
                        found.append((oi, ci, part_annotation_problems(part)))
        for oi, ci, problems in found:
            if problems and ("annotation", oi, ci) not in self._once:
                self._once.add(("annotation", oi, ci))
                out.append(Violation("text.annotation_out_of_range", seq, f"{event.type}, output item {oi} part "
                                     f"{ci}: " + "; ".join(problems)))

    def _done_value(self, event: Any, value_field: str, seq: int | None, out: list[Violation]) -> None:
        value = getattr(event, value_field)
        if value is None:
            return
        oi = self._locate(event)
        if oi is None:
            return
        if value_field == "arguments":
            key: tuple[int, Any] = (oi, "arguments")
        else:
            key = (oi, event.content_index if event.content_index is not None else 0)
        if not self.expect_created and oi not in self._whole_items and key not in self._whole_parts:
            return  # began before the cursor: the deltas we saw are only its tail
        streamed = self.assembler.streamed_value(key)
        if streamed is not None and streamed != value:
            out.append(Violation("text.done_mismatch", seq, f"{event.type} {value_field} differs from its deltas "
                                 f"joined ({len(value)} vs {len(streamed)} characters)"))
