"""HTTP plumbing for the live suite: one httpx client, per-scenario deadlines, and streams checked by ``StreamCore``.

How this works: scenarios call :meth:`Session.open` to start a request without reading its body, then either
:meth:`Session.error_info` (a non-stream answer) or :class:`StreamReader` (a stream: bytes go through
``protocol.stream.StreamCore``, which decodes, sequences, assembles and runs ``rules.py``). Every response a scenario
opened is closed when the scenario ends, so dropping a connection mid-stream is just "stop reading". Timeouts are
twofold: httpx's read timeout catches a server that goes silent, the scenario deadline catches one that trickles
keep-alives forever. Both end up as :class:`~respstream.conformance.outcome.Failed`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from respstream.conformance.outcome import Failed, TimedOut, violation_dict
from respstream.protocol.events import Event, encode_event
from respstream.protocol.spec_schema import response_problems
from respstream.protocol.stream import StreamCore

__all__ = ["ErrorInfo", "Session", "StreamReader", "StreamRun"]

USER_AGENT = "respstream-check/1"


@dataclass
class ErrorInfo:
    """A non-stream HTTP answer, with the error envelope's fields when there is one."""

    status: int
    content_type: str
    body: Any  # parsed JSON, or the text (at most 2 KiB) when it is not JSON
    code: str | None = None
    message: str = ""
    param: str | None = None

    @property
    def is_json(self) -> bool:
        return isinstance(self.body, dict)

    @property
    def has_envelope(self) -> bool:
        """``{"error": {...}}`` (OpenAI, platform) or ``{"detail": ...}`` (the platform's short form)."""
        return self.is_json and (isinstance(self.body.get("error"), dict) or "detail" in self.body)

    def mentions(self, *words: str) -> bool:
        text = f"{self.code or ''} {self.message} {self.param or ''}".lower()
        return any(word in text for word in words)

    def summary(self) -> str:
        # llama.cpp puts the HTTP status in `code`; then the message says more.
        code = self.code if self.code and self.code != str(self.status) else None
        what = code or (self.message[:80] if self.message else self.content_type or "no body")
        return f"HTTP {self.status} {what}"


@dataclass
class StreamRun:
    """One stream read to its end: events in dispatch order and the assembled summary (the replay JSON)."""

    label: str
    events: list[Event]
    summary: dict[str, Any]
    violations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return str(self.summary.get("status"))

    @property
    def response_id(self) -> str | None:
        rid = self.summary.get("response_id")
        return rid if isinstance(rid, str) else None

    @property
    def sequence_numbers(self) -> list[int | None]:
        return [event.sequence_number for event in self.events]

    def encoded(self) -> list[bytes]:
        return [encode_event(event) for event in self.events]

    def count(self, event_type: str) -> int:
        return sum(1 for event in self.events if event.type == event_type)


class StreamReader:
    """Reads one SSE response through a fresh ``StreamCore``; can stop part-way and carry on later."""

    def __init__(
        self, session: Session, response: httpx.Response, label: str, *, starting_after: int | None = None
    ) -> None:
        self._session = session
        self._response = response
        self.label = label
        self._core = StreamCore(starting_after=starting_after, dialect=session.dialect)
        self._chunks = response.iter_bytes()
        self.events: list[Event] = []
        self.ended = False

    def read_until(self, predicate: Callable[[list[Event]], bool]) -> bool:
        """Read until ``predicate(events so far)`` holds (True) or the stream ends (False). Raises ``Failed``."""
        if predicate(self.events):
            return True
        while not self.ended:
            self._pull()
            if predicate(self.events):
                return True
        return False

    def finish(self) -> StreamRun:
        """Read to EOF and run the rules over the whole stream. Raises ``Failed`` on a hang or a broken connection."""
        while not self.ended:
            self._pull()
        self._core.close()
        self.events.extend(self._core.events())
        summary = self._core.result.to_json()
        violations = [self._label_violation(v.to_json()) for v in self._core.violations]
        return StreamRun(self.label, self.events, summary, violations)

    def drop(self) -> None:
        """Close the connection now (a client going away)."""
        self._response.close()
        self.ended = True

    def _pull(self) -> None:
        self._session.check_deadline(f"{self.label}: the stream did not end")
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self.ended = True
            return
        except httpx.ReadTimeout as exc:
            raise TimedOut(f"{self.label}: no data for {self._session.read_timeout:g} s (the stream hangs)") from exc
        except httpx.HTTPError as exc:  # RemoteProtocolError, ReadError: the connection broke mid-stream
            self.ended = True
            self._session.note(f"{self.label}: connection broke mid-stream ({type(exc).__name__})")
            return
        self._core.feed(chunk)
        self.events.extend(self._core.events())

    def _label_violation(self, violation: dict[str, Any]) -> dict[str, Any]:
        return violation_dict(violation["code"], violation["sequence_number"], f"{self.label}: {violation['message']}")


class Session:
    """Everything scenarios share: the endpoint, credentials, model, timeouts and the open responses."""

    def __init__(
        self,
        endpoint: str,
        *,
        api_key: str | None = None,
        model: str | None = None,
        dialect: str | None = None,
        scenario_timeout: float = 60.0,
        read_timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.model = model
        self.dialect = dialect
        self.scenario_timeout = scenario_timeout
        self.read_timeout = read_timeout
        headers = {"User-Agent": USER_AGENT}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # No keep-alive pool: every request gets a fresh connection, so scenarios stay independent and a server that
        # closes idle connections (llama.cpp: after 5 s) never hands us a dead one.
        self.client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(read_timeout, connect=min(read_timeout, 10.0)),
            limits=httpx.Limits(max_keepalive_connections=0),
            transport=transport,
        )
        self._deadline = float("inf")
        self._open: list[httpx.Response] = []
        self.notes: list[str] = []
        self.violations: list[dict[str, Any]] = []

    # --- scenario lifecycle --------------------------------------------------------------------------------------

    def begin(self) -> None:
        self._deadline = time.monotonic() + self.scenario_timeout
        self.notes = []
        self.violations = []

    def end(self) -> None:
        for response in self._open:
            response.close()
        self._open = []

    def close(self) -> None:
        self.end()
        self.client.close()

    def check_deadline(self, what: str) -> None:
        if time.monotonic() > self._deadline:
            raise TimedOut(f"{what} within {self.scenario_timeout:g} s")

    def note(self, text: str) -> None:
        self.notes.append(text)

    def collect(self, run: StreamRun, *, only_prefix: str = "") -> StreamRun:
        """Add a finished stream's violations (those whose code starts with ``only_prefix``) to the scenario's."""
        self.violations.extend(v for v in run.violations if v["code"].startswith(only_prefix))
        return run

    # --- requests ------------------------------------------------------------------------------------------------

    def request_body(self, **fields: Any) -> dict[str, Any]:
        """A create request; ``model`` only when one was pinned with ``--model`` (gateways default to ``auto``)."""
        body: dict[str, Any] = {"model": self.model} if self.model else {}
        body.update(fields)
        return body

    def open(
        self, method: str, path: str, *, body: dict[str, Any] | None = None, params: dict[str, str] | None = None
    ) -> httpx.Response:
        """Send a request and return the response with its body unread. Raises ``Failed`` on a timeout."""
        self.check_deadline(f"{method} {path} did not start")
        headers = {"Accept": "text/event-stream" if (body or {}).get("stream") or params else "application/json"}
        request = self.client.build_request(method, self.endpoint + path, json=body, params=params, headers=headers)
        try:
            response = self.client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise TimedOut(f"{method} {path}: no answer within {self.read_timeout:g} s") from exc
        except httpx.HTTPError as exc:
            raise Failed(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        self._open.append(response)
        return response

    def json(self, method: str, path: str, *, body: dict[str, Any] | None = None) -> ErrorInfo:
        """A request whose answer is read whole (JSON or not)."""
        return self.error_info(self.open(method, path, body=body))

    def error_info(self, response: httpx.Response) -> ErrorInfo:
        """Read a (short) non-stream answer and pick out the error envelope's code, message and param."""
        try:
            raw = response.read()
        except httpx.HTTPError as exc:
            raise Failed(f"HTTP {response.status_code}: body could not be read ({type(exc).__name__})") from exc
        content_type = response.headers.get("content-type", "")
        body: Any
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw[:2048].decode("utf-8", "replace")
        info = ErrorInfo(response.status_code, content_type, body)
        if self.dialect == "openresponses" and isinstance(body, dict) and body.get("object") == "response":
            # Every Response object, not only those inside events, against the spec's ResponseResource.
            path = response.request.url.path
            self.violations.extend(
                {"code": "schema.invalid_response", "sequence_number": None,
                 "message": f"{response.request.method} {path}: {problem} (Open Responses schema)"}
                for problem in response_problems(body))
        if isinstance(body, dict):
            error = body.get("error")
            if isinstance(error, dict):
                info.code = _text(error.get("code")) or _text(error.get("type"))
                info.message = _text(error.get("message")) or ""
                info.param = _text(error.get("param"))
            elif isinstance(error, str):
                info.code = error
            detail = body.get("detail")
            if not info.message and detail is not None:
                info.message = detail if isinstance(detail, str) else json.dumps(detail)
        elif isinstance(body, str):
            info.message = body.strip()[:200]
        return info

    @staticmethod
    def is_stream(response: httpx.Response) -> bool:
        return response.status_code == 200 and response.headers.get("content-type", "").startswith(
            "text/event-stream"
        )

    def stream(self, response: httpx.Response, label: str, *, starting_after: int | None = None) -> StreamReader:
        """Start reading ``response`` as an event stream. Raises ``Failed`` if it is a 5xx or not a stream."""
        if not self.is_stream(response):
            info = self.error_info(response)
            raise Failed(f"{label}: expected a 200 event stream, got {info.summary()} ({info.content_type or '-'})")
        return StreamReader(self, response, label, starting_after=starting_after)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)
