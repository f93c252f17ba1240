"""Compressed request bodies (``Content-Encoding: zstd|gzip|deflate``; Codex sends zstd) on a real gateway over
loopback (SIMULATED scripted upstream): decoded, capped at the body limit after decompression (a bomb is a 413 that
never holds more than the limit), unknown encodings 415, corrupt data 400."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from collections.abc import Iterator

import httpx
import pytest
import zstandard

from respstream.server.http.body_encoding import decode_body
from respstream.server.http_errors import HTTPError

from .helpers import ServerThread, make_app

BODY = json.dumps({"input": "Say hi.", "stream": False, "model": "scripted-a"}).encode()
LIMIT = 64 << 10


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with ServerThread(make_app(max_body_bytes=LIMIT)) as srv:
        yield srv.url


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(("encoding", "pack"), [
    ("zstd", lambda b: zstandard.ZstdCompressor().compress(b)),
    ("gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("deflate", _raw_deflate),
    ("identity", lambda b: b),
])
def test_compressed_bodies_are_decoded(url: str, encoding: str, pack: object) -> None:
    packed = pack(BODY)  # type: ignore[operator]
    r = httpx.post(f"{url}/v1/responses", content=packed,
                   headers={"content-type": "application/json", "content-encoding": encoding}, timeout=20)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed"


def _zero_bomb(encoding: str, size: int) -> bytes:
    zeros = b"\0" * (1 << 20)
    if encoding == "zstd":
        return zstandard.ZstdCompressor().compress(b'{"input": "' + b"\0" * size + b'"}')
    packer = zlib.compressobj(9, wbits=16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
    return b"".join(packer.compress(zeros) for _ in range(size >> 20)) + packer.flush()


@pytest.mark.parametrize("encoding", ["zstd", "gzip", "deflate"])
def test_a_bomb_is_413_naming_the_limit(url: str, encoding: str) -> None:
    bomb = _zero_bomb(encoding, 32 << 20)
    assert len(bomb) < LIMIT  # it passes the plain body limit; only its decompressed size is too large
    r = httpx.post(f"{url}/v1/responses", content=bomb,
                   headers={"content-type": "application/json", "content-encoding": encoding}, timeout=20)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large" and "decompress" in r.json()["error"]["message"]


@pytest.mark.parametrize("encoding", ["zstd", "gzip"])
def test_a_bomb_never_holds_much_more_than_the_limit(encoding: str) -> None:
    bomb = _zero_bomb(encoding, 64 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(HTTPError) as caught:
            decode_body(encoding, bomb, 1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.status == 413
    assert peak < 8 << 20, f"peak {peak} bytes while refusing a 64 MiB bomb at a 1 MiB limit"


def test_unknown_encoding_is_415_and_corrupt_data_400(url: str) -> None:
    r = httpx.post(f"{url}/v1/responses", content=BODY,
                   headers={"content-type": "application/json", "content-encoding": "br"}, timeout=20)
    assert r.status_code == 415 and "'br'" in r.json()["error"]["message"]
    r = httpx.post(f"{url}/v1/responses", content=b"not gzip at all",
                   headers={"content-type": "application/json", "content-encoding": "gzip"}, timeout=20)
    assert r.status_code == 400 and "gzip" in r.json()["error"]["message"]
    r = httpx.post(f"{url}/v1/responses", content=gzip.compress(BODY)[:-12],
                   headers={"content-type": "application/json", "content-encoding": "gzip"}, timeout=20)
    assert r.status_code == 400


def test_a_large_limit_decodes_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a body limit above 1 MiB the inflating runs in a worker thread (the loop keeps serving meanwhile)."""
    import asyncio
    import threading

    from respstream.server.http import body_encoding

    threads: list[str] = []
    real = body_encoding.decode_body

    def spy(encoding: str | None, data: bytes, limit: int) -> bytes:
        threads.append(threading.current_thread().name)
        return real(encoding, data, limit)

    monkeypatch.setattr(body_encoding, "decode_body", spy)  # a spy: the real decoder still does the work
    small = asyncio.run(body_encoding.decoded_body("gzip", gzip.compress(BODY), 1 << 20))
    large = asyncio.run(body_encoding.decoded_body("gzip", gzip.compress(BODY), 64 << 20))
    assert small == large == BODY
    assert threads[0] == "MainThread" and threads[1] != "MainThread"
