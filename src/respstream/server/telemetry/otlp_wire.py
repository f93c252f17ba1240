"""OTLP trace export bodies written straight to protobuf wire bytes.

The SDK's encoder builds a protobuf message object per span, attribute and value and then serialises them; that was
the largest single cost of tracing under load (about 30 µs a span here). Spans are a small, fixed schema, so this
module writes the same ``ExportTraceServiceRequest`` bytes directly (field numbers from opentelemetry-proto's
``trace.proto`` / ``common.proto``; tests decode the result with the official classes and compare it with the
SDK's own encoding). The resource and instrumentation scope of a batch are encoded once and cached.

It reads spans only through ``ReadableSpan``'s public properties, so any SDK span (ours or another library's)
encodes the same way.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["encode_export_request"]

_FIXED64 = struct.Struct("<Q").pack
_DOUBLE = struct.Struct("<d").pack
_FIXED32 = struct.Struct("<I").pack
# SpanFlags: bits 0-7 are the W3C trace flags; bit 8 says whether bit 9 (parent is remote) is known.
_HAS_IS_REMOTE = 0x100
_SMALL = [bytes((n,)) for n in range(0x80)]
_IS_REMOTE = 0x200


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 on the wire: two's complement, ten bytes
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _text(value: str) -> bytes:
    # A lone surrogate (possible in recorded content) is not UTF-8; the collector would reject the whole batch.
    return value.encode("utf-8", "replace") if not value.isascii() else value.encode("ascii")


_TAGS = {number: _varint(number << 3 | 2) for number in range(1, 17)}


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (string, bytes or embedded message)."""
    size = len(payload)
    return _TAGS[number] + (_SMALL[size] if size < 0x80 else _varint(size)) + payload


_KEYS: dict[str, bytes] = {}  # attribute keys come from a small fixed set: each is encoded once
_PAIRS: dict[tuple[int, str, type, Any], bytes] = {}


def _any_value(value: Any) -> bytes:
    # bool before int: bool is an int subclass. Every oneof member is written even when it is the default value.
    if isinstance(value, str):
        return _field(1, _text(value))
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE(value)
    if isinstance(value, bytes):
        return _field(7, value)
    if isinstance(value, Mapping):
        return _field(6, b"".join(_field(1, _key_value(str(k), v)) for k, v in value.items()))
    if isinstance(value, Sequence):
        return _field(5, b"".join(_field(1, _any_value(v)) for v in value))
    return _field(1, _text(str(value)))


def _key_value(key: str, value: Any) -> bytes:
    encoded = _KEYS.get(key)
    if encoded is None:
        encoded = _field(1, _text(key))
        if len(_KEYS) < 1024:
            _KEYS[key] = encoded
    return encoded + _field(2, _any_value(value))


def _attributes(number: int, attributes: Mapping[str, Any] | None) -> bytes:
    """``attributes`` as repeated KeyValue field ``number``. Most pairs repeat from span to span (the model, the
    route, the operation, small counts), so each whole field is kept once encoded; ids never repeat, and starting
    the cache over when it is full keeps the pairs that do."""
    if not attributes:
        return b""
    parts = []
    for key, value in attributes.items():
        kind = value.__class__
        if (kind is str and len(value) <= 64) or kind is bool or (kind is int and -1024 <= value <= 1024):
            cache_key = (number, key, kind, value)
            field = _PAIRS.get(cache_key)
            if field is None:
                field = _field(number, _key_value(key, value))
                if len(_PAIRS) >= 4096:
                    _PAIRS.clear()
                _PAIRS[cache_key] = field
            parts.append(field)
        else:
            parts.append(_field(number, _key_value(key, value)))
    return b"".join(parts)


def _count(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value) if value else b""


def _trace_state(state: Any) -> str:
    return ",".join(f"{key}={value}" for key, value in state.items()) if state else ""


_KINDS: dict[int, bytes] = {}  # id() of a span kind (an enum member, alive as long as its class) -> its field
_NAMES: dict[str, bytes] = {}  # span names repeat ("route", "chat auto"): each field is kept once encoded


def _kind(kind: Any) -> bytes:
    encoded = _KINDS.get(id(kind))  # by id: an enum member's own __hash__ is Python code
    if encoded is None:
        encoded = _KINDS[id(kind)] = b"\x30" + _varint(kind.value + 1)  # OTLP kinds start at 1
    return encoded


def _name(name: str) -> bytes:
    encoded = _NAMES.get(name)
    if encoded is None:
        encoded = _field(5, _text(name))
        if len(_NAMES) >= 1024:
            _NAMES.clear()
        _NAMES[name] = encoded
    return encoded


def _event(event: Any) -> bytes:
    return (b"\x09" + _FIXED64(event.timestamp) + _field(2, _text(event.name))
            + _attributes(3, event.attributes) + _count(4, event.dropped_attributes))


def _link(link: Any) -> bytes:
    context = link.context
    state = _trace_state(context.trace_state)
    return (_field(1, context.trace_id.to_bytes(16, "big")) + _field(2, context.span_id.to_bytes(8, "big"))
            + (_field(3, _text(state)) if state else b"") + _attributes(4, link.attributes)
            + _count(5, link.dropped_attributes) + b"\x35" + _FIXED32(int(context.trace_flags) | _HAS_IS_REMOTE
                                                                    | (_IS_REMOTE if context.is_remote else 0)))


def _status(status: Any) -> bytes:
    if status is None:
        return b""
    description = status.description
    code = status.status_code.value
    return _field(15, (_field(2, _text(description)) if description else b"") + (b"\x18" + _varint(code) if code
                                                                                   else b""))


_TIMES = struct.Struct("<BQBQ").pack  # fields 7 and 8 (fixed64): start and end time


def encode_span(span: Any) -> bytes:
    """One ``Span`` message (without its field tag) from a ``ReadableSpan`` (or a span that reads like one).

    The fields that take a few values (name, kind, status without a description, flags) come from small caches,
    looked up inline: this runs once per exported span."""
    context = span.context
    parent = span.parent
    state = context.trace_state
    parts = [b"\x0a\x10", context.trace_id.to_bytes(16, "big"), b"\x12\x08", context.span_id.to_bytes(8, "big")]
    if state:
        parts.append(_field(3, _text(_trace_state(state))))
    if parent is not None:
        parts += (b"\x22\x08", parent.span_id.to_bytes(8, "big"))
    name, kind = span.name, span.kind
    parts += (_NAMES.get(name) or _name(name), _KINDS.get(id(kind)) or _kind(kind),
              _TIMES(0x39, span.start_time or 0, 0x41, span.end_time or 0), _attributes(9, span.attributes))
    if span.dropped_attributes:
        parts.append(_count(10, span.dropped_attributes))
    events = span.events
    if events:
        parts += (_field(11, _event(e)) for e in events)
    if span.dropped_events:
        parts.append(_count(12, span.dropped_events))
    links = span.links
    if links:
        parts += (_field(13, _link(link)) for link in links)
    if span.dropped_links:
        parts.append(_count(14, span.dropped_links))
    status = span.status
    cached = _STATUSES.get(id(status))
    parts.append(cached[1] if cached is not None and cached[0] is status else _status_of(status))
    remote = parent is not None and parent.is_remote
    trace_flags = context.trace_flags
    cached = _SPAN_FLAGS.get((id(trace_flags), remote))
    parts.append(cached[1] if cached is not None and cached[0] is trace_flags else _flags_of(trace_flags, remote))
    return b"".join(parts)


# id() -> (the object, its field): an object's id is reused only after it is gone, and the object kept here
# cannot be gone; the `is` test makes a hit certain. Both stay small: a recorder's shared statuses and flags.
_STATUSES: dict[int, tuple[Any, bytes]] = {}
_SPAN_FLAGS: dict[tuple[int, bool], tuple[Any, bytes]] = {}


def _status_of(status: Any) -> bytes:
    encoded = _status(status)
    if status is not None and not status.description and len(_STATUSES) < 64:
        _STATUSES[id(status)] = (status, encoded)  # only the shared, description-less ones
    return encoded


def _flags_of(trace_flags: Any, remote: bool) -> bytes:
    flags = (int(trace_flags) & 0xFF) | _HAS_IS_REMOTE | (_IS_REMOTE if remote else 0)
    encoded = b"\x85\x01" + _FIXED32(flags)  # field 16, wire type 5 (fixed32)
    if len(_SPAN_FLAGS) < 64:
        _SPAN_FLAGS[(id(trace_flags), remote)] = (trace_flags, encoded)
    return encoded


def _resource(resource: Any) -> bytes:
    return _attributes(1, resource.attributes)


def _scope(scope: Any) -> bytes:
    if scope is None:
        return b""
    version = scope.version or ""
    attributes = getattr(scope, "attributes", None)
    return _field(1, _field(1, _text(scope.name)) + (_field(2, _text(version)) if version else b"")
                  + _attributes(3, attributes))


class _Prefixes:
    """The encoded resource and scope of recent batches: they are the same for every span of a process."""

    def __init__(self) -> None:
        self._resources: dict[int, tuple[Any, bytes]] = {}
        self._scopes: dict[int, tuple[Any, bytes]] = {}

    def resource(self, resource: Any) -> bytes:
        cached = self._resources.get(id(resource))
        if cached is None or cached[0] is not resource:
            cached = (resource, _field(1, _resource(resource)))
            if len(self._resources) > 64:
                self._resources.clear()
            self._resources[id(resource)] = cached
        return cached[1]

    def scope(self, scope: Any) -> bytes:
        cached = self._scopes.get(id(scope))
        if cached is None or cached[0] is not scope:
            cached = (scope, _scope(scope))
            if len(self._scopes) > 64:
                self._scopes.clear()
            self._scopes[id(scope)] = cached
        return cached[1]


_PREFIXES = _Prefixes()


def encode_export_request(spans: Sequence[Any]) -> bytes:
    """The body of ``POST /v1/traces``: ``spans`` grouped by resource, then by instrumentation scope, in order."""
    groups: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    last: tuple[Any, Any] = (None, None)
    encoded_spans: list[bytes] = []
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope
        if resource is not last[0] or scope is not last[1]:  # usually every span of a batch shares both
            scopes = groups.setdefault(id(resource), (resource, {}))[1]
            encoded_spans = scopes.setdefault(id(scope), (scope, []))[1]
            last = (resource, scope)
        encoded_spans.append(_field(2, encode_span(span)))
    out = []
    for resource, scopes in groups.values():
        body = [_PREFIXES.resource(resource)]
        for scope, encoded in scopes.values():
            schema = getattr(scope, "schema_url", "") or ""
            body.append(_field(2, _PREFIXES.scope(scope) + b"".join(encoded)
                               + (_field(3, _text(schema)) if schema else b"")))
        schema_url = getattr(resource, "schema_url", "") or ""
        if schema_url:
            body.append(_field(3, _text(schema_url)))
        out.append(_field(1, b"".join(body)))
    return b"".join(out)
