"""What the sync and async response streams share beyond the driver: the read-only view of a stream in progress.

Both twins hold a :class:`~respstream.client.core.StreamDriver` and a stored failure; everything here reads them and
never does IO, so it lives once, in a base class of ``ResponseStream`` and ``AsyncResponseStream``.
"""

from __future__ import annotations

from respstream.client.core import StreamDriver
from respstream.protocol.assembler import AssembledResponse

__all__ = ["StreamView"]


class StreamView:
    _driver: StreamDriver
    _failure: BaseException | None

    @property
    def response_id(self) -> str | None:
        return self._driver.response_id

    @property
    def last_sequence_number(self) -> int | None:
        """The highest contiguous sequence number delivered so far (the resume cursor)."""
        return self._driver.cursor

    @property
    def resumes(self) -> int:
        """How many times this stream reconnected."""
        return self._driver.resumes

    def snapshot(self) -> AssembledResponse:
        """The response as assembled so far (``status`` stays ``truncated`` until a terminal arrives)."""
        return self._driver.result_now()

    def _outcome(self) -> AssembledResponse:
        """The end of ``result()`` once the stream is consumed or closed: the stored failure raised, or the outcome."""
        if self._failure is not None:
            raise self._failure
        if not self._driver.finished:
            self._driver.finish()  # closed early: whatever arrived is the outcome
        return self._driver.outcome()
