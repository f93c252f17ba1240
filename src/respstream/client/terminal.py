"""Live terminal rendering of a response stream (what ``respstream stream`` shows).

How this works: :class:`LiveRenderer` gets each event as it is delivered and writes the answer text to ``out`` as
it comes; everything else (routing decision, tool calls, reasoning, the rewrite note, the final usage line) goes to
``meta``, which is the same terminal when stdout is one, and stderr otherwise, so ``respstream stream … > file``
leaves just the answer in the file. A spinner turns on stderr until the first token, only on a terminal.
:class:`Timeline` is the ``--events`` view: one compact line per event. Colours only with ``color=True``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from respstream.client.handlers import ToolCallUpdate
from respstream.errors import RespstreamError
from respstream.protocol import events as ev
from respstream.protocol.assembler import AssembledResponse

__all__ = ["LiveRenderer", "Spinner", "Style", "Timeline", "preview"]

_SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Style:
    """ANSI styling that turns into plain text when colour is off."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def red(self, text: str) -> str:
        return self._wrap("31", text)

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)

    def cyan(self, text: str) -> str:
        return self._wrap("36", text)


def preview(value: Any, limit: int = 80, *, squeeze: bool = True) -> str:
    """At most ``limit`` characters of any value (tool output, arguments); ``squeeze`` folds whitespace runs
    (newlines included) into one space so the preview stays on one line."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if squeeze:
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Spinner:
    """A spinner on a terminal while we wait; ``stop()`` erases it. Does nothing when ``enabled`` is False."""

    def __init__(self, stream: TextIO, *, enabled: bool, label: str = "waiting for the first token") -> None:
        self._stream = stream
        self._enabled = enabled
        self._label = label
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lock = threading.Lock()  # writers to the same terminal take it so a frame never lands mid-line

    def start(self) -> None:
        if self._enabled and self._thread is None:
            self._thread = threading.Thread(target=self._spin, name="respstream-spinner", daemon=True)
            self._thread.start()

    def _spin(self) -> None:
        frame = 0
        while True:
            with self.lock:
                if self._stop.is_set():
                    return
                self._stream.write(f"\r{_SPINNER_FRAMES[frame % len(_SPINNER_FRAMES)]} {self._label}…")
                self._stream.flush()
            frame += 1
            if self._stop.wait(0.08):
                return

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        with self.lock:
            self.clear_line()

    def clear_line(self) -> None:
        """Erase the spinner's line (call with ``lock`` held)."""
        if self._enabled:
            self._stream.write("\r\x1b[2K")
            self._stream.flush()


class LiveRenderer:
    """Renders events as they arrive. Call :meth:`event` per event and :meth:`finish` once at the end."""

    def __init__(
        self,
        out: TextIO,
        meta: TextIO,
        *,
        style: Style,
        spinner: Spinner | None = None,
        clock: Callable[[], float] = time.monotonic,
        live: bool = True,
    ) -> None:
        self.out, self.meta, self.style = out, meta, style
        # live: text goes out as it streams (a terminal). Not live (a pipe or a file): the answer is written once,
        # the final text, at finish(), so `respstream stream ... > file` holds exactly the answer.
        self.live = live
        self._error_shown = False
        self.spinner = spinner
        self.clock = clock
        self.started = clock()
        self.first_token_at: float | None = None
        self.deltas = 0
        self._column = 0  # characters on the current line of `out` (0: at a line start)
        self._mode = ""  # "text" | "reasoning" | "refusal": what the current line is showing
        self._rewrite_pending = False
        self._streamed: dict[tuple[Any, Any], str] = {}

    # --- writing ----------------------------------------------------------------------------------------------

    def _first_output(self) -> None:
        if self.spinner is not None:
            self.spinner.stop()
            self.spinner = None

    def _write(self, text: str, mode: str) -> None:
        self._first_output()
        if not self.live:
            return
        if mode != self._mode and self._column:
            self.out.write("\n")
            self._column = 0
        self._mode = mode
        self.out.write(text)
        self.out.flush()
        newline = text.rfind("\n")
        self._column = len(text) - newline - 1 if newline >= 0 else self._column + len(text)

    def note(self, text: str) -> None:
        """A line of metadata, on its own line (the spinner, if still waiting, goes on below it)."""
        if self._column:
            self.out.write("\n")
            self.out.flush()
            self._column = 0
            self._mode = ""
        if self.spinner is not None:
            with self.spinner.lock:
                self.spinner.clear_line()
                self.meta.write(text + "\n")
                self.meta.flush()
            return
        self.meta.write(text + "\n")
        self.meta.flush()

    def _token(self) -> None:
        self.deltas += 1
        if self.first_token_at is None:
            self.first_token_at = self.clock()

    # --- events -----------------------------------------------------------------------------------------------

    def event(self, event: ev.Event) -> None:
        s = self.style
        if isinstance(event, ev.OutputTextDelta):
            self._token()
            key = (event.output_index, event.content_index)
            self._streamed[key] = self._streamed.get(key, "") + (event.delta or "")
            self._write(event.delta or "", "text")
        elif isinstance(event, ev.ReasoningTextDelta | ev.ReasoningSummaryTextDelta):
            self._token()
            self._write(s.dim(event.delta or ""), "reasoning")
        elif isinstance(event, ev.RefusalDelta):
            self._token()
            self._write(s.yellow(event.delta or ""), "refusal")
        elif isinstance(event, ev.RoutingCompleted):
            why = f": {event.reasoning}" if event.reasoning else ""
            source = f", {event.source}" if event.source else ""
            self.note(s.dim(f"↳ routed to {event.model_id or '?'} ({event.category or '?'}{source}){why}"))
        elif isinstance(event, ev.RewriteInProgress):
            self._rewrite_pending = True
        elif isinstance(event, ev.OutputTextDone):
            key = (event.output_index, event.content_index)
            shown = self._streamed.get(key)
            if event.text is not None and shown is not None and event.text != shown:
                why = "rewritten by the server" if self._rewrite_pending else "final text differs from the stream"
                if event.text.split() == shown.split():
                    self.note(s.dim(f"✎ {why} (whitespace only)"))
                else:  # a real change: show the whole final text again, once
                    self.note(s.yellow(f"✎ {why}; final text:"))
                    self._write(event.text, "text")
        elif isinstance(event, ev.ErrorEvent):
            self._error_shown = True
            self.note(s.red(f"✗ error {event.error_code or ''}: {event.error_message or ''}".replace("  ", " ")))

    def tool_call(self, update: ToolCallUpdate) -> None:
        s = self.style
        name = update.name or update.item_type
        if update.phase == "start":
            self.note(s.cyan(f"⚙ {name} …"))
        elif update.phase == "done":
            status = update.status or "done"
            mark = s.red("✗") if status in ("failed", "incomplete") else s.green("✓")
            line = f"{mark} {s.cyan(name)}({preview(update.arguments, 60)}) {status}"
            if update.output not in (None, ""):
                line += s.dim(f" → {preview(update.output)}")
            self.note(line)

    def finish(self, result: AssembledResponse | None, error: BaseException | None) -> None:
        """The last lines: the outcome when not completed, then usage and timing."""
        self._first_output()
        s = self.style
        if self._column:
            self.out.write("\n")
            self.out.flush()
            self._column = 0
        if not self.live and result is not None and result.output_text:
            text = result.output_text
            self.out.write(text if text.endswith("\n") else text + "\n")
            self.out.flush()
        if self._error_shown:
            pass  # the error event was already shown: print it once
        elif isinstance(error, RespstreamError) and result is not None and result.status != "completed":
            self.meta.write(s.red(f"✗ {result.status}: {error}") + "\n")
        elif error is not None and result is None:
            self.meta.write(s.red(f"✗ {error}") + "\n")
        self.meta.write(s.dim(self.stats(result)) + "\n")
        self.meta.flush()

    def stats(self, result: AssembledResponse | None) -> str:
        now = self.clock()
        parts = [result.status if result is not None else "no response"]
        usage = (result.usage if result is not None else None) or {}
        out_tokens = usage.get("output_tokens")
        if isinstance(usage.get("total_tokens"), int):
            parts.append(f"{usage['total_tokens']} tokens ({usage.get('input_tokens', '?')} in / {out_tokens} out)")
        if self.first_token_at is not None:
            parts.append(f"first token {self.first_token_at - self.started:.2f}s")
            generating = now - self.first_token_at
            count = out_tokens if isinstance(out_tokens, int) and out_tokens > 0 else self.deltas
            if generating > 0 and count > 1:
                parts.append(f"{count / generating:.1f} tok/s")
        parts.append(f"total {now - self.started:.2f}s")
        return " · ".join(parts)


class Timeline:
    """``--events``: one line per event with its sequence number, type and the fields that identify it."""

    def __init__(self, out: TextIO, *, style: Style, clock: Callable[[], float] = time.monotonic) -> None:
        self.out, self.style, self.clock = out, style, clock
        self.started = clock()

    def event(self, event: ev.Event) -> None:
        seq = "-" if event.sequence_number is None else str(event.sequence_number)
        elapsed = self.clock() - self.started
        fields = " ".join(f"{k}={v}" for k, v in key_fields(event).items())
        stamp = f"+{elapsed:.3f}s"
        line = f"{seq:>5} {self.style.dim(f'{stamp:>9}')} {self.style.cyan(event.type or '?')}"
        self.out.write(line + (f" {fields}" if fields else "") + "\n")
        self.out.flush()


def key_fields(event: ev.Event) -> dict[str, str]:
    """The few fields that say what an event is about, rendered short."""
    out: dict[str, str] = {}
    if isinstance(event, ev.ResponseEvent):
        response = event.response or {}
        for name in ("id", "status", "model"):
            if response.get(name) is not None:
                out[name] = str(response[name])
    elif isinstance(event, ev.ErrorEvent):
        out["code"] = str(event.error_code)
        out["message"] = json.dumps(preview(event.error_message or "", 60), ensure_ascii=False)
    elif isinstance(event, ev.RoutingCompleted):
        out.update({k: str(v) for k, v in (("model_id", event.model_id), ("category", event.category),
                                           ("source", event.source)) if v is not None})
    elif isinstance(event, ev.OutputItemAdded | ev.OutputItemDone):
        item = event.item or {}
        out["output_index"] = str(event.output_index)
        for name in ("type", "id", "name", "status"):
            if item.get(name) is not None:
                out[name] = str(item[name])
        if isinstance(event, ev.OutputItemDone) and item.get("output") is not None:
            out["output"] = json.dumps(preview(item["output"], 40), ensure_ascii=False)
    elif isinstance(event, ev.UnknownEvent):
        out["unknown"] = "true"
    else:
        for name in ("item_id", "output_index", "content_index"):
            value = getattr(event, name, None)
            if value is not None:
                out[name] = str(value)
        for name in ("delta", "text", "arguments", "refusal"):
            value = getattr(event, name, None)
            if isinstance(value, str):
                out[name] = json.dumps(preview(value, 40, squeeze=False), ensure_ascii=False)  # escapes newlines
    return out
