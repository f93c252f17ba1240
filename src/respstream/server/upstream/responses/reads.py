"""The native Responses upstream's direct hand-off: reads of plain text applied from the socket's data callback.

How this works (as chat/reads.py for Chat Completions): :meth:`ResponsesBodyReader.take` is the connection's direct
hook (:meth:`~.http.stream.StreamResponse.read_direct`). Called while the attempt waits for its next read, it runs
the read through the :class:`~.stream.ResponsesTranslator` there and offers the chunks to the ``sink``
(the pipeline's round collector), which applies plain text at once: the pipeline's task is not woken, the attempt's
generator does not resume. That is a live server's usual read, one token's ``output_text.delta``. Anything else (the
first chunk of a round, the terminal, passed-through items, a failure: what the sink declines or must not see) is
kept in ``pending`` for the attempt, which yields (or raises) it as if it had read it itself: the events, their
order and their bytes are the same either way.
"""

from __future__ import annotations

from respstream.server.upstream.base import Chunk, ReadSink
from respstream.server.upstream.responses.stream import ResponsesTranslator

__all__ = ["ResponsesBodyReader"]


class ResponsesBodyReader:
    """The hook for one attempt's body; ``pending`` is what it kept for the attempt (chunks, then the error)."""

    __slots__ = ("pending", "sink", "translator")

    def __init__(self, translator: ResponsesTranslator, sink: ReadSink) -> None:
        self.translator = translator
        self.sink = sink
        self.pending: tuple[list[Chunk], Exception | None] | None = None

    def take(self, raw: bytes) -> bool:
        """True when the read held nothing to yield or the sink applied it; else its outcome is kept in
        ``pending`` (False). Never raises: what the sink (or a bug) raised is kept too."""
        translator = self.translator
        try:
            batch = translator.feed(raw)
            if translator.failure is None and not translator.done:
                if not batch:
                    return True
                if self.sink(batch):
                    return True
        except Exception as exc:  # (raised by the attempt, in the reader's task)
            self.pending = [], exc
            return False
        self.pending = batch, translator.failure
        return False
