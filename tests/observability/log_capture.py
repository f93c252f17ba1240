"""The gateway's logs captured for a test: ``configure_logging`` (the one `respstream serve` calls) writing into a
string, and the logging tree put back as it was afterwards, so that no other test sees the handler or its levels."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from respstream.server.telemetry import LoggingSettings, configure_logging

__all__ = ["captured_logs"]


@contextmanager
def captured_logs(settings: LoggingSettings) -> Iterator[tuple[io.StringIO, logging.Handler]]:
    """What the ``respstream`` loggers write under ``settings`` while the block runs, and the handler writing it."""
    out = io.StringIO()
    handler = configure_logging(settings, stream=out)
    try:
        yield out, handler
    finally:
        root = logging.getLogger("respstream")
        root.removeHandler(handler)
        root.propagate = True
        root.setLevel(logging.NOTSET)
        logging.getLogger("respstream.access").setLevel(logging.NOTSET)
