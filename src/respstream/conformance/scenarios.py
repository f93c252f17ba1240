"""The live conformance scenarios: one function per scenario, each independent of the others.

Each function takes the :class:`~respstream.conformance.session.Session`, returns a one-line detail on success, and
raises :class:`Unsupported` (the server clearly does not offer the feature) or :class:`Failed` (it broke the contract).
Violations found by ``rules.py`` are collected on the session; the runner turns "ran, but violations" into the
``violations`` result. Prompts ask a real model for something it can do; a scripted backend ignores them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

import httpx

from respstream.conformance.outcome import Failed, Unsupported
from respstream.conformance.session import ErrorInfo, Session, StreamRun
from respstream.protocol.events import ErrorEvent, Event, ResponseEvent, encode_event
from respstream.protocol.rules import TERMINAL_TYPES

__all__ = [
    "SCENARIOS",
    "background_resume",
    "bad_request",
    "cancel",
    "function_tool_round_trip",
    "long_answer",
    "plain",
    "unknown_model",
]

SHORT_PROMPT: Final = "Say hello in one short sentence."
LONG_PROMPT: Final = (
    "Write a long, detailed essay about the history of the bicycle, from the first designs to modern racing bikes. "
    "Use at least five paragraphs."
)
TOOL_NAME: Final = "get_weather"
TOOL: Final[dict[str, Any]] = {
    "type": "function",
    "name": TOOL_NAME,
    "description": "Get the current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}},
        "required": ["city"],
    },
}
TOOL_OUTPUT: Final = json.dumps({"city": "Paris", "temperature_c": 21, "conditions": "sunny"})
UNKNOWN_MODEL: Final = "respstream-conformance-no-such-model"
MIN_LONG_DELTAS: Final = 8  # a "long answer" that arrives in fewer pieces is not being streamed incrementally
ENDED: Final = ("completed", "incomplete")  # a token-limit stop is a normal end for these prompts
# HTTP statuses a server uses to say "I don't do that" (plus 422 for strict validators).
REFUSAL_STATUSES: Final = frozenset({400, 404, 405, 422, 501})
RESUME_SEQUENCE_ONLY: Final = "sequence."  # a resumed tail starts mid-item: only its numbering is checked on its own


# --- helpers -------------------------------------------------------------------------------------------------------


def _finished(run: StreamRun, allowed: tuple[str, ...] = ENDED) -> None:
    """Raise ``Failed`` unless the stream ended with one of the ``allowed`` outcomes."""
    if run.status in allowed:
        return
    if run.status == "truncated":
        raise Failed(f"{run.label}: ended without a terminal event after {len(run.events)} events")
    error = run.summary.get("error") or {}
    why = f" ({error.get('code')}: {error.get('message')})" if isinstance(error, dict) and error else ""
    raise Failed(f"{run.label}: ended {run.status}{why}, expected {' or '.join(allowed)}")


def _refused(info: ErrorInfo, what: str, *words: str) -> Exception:
    """Classify a non-stream answer to a request for a feature: ``Unsupported`` if it reads like a refusal."""
    if info.status in REFUSAL_STATUSES and (info.status in (404, 501) or info.mentions("unsupported", *words)):
        return Unsupported(f"{what} not offered: {_said(info)}")
    return Failed(f"{what}: {_said(info)}")


def _said(info: ErrorInfo) -> str:
    """``HTTP 400 code: message`` without saying the same thing twice."""
    summary = info.summary()
    message = info.message[:120]
    return summary if not message or summary.endswith(message[:80]) else f"{summary}: {message}"


def _deltas(events: list[Event]) -> int:
    return sum(1 for event in events if event.type.endswith(".delta"))


def _response_id(events: list[Event]) -> str | None:
    for event in events:
        if isinstance(event, ResponseEvent) and event.response and isinstance(event.response.get("id"), str):
            return str(event.response["id"])
    return None


def _first_difference(got: list[bytes], want: list[bytes]) -> str:
    for index, (a, b) in enumerate(zip(got, want, strict=False)):
        if a != b:
            return f"event {index} differs: {a[:100]!r} vs {b[:100]!r}"
    return f"{len(got)} events vs {len(want)}"


def _text_chars(run: StreamRun) -> int:
    return len(str(run.summary.get("output_text") or ""))


def _start_stream(session: Session, body: dict[str, Any], label: str, what: str, *words: str) -> httpx.Response:
    """POST a streaming create; a refusal becomes ``Unsupported``/``Failed`` via :func:`_refused`."""
    response = session.open("POST", "/responses", body=body)
    if not session.is_stream(response):
        raise _refused(session.error_info(response), what, *words)
    return response


# --- scenarios -----------------------------------------------------------------------------------------------------


def plain(session: Session) -> str:
    """A short answer; the rules run over the whole stream."""
    body = session.request_body(input=SHORT_PROMPT, stream=True, max_output_tokens=64)
    response = session.open("POST", "/responses", body=body)
    run = session.collect(session.stream(response, "stream").finish())
    _finished(run)
    return f"{run.status}: {len(run.events)} events, {_text_chars(run)} chars of text"


def long_answer(session: Session) -> str:
    """A long answer: many text deltas, and the rules hold over all of them."""
    body = session.request_body(input=LONG_PROMPT, stream=True, max_output_tokens=160)
    response = session.open("POST", "/responses", body=body)
    run = session.collect(session.stream(response, "stream").finish())
    _finished(run)
    deltas = run.count("response.output_text.delta")
    if deltas < MIN_LONG_DELTAS:
        raise Failed(f"only {deltas} text deltas for a long answer: the answer is not streamed incrementally")
    return f"{run.status}: {deltas} text deltas, {_text_chars(run)} chars"


def function_tool_round_trip(session: Session) -> str:
    """A client function tool: a ``function_call`` item, then ``previous_response_id`` + ``function_call_output``."""
    body = session.request_body(
        input=f"What is the weather in Paris right now? Call the {TOOL_NAME} tool.",
        tools=[TOOL],
        tool_choice="required",
        stream=True,
        store=True,
        max_output_tokens=100,
    )
    response = _start_stream(session, body, "stream", "client function tools", "tool", "function")
    first = session.collect(session.stream(response, "first stream").finish())
    _finished(first)
    # Server-side tools may run first (the platform dialect shows them as function_call items carrying their
    # `output`); the client's call is the one left for us to run.
    calls = [c for c in first.summary.get("tool_calls") or [] if isinstance(c, dict) and c.get("output") is None]
    if not calls:
        raise Unsupported("client function tools not used: the answer came as text, with no function_call item")
    call = calls[0]
    if call.get("name") != TOOL_NAME:
        raise Failed(f"first stream: called {call.get('name')!r}, which is not a tool the request defined")
    call_id = call.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise Failed("first stream: the function_call item has no call_id")
    response_id = first.response_id
    if response_id is None:
        raise Failed("first stream: no response id, so previous_response_id cannot be sent")
    follow_up = session.request_body(
        previous_response_id=response_id,
        input=[{"type": "function_call_output", "call_id": call_id, "output": TOOL_OUTPUT}],
        tools=[TOOL],
        stream=True,
        store=True,
        max_output_tokens=100,
    )
    response = _start_stream(session, follow_up, "second stream", "previous_response_id", "previous_response")
    second = session.collect(session.stream(response, "second stream").finish())
    _finished(second)
    arguments = str(call.get("arguments") or "")[:40]
    return f"called {TOOL_NAME}({arguments}); follow-up {second.status} with {_text_chars(second)} chars"


def background_resume(session: Session) -> str:
    """Background + stream: drop the connection early, resume at several ``starting_after`` values, compare."""
    body = session.request_body(input=LONG_PROMPT, background=True, stream=True, store=True, max_output_tokens=120)
    head = session.stream(_start_stream(session, body, "stream", "background mode", "background"), "first stream")
    head.read_until(lambda events: _deltas(events) >= 3)
    head.drop()
    if not head.events:
        raise Failed("first stream: no events before the first deltas")
    response_id = _response_id(head.events)
    if response_id is None:
        raise Failed("first stream: response.created carried no response id")
    path = f"/responses/{response_id}"
    last = head.events[-1].sequence_number
    if any(event.sequence_number is None for event in head.events):
        probe = session.open("GET", path, params={"stream": "true"})
        if not session.is_stream(probe):
            raise _refused(session.error_info(probe), "background resume", "background", "stream")
        raise Failed("events carry no sequence_number, so starting_after cannot be used")
    assert last is not None  # narrowed by the check above
    # A short answer may have ended before the drop; then there is no tail to resume.
    tail = [] if head.events[-1].type in TERMINAL_TYPES else _resume(session, path, last, "resumed tail").encoded()
    full_response = session.open("GET", path, params={"stream": "true"})
    if not session.is_stream(full_response):
        raise Failed(f"full replay (GET {path}?stream=true): {session.error_info(full_response).summary()}")
    full = session.collect(session.stream(full_response, "full replay").finish())
    _finished(full)
    want = full.encoded()
    joined = [encode_event(event) for event in head.events] + tail
    if joined != want:
        raise Failed(f"first stream + tail after {last} != full replay: {_first_difference(joined, want)}")
    terminal = full.events[-1].sequence_number or 0
    points = sorted({0, terminal // 2, max(terminal - 1, 0)})
    for point in points:
        got = _resume(session, path, point, f"resume after {point}")
        expected = [encode_event(e) for e in full.events if (e.sequence_number or 0) > point]
        if got.encoded() != expected:
            difference = _first_difference(got.encoded(), expected)
            raise Failed(f"resume after {point} != full replay from {point + 1}: {difference}")
    for point in (terminal, terminal + 10):
        _resume_past_end(session, path, point)
    resumed = ", ".join(map(str, points))
    return f"{full.status}: {len(full.events)} events; resumed after {last} (drop), {resumed}; past end empty"


def _resume(session: Session, path: str, after: int, label: str) -> StreamRun:
    response = session.open("GET", path, params={"stream": "true", "starting_after": str(after)})
    if not session.is_stream(response):
        raise _refused(session.error_info(response), f"resume (starting_after={after})", "background", "stream")
    run = session.stream(response, label, starting_after=after).finish()
    session.collect(run, only_prefix=RESUME_SEQUENCE_ONLY)
    _finished(run, (*ENDED, "cancelled", "failed", "error"))
    return run


def _resume_past_end(session: Session, path: str, after: int) -> None:
    """At or past the terminal: ``204`` (so EventSource stops reconnecting) or a stream with no events."""
    response = session.open("GET", path, params={"stream": "true", "starting_after": str(after)})
    if response.status_code == 204:
        return
    if not session.is_stream(response):
        raise Failed(f"resume after the terminal ({after}): {session.error_info(response).summary()}, expected 204")
    try:
        body = response.read()
    except httpx.HTTPError as exc:
        raise Failed(f"resume after the terminal ({after}): {type(exc).__name__}") from exc
    if b"data:" in body:
        raise Failed(f"resume after the terminal ({after}) sent events again: {body[:100]!r}")


def cancel(session: Session) -> str:
    """Background + stream, cancel mid-way: the stream ends cancelled (per dialect) and GET shows it."""
    body = session.request_body(input=LONG_PROMPT, background=True, stream=True, store=True, max_output_tokens=300)
    reader = session.stream(_start_stream(session, body, "stream", "background mode", "background"), "stream")
    reader.read_until(lambda events: _deltas(events) >= 2)
    response_id = _response_id(reader.events)
    if response_id is None:
        raise Failed("stream: response.created carried no response id")
    answer = session.json("POST", f"/responses/{response_id}/cancel")
    if answer.status != 200:
        raise _refused(answer, "cancel", "background", "cancel")
    run = session.collect(reader.finish())
    if run.status != "cancelled":
        raise Failed(f"after a cancel mid-way the stream ended {run.status}, not cancelled")
    _check_cancel_shape(session.dialect, run.events[-1])
    state = session.json("GET", f"/responses/{response_id}")
    status = state.body.get("status") if state.is_json else None
    if state.status != 200 or status != "cancelled":
        raise Failed(f"GET /responses/{response_id} after cancel: {state.summary()} status={status!r}")
    return f"cancelled after {run.count('response.output_text.delta')} deltas; terminal {run.events[-1].type}"


def _check_cancel_shape(dialect: str | None, terminal: Event) -> None:
    # platform: `error` with code "cancelled"; openai, openresponses: `response.failed` whose response.status is
    # "cancelled".
    if dialect == "platform" and not (isinstance(terminal, ErrorEvent) and terminal.error_code == "cancelled"):
        raise Failed(f"platform dialect: a cancel should end with error/cancelled, got {terminal.type}")
    if dialect in ("openai", "openresponses") and terminal.type != "response.failed":
        raise Failed(f"{dialect} dialect: a cancel should end with response.failed (cancelled), got {terminal.type}")


def bad_request(session: Session) -> str:
    """Invalid input: a 4xx JSON error envelope, not a stream and not a 5xx."""
    body = session.request_body(input=42, stream=True)
    response = session.open("POST", "/responses", body=body)
    if session.is_stream(response):
        response.close()
        raise Failed("an invalid request (input: 42) was accepted and streamed")
    info = session.error_info(response)
    if info.status < 400:
        raise Failed(f"an invalid request (input: 42) was accepted: HTTP {info.status}")
    if info.status >= 500:
        raise Failed(f"an invalid request caused a server error: {info.summary()}")
    if not info.has_envelope:
        raise Failed(f"HTTP {info.status} without a JSON error envelope ({info.content_type or 'no content type'})")
    return _said(info)


def unknown_model(session: Session) -> str:
    """A pinned model that does not exist: 400/404 with ``model_not_found`` (or a code naming the model)."""
    body = {"model": UNKNOWN_MODEL, "input": SHORT_PROMPT, "stream": True, "max_output_tokens": 16}
    response = session.open("POST", "/responses", body=body)
    if response.status_code == 200:
        response.close()
        raise Unsupported(f"the server ignores the model name: it accepted {UNKNOWN_MODEL!r} and answered")
    info = session.error_info(response)
    if info.status not in (400, 404):
        raise Failed(f"unknown model: {info.summary()}, expected 400 or 404")
    if not (info.param == "model" or (info.code is not None and "model" in info.code.lower())):
        raise Failed(f"unknown model: {info.summary()}, expected a code such as model_not_found")
    return _said(info)


SCENARIOS: Final[dict[str, Callable[[Session], str]]] = {
    "plain": plain,
    "long_answer": long_answer,
    "function_tool_round_trip": function_tool_round_trip,
    "background_resume": background_resume,
    "cancel": cancel,
    "bad_request": bad_request,
    "unknown_model": unknown_model,
}
