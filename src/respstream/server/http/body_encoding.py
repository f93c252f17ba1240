"""Compressed request bodies: ``Content-Encoding: zstd | gzip | deflate`` (Codex sends zstd), with a bomb cap.

How this works: the compressed body is read under the same byte limit as a plain one (``max_body_bytes``), then
:func:`decode_body` inflates it in bounded steps and stops as soon as the output passes that limit, so a small bomb
costs at most ``limit`` bytes of output (and the CPU to make them) before its 413; it never holds more. A body whose
decompressed size exceeds the limit is ``413 request_too_large``; an encoding we do not know is ``415
unsupported_media_type`` naming it; a corrupt or truncated stream is ``400 invalid_body``. ``identity`` (or no
header) passes through. ``deflate`` is the zlib format (RFC 9110), raw DEFLATE is accepted too (some clients send it).
"""

from __future__ import annotations

import asyncio
import io
import zlib
from typing import Any

from respstream.server.http_errors import HTTPError

__all__ = ["ENCODINGS", "decode_body", "decoded_body"]

ENCODINGS = ("zstd", "gzip", "deflate")
_STEP = 256 << 10  # output bytes per decompression step
# Up to this much output the work (a few ms) stays on the event loop; a larger body limit moves it to a thread.
_INLINE_LIMIT = 1 << 20


def _too_large(limit: int) -> HTTPError:
    return HTTPError(413, "request_too_large", f"The request body decompresses to more than {limit} bytes "
                     "(the limit applies to the decompressed body).")


def _corrupt(encoding: str, detail: str) -> HTTPError:
    return HTTPError(400, "invalid_body", f"The request body is not valid {encoding} data ({detail}).")


def _inflate(data: bytes, wbits: int, limit: int, encoding: str) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out: list[bytes] = []
    size = 0
    pending = data
    try:
        while True:
            piece = inflater.decompress(pending, _STEP)  # bounded: never more than one step at a time
            size += len(piece)
            if size > limit:
                raise _too_large(limit)
            out.append(piece)
            pending = inflater.unconsumed_tail
            if not pending and (inflater.eof or not piece):  # (output may still be buffered after the input ran out)
                break
        if not inflater.eof:
            raise _corrupt(encoding, "the stream ends early")
    except zlib.error as exc:
        raise _corrupt(encoding, str(exc)) from None
    return b"".join(out)


def _zstd(data: bytes, limit: int) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise HTTPError(415, "unsupported_media_type", "Content-Encoding zstd needs the zstandard package "
                        "(pip install 'respstream[server]'); send gzip or an uncompressed body.") from None
    out: list[bytes] = []
    size = 0
    reader: Any = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    try:
        while piece := reader.read(_STEP):
            size += len(piece)
            if size > limit:
                raise _too_large(limit)
            out.append(piece)
    except zstandard.ZstdError as exc:
        raise _corrupt("zstd", str(exc)) from None
    return b"".join(out)


def _looks_zlib(data: bytes) -> bool:
    return len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0


def decode_body(content_encoding: str | None, data: bytes, limit: int) -> bytes:
    """The body ``data`` decoded per its ``Content-Encoding`` header. Raises :class:`HTTPError` 413/415/400."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    for coding in reversed(codings):  # applied in the order listed, so undone last-first
        if coding == "identity":
            continue
        if coding in ("gzip", "x-gzip"):
            data = _inflate(data, 16 + zlib.MAX_WBITS, limit, "gzip")
        elif coding == "deflate":
            data = _inflate(data, zlib.MAX_WBITS if _looks_zlib(data) else -zlib.MAX_WBITS, limit, "deflate")
        elif coding == "zstd":
            data = _zstd(data, limit)
        else:
            raise HTTPError(415, "unsupported_media_type", f"Content-Encoding {coding!r} is not supported "
                            f"(supported: {', '.join(ENCODINGS)}, identity).")
    return data


async def decoded_body(content_encoding: str | None, data: bytes, limit: int) -> bytes:
    """:func:`decode_body`, in a worker thread when the limit allows more output than a few ms of inflating."""
    if not content_encoding or content_encoding.strip().lower() == "identity":
        return data
    if limit <= _INLINE_LIMIT:
        return decode_body(content_encoding, data, limit)
    return await asyncio.to_thread(decode_body, content_encoding, data, limit)

