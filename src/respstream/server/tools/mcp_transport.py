"""The HTTP client MCP sessions use: every connection goes to the address the network policy checked, and every
response body is read under a byte cap.

How this works: the ``mcp`` SDK sends its requests through an ``httpx2`` client; :class:`PinnedTransport` sits under
it. The first request to a host resolves it once (:func:`~respstream.server.tools.netguard.resolve`), checks every
address with the server tools' :class:`~respstream.server.tools.netguard.AddressPolicy` and pins the first one; every
request of the session is then sent to that IP (:func:`~respstream.server.tools.netguard.pinned_url`, the same
pinning ``web_fetch`` does) with the name kept in ``Host`` and TLS SNI, so a DNS answer that changes after the check
(rebinding) is never connected to. A response whose ``Content-Length`` or streamed body passes
``limits.mcp_max_response_bytes`` is cut with :class:`McpResponseTooLarge` (a 250 MB tools list is never read whole;
the SDK's own cap covers only SSE events, not JSON responses).

The SDK validates a message with pydantic on the event loop at ~30 µs a content part (200,000 parts: 7 s), so each
JSON-RPC message is looked at first, in linear C-speed work (msgspec): a result with more than
``limits.mcp_max_result_parts`` ``content`` parts or ``tools`` is replaced by a JSON-RPC error naming the limit
before the SDK sees it. JSON bodies are checked whole (they are within the byte cap); SSE bodies event by event
(decoded with the protocol's SSE decoder and re-encoded with their ``event`` and ``id``; ``retry`` hints are
dropped).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx2
import msgspec

from respstream.protocol.sse import SSEDecoder, SSEEventTooLarge, encode_message
from respstream.server.tls import client_tls_context
from respstream.server.tools.netguard import AddressPolicy, IPAddress, pinned_url, resolve

__all__ = ["McpResponseTooLarge", "PinnedTransport", "guard_message", "mcp_http_client"]

_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults (create_mcp_http_client)


class McpResponseTooLarge(httpx2.StreamError):
    """An MCP server's HTTP response passed ``limits.mcp_max_response_bytes``. A ``StreamError``: the SDK turns it
    into the error of the request it answered (the caller sees this message), not into a dead session."""


_MIN_PART_BYTES = 20  # the smallest content part or tool as JSON is longer ({"type":"text","text":""}: 25)


def guard_message(data: bytes, max_parts: int) -> bytes:
    """``data`` (one JSON-RPC message), or an error for its id when its result has more than ``max_parts`` content
    parts or tools. Linear; a message too short to hold that many parts is not even decoded."""
    if len(data) < max_parts * _MIN_PART_BYTES:
        return data
    try:
        message = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return data  # the SDK reports it
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict):
        return data
    for key in ("content", "tools"):
        items = result.get(key)
        if isinstance(items, list) and len(items) > max_parts:
            what = "content parts" if key == "content" else "tools"
            error = {"code": -32603, "message": f"the MCP result has {len(items)} {what}, more than {max_parts} "
                                                "(limits.mcp_max_result_parts)"}
            return msgspec.json.encode({"jsonrpc": "2.0", "id": message.get("id"), "error": error})
    return data


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, max_parts: int, url: str, content_type: str,
                 announced: int) -> None:
        self._inner, self._limit, self._max_parts, self._url = inner, limit, max_parts, url
        self._type, self._announced = content_type, announced

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._announced > self._limit:  # Content-Length says it: not one byte is read
            raise McpResponseTooLarge(_too_large(self._url, self._limit))
        if self._type.startswith("application/json"):
            body = b"".join([chunk async for chunk in self._bounded()])
            yield guard_message(body, self._max_parts)
        elif self._type.startswith("text/event-stream"):
            decoder = SSEDecoder(max_event_size=self._limit)
            last_id = ""
            async for chunk in self._bounded():
                try:
                    decoder.feed(chunk)
                except SSEEventTooLarge:
                    raise McpResponseTooLarge(_too_large(self._url, self._limit)) from None
                out = []
                for event in decoder.events():
                    out.append(encode_message(guard_message(event.data, self._max_parts),
                                              event=None if event.event == "message" else event.event,
                                              id=event.id if event.id != last_id else None))
                    last_id = event.id
                if out:
                    yield b"".join(out)
        else:
            async for chunk in self._bounded():
                yield chunk

    async def _bounded(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise McpResponseTooLarge(_too_large(self._url, self._limit))
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _too_large(url: str, limit: int) -> str:
    return f"the MCP server's response to {url} is larger than {limit} bytes (limits.mcp_max_response_bytes)"


class PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends each request to the policy-checked address of its host, reading at most ``max_bytes`` of a body."""

    def __init__(self, policy: AddressPolicy, max_bytes: int, max_parts: int) -> None:
        self.policy = policy
        self.max_bytes = max_bytes
        self.max_parts = max_parts
        self._pins: dict[tuple[str, int], IPAddress] = {}
        self._inner = httpx2.AsyncHTTPTransport(verify=client_tls_context(), trust_env=False)

    async def pin(self, host: str, port: int) -> IPAddress:
        """The address requests to ``host:port`` go to: resolved and checked once. Raises ``FetchRefused`` or
        ``OSError``."""
        ip = self._pins.get((host, port))
        if ip is None:
            addresses = await resolve(host, port)
            self.policy.check(host, addresses)
            ip = self._pins[(host, port)] = addresses[0]
        return ip

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            ip = await self.pin(host, port)
        except OSError as exc:  # FetchRefused included: the SDK reports it as a transport failure
            raise httpx2.ConnectError(f"{host}: {exc}", request=request) from None
        request.url = httpx2.URL(pinned_url(parts, ip, port))  # the Host header keeps the name
        if parts.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": host}
        response = await self._inner.handle_async_request(request)
        length = response.headers.get("content-length", "")
        kind = response.headers.get("content-type", "")
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _CappedStream(response.stream, self.max_bytes, self.max_parts, url, kind,
                                        int(length) if length.isdigit() else 0)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def mcp_http_client(headers: dict[str, str] | None, transport: PinnedTransport) -> httpx2.AsyncClient:
    """The SDK's client settings (``create_mcp_http_client``) on the pinned, capped transport."""
    return httpx2.AsyncClient(headers=headers, timeout=_TIMEOUT, transport=transport)
