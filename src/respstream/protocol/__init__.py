"""The sans-IO protocol core: bytes in, typed events, an assembled response and violations out (DESIGN §1-3).

``StreamCore`` is the one object most callers need; the pieces it wires together are exported too.
"""

from __future__ import annotations

from respstream.protocol.assembler import OUTCOMES, AssembledResponse, Assembler
from respstream.protocol.events import Event, UnknownEvent, decode_event, encode_event
from respstream.protocol.rules import RuleChecker
from respstream.protocol.sequencer import DEFAULT_WINDOW, Sequencer, Violation
from respstream.protocol.stream import DIALECTS, StreamCore

__all__ = [
    "DEFAULT_WINDOW",
    "DIALECTS",
    "OUTCOMES",
    "AssembledResponse",
    "Assembler",
    "Event",
    "RuleChecker",
    "Sequencer",
    "StreamCore",
    "UnknownEvent",
    "Violation",
    "decode_event",
    "encode_event",
]
