"""One Chat Completions response body, read by read: SSE decoding, chunk translation, and the direct hand-off.

How this works: :meth:`ChatBodyReader.parse` turns one read of the body into the batch of chunks it completed (and
the error to raise after that batch, if the read held one). The adapter's attempt yields those batches. With a
``sink`` (:data:`~respstream.server.upstream.base.ReadSink`, the pipeline's round collector), :meth:`take` is the
connection's direct hook (:meth:`~.http.stream.StreamResponse.read_direct`): called from the socket's data callback
while the attempt waits for its next read, it parses the read there and offers the batch to the sink, which
applies plain text at once, so the pipeline's task is not woken at all. That is a real model's usual read: a token
or two, some milliseconds apart. Anything else (the first chunk of a round, a finish, tool calls, logprobs: what the
sink declines; errors) is kept in ``pending`` for the attempt, which yields (or raises) it as if it had read it
itself: the events, their order and their bytes are the same either way.
"""

from __future__ import annotations

from respstream.errors import BadInputError
from respstream.protocol.sse import SSEDecoder
from respstream.server.upstream.base import Chunk, ReadSink, UpstreamError
from respstream.server.upstream.chat.stream import ChunkTranslator
from respstream.server.upstream.chat_wire import error_message, simple_data_events

__all__ = ["ChatBodyReader"]


class ChatBodyReader:
    """The body of one attempt of upstream ``name``. ``yielded``: a batch went out (to the attempt's consumer or the
    sink): failures are no longer before the first token."""

    __slots__ = ("_at_boundary", "_decoder", "name", "pending", "sink", "translator", "yielded")

    def __init__(self, name: str, translator: ChunkTranslator, sink: ReadSink | None = None) -> None:
        self.name = name
        self.translator = translator
        self.sink = sink
        self.yielded = False
        # What take() kept for the attempt: a batch to yield and then the error to raise (either may be empty)
        self.pending: tuple[list[Chunk], Exception | None] | None = None
        self._decoder = SSEDecoder()
        self._at_boundary = True  # the decoder holds nothing: the previous read ended at an event boundary

    def parse(self, raw: bytes) -> tuple[list[Chunk], UpstreamError | None]:
        """The chunks one read completed, and the error to raise once they are yielded (a malformed chunk, an
        ``error`` event). Chunks after the stream's finish are not parsed."""
        payloads = simple_data_events(raw) if self._at_boundary else None
        failed: str | None = None
        if payloads is None:
            try:
                payloads, failed = self._decode_slow(raw)
            except UpstreamError as exc:
                return [], exc
            self._at_boundary = raw.endswith(b"\n\n")
        translator = self.translator
        # The bulk of a stream (text, finish, usage) decoded in one call; whatever follows one by one.
        batch, taken = translator.feed_plain(payloads)
        feed = translator.feed
        for payload in payloads[taken:] if taken else payloads:
            try:
                batch += feed(payload)
            except ValueError as exc:  # what came before the bad chunk is shown first, as if the reads came apart
                return batch, UpstreamError("upstream_error", f"{self.name}: {exc}",
                                            before_first_token=not (self.yielded or batch))
            if translator.done:
                break
        if failed is not None:  # after the payloads before it in the same read, as if they came apart
            return batch, UpstreamError("upstream_error", f"{self.name}: error event: {failed}",
                                        before_first_token=not (self.yielded or batch))
        return batch, None

    def take(self, raw: bytes) -> bool:
        """The connection's direct hook: True when the read held nothing or the sink took it; else the read's
        outcome is kept in ``pending`` for the attempt (False). Never raises: what the sink raised is kept too."""
        sink = self.sink
        try:
            batch, error = self.parse(raw)
            if error is None and not self.translator.done:
                if not batch:  # (a role chunk, a comment: nothing to yield)
                    return True
                if sink is not None and sink(batch):
                    self.yielded = True
                    return True
        except Exception as exc:  # (the sink's, or a bug's: raised by the attempt, in the reader's task)
            self.pending = [], exc
            return False
        self.pending = batch, error
        return False

    def close(self) -> None:
        self._decoder.close()

    def _decode_slow(self, raw: bytes) -> tuple[list[bytes], str | None]:
        """The full SSE decoder, for reads that are not whole one-line ``data:`` events (comments, CRLF, splits):
        the payloads, and the message of an ``error`` event if one came (what follows it is dropped)."""
        try:
            self._decoder.feed(raw)
        except BadInputError as exc:  # an oversized event: the upstream is broken, not the client
            raise UpstreamError(
                "upstream_error", f"{self.name}: bad event stream: {exc}", before_first_token=not self.yielded
            ) from None
        payloads: list[bytes] = []
        for message in self._decoder.events():
            if message.event == "error":
                return payloads, error_message(message.data)
            payloads.append(message.data)
        return payloads, None

