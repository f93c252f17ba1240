"""The SSE decoder run over a whole input, as the SSE tests (test_sse.py, test_sse_properties.py) compare it: the
messages, ``retry`` and last event id it ends with."""

from __future__ import annotations

from collections.abc import Sequence

from respstream.protocol import sse
from respstream.protocol.sse import SSEDecoder, SSEMessage

__all__ = ["Outcome", "decode"]

Outcome = tuple[list[SSEMessage], int | None, str]


def decode(
    chunks: Sequence[bytes], *, fast: bool = True, seed: str = "", max_event_size: int = sse.DEFAULT_MAX_EVENT_SIZE
) -> Outcome:
    """Feed ``chunks`` then EOF; return the messages and the decoder state after close."""
    dec = SSEDecoder(last_event_id=seed, max_event_size=max_event_size)
    dec._use_fast = fast
    out: list[SSEMessage] = []
    for chunk in chunks:
        dec.feed(chunk)
        out += dec.events()
    dec.close()
    out += dec.events()
    return out, dec.retry, dec.last_event_id
