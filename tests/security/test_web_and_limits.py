"""Items 13-17 and 21 (stream) of issue 13: Host/Origin checks on the open gateway, rate limits on the real peer
and on wrong keys, huge resume cursors, security headers and /metrics auth, the IPv6 special ranges in netguard.

Real gateway apps over loopback (in-process uvicorn, or a ``respstream serve`` subprocess where the uvicorn options
of ``serve`` matter); the model is the SIMULATED scripted upstream."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from respstream.cli import main
from respstream.server.http.web_security import PLAYGROUND_CSP
from respstream.server.tools.netguard import is_public_address
from server.helpers import ServerThread, make_app

from .gateway import Gateway


@pytest.fixture(scope="module")
def open_gateway() -> Iterator[str]:
    with ServerThread(make_app()) as srv:
        yield srv.url


# -- 13: cross-origin writes and DNS rebinding on the open gateway ------------------------------------------------

def test_cross_origin_simple_post_is_refused(open_gateway: str) -> None:
    # What a page on another origin can send without a preflight: text/plain, or no Content-Type at all.
    for headers in ({"origin": "http://evil.example", "content-type": "text/plain"},
                    {"origin": "http://evil.example"}):
        r = httpx.post(f"{open_gateway}/v1/responses", content=b'{"input": "x", "stream": false}', headers=headers)
        assert r.status_code == 403 and r.json()["error"]["code"] == "cross_origin_request", r.text
    no_type = httpx.post(f"{open_gateway}/v1/responses", content=b'{"input": "x", "stream": false}',
                         headers={"content-type": ""})
    assert no_type.status_code == 415, no_type.text


def test_same_origin_and_non_browser_posts_work(open_gateway: str) -> None:
    same = httpx.post(f"{open_gateway}/v1/responses", json={"input": "x", "stream": False},
                      headers={"origin": open_gateway})
    assert same.status_code == 200, same.text
    assert httpx.post(f"{open_gateway}/v1/responses", json={"input": "x", "stream": False}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "10.0.0.5", "127.0.0.1.evil.example"])
def test_rebound_host_names_are_refused(open_gateway: str, host: str) -> None:
    r = httpx.get(f"{open_gateway}/v1/models", headers={"host": host})
    assert r.status_code == 421 and r.json()["error"]["code"] == "host_not_allowed", r.text
    assert httpx.get(f"{open_gateway}/healthz", headers={"host": host}).status_code == 421


@pytest.mark.parametrize("host", ["localhost:1234", "127.0.0.1", "[::1]:80", "app.localhost"])
def test_loopback_host_names_are_served(open_gateway: str, host: str) -> None:
    assert httpx.get(f"{open_gateway}/v1/models", headers={"host": host}).status_code == 200


# -- 14: rate limits key on the real peer; wrong keys are limited -------------------------------------------------

def test_spoofed_forwarded_for_does_not_reset_the_rate_limit(tmp_path: Path) -> None:
    with Gateway(tmp_path, rate_limit_per_minute=2) as gw:
        codes = [httpx.post(f"{gw.url}/v1/responses", json={"input": "x", "stream": False}, timeout=10,
                            headers={"x-forwarded-for": f"203.0.113.{i}"}).status_code for i in range(4)]
    assert codes[:2] == [200, 200] and codes[2:] == [429, 429], codes


def test_wrong_keys_are_limited_per_address(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys.json"
    assert main(["keys", "--file", str(path), "create", "--json"]) == 0
    key = json.loads(capsys.readouterr().out)["key"]
    with ServerThread(make_app(keys_file=str(path), auth_failures_per_minute=5, auth_failures_burst=5)) as srv:
        codes = [httpx.get(f"{srv.url}/v1/models", headers={"authorization": f"Bearer rsk_guess{i}"}).status_code
                 for i in range(8)]
        assert codes[:5] == [401] * 5 and set(codes[5:]) == {429}, codes
        limited = httpx.get(f"{srv.url}/v1/models", headers={"authorization": "Bearer rsk_more"})
        assert limited.json()["error"]["code"] == "too_many_failed_auth" and "retry-after" in limited.headers
        # The right key still works: only failures spend the budget.
        assert httpx.get(f"{srv.url}/v1/models", headers={"authorization": f"Bearer {key}"}).status_code == 200


# -- 15: resume cursors past 2^63 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_huge_resume_cursor_is_a_clear_400(tmp_path: Path, store: str) -> None:
    url = "memory" if store == "memory" else f"sqlite:///{tmp_path / 'r.db'}"
    with ServerThread(make_app(store=url, background_store="memory")) as srv:
        rid = httpx.post(f"{srv.url}/v1/responses", json={"input": "x", "stream": False}).json()["id"]
        for params, headers in (({"stream": "true", "starting_after": str(2**63 + 5)}, {}),
                                ({"stream": "true"}, {"last-event-id": str(2**64)}),
                                ({"stream": "true", "starting_after": "9" * 5000}, {})):
            r = httpx.get(f"{srv.url}/v1/responses/{rid}", params=params, headers=headers)
            assert r.status_code == 400, r.text
            assert r.json()["error"]["code"] == "invalid_value" and "between -1 and" in r.json()["error"]["message"]


# -- 16: security headers on the playground, /metrics behind the key ----------------------------------------------

def test_playground_has_security_headers(open_gateway: str) -> None:
    page = httpx.get(f"{open_gateway}/")
    assert page.headers["content-security-policy"] == PLAYGROUND_CSP
    assert "frame-ancestors 'none'" in PLAYGROUND_CSP and "script-src 'self'" in PLAYGROUND_CSP
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    if page.status_code == 200:  # the page itself needs nothing the CSP forbids: no inline script or style
        assert "<script>" not in page.text and "<style" not in page.text and " on" + "click=" not in page.text
    api = httpx.get(f"{open_gateway}/v1/models")
    assert api.headers["x-content-type-options"] == "nosniff"


def test_metrics_need_a_key_on_a_keyed_gateway(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys.json"
    assert main(["keys", "--file", str(path), "create", "--json"]) == 0
    key = json.loads(capsys.readouterr().out)["key"]
    with ServerThread(make_app(keys_file=str(path))) as srv:
        assert httpx.get(f"{srv.url}/metrics").status_code == 401
        assert httpx.get(f"{srv.url}/metrics", headers={"authorization": f"Bearer {key}"}).status_code == 200
        assert httpx.get(f"{srv.url}/healthz").status_code == 200  # health stays open for probes


# -- 17: the IPv6 special ranges --------------------------------------------------------------------------------

@pytest.mark.parametrize("address", [
    "fec0::1", "fefe::1",  # site-local (deprecated, still routed internally)
    "fc00::1", "fdff:ffff::1",  # unique local
    "::10.0.0.1", "::127.0.0.1",  # IPv4-compatible
    "::ffff:192.168.0.1",  # IPv4-mapped
    "2002:c0a8:0101::1",  # 6to4 of 192.168.1.1
    "2001:0:4136:e378:8000:63bf:3f57:fefe",  # Teredo with 192.168.1.1 (obfuscated client address)
    "64:ff9b::7f00:1", "64:ff9b:1::a00:1",  # NAT64 (well-known and local-use)
    "ff05::2", "ff0e::1",  # multicast
    "2001:db8::1", "3fff::1", "100::1",  # documentation, discard
    "192.88.99.1", "198.18.0.1", "240.0.0.1",  # IPv4 special-purpose
])
def test_special_addresses_are_not_public(address: str) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is False


# -- 21: the stream command's idle timeout ----------------------------------------------------------------------

@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_stream_rejects_a_bad_idle_timeout_in_one_line(value: str) -> None:
    done = subprocess.run([sys.executable, "-m", "respstream", "stream", "hi", "--idle-timeout", value,
                           "--url", "http://127.0.0.1:9/v1"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"respstream stream: --idle-timeout must be a positive number of seconds, "
                                   f"not {float(value):g}"), done.stderr


# -- 11: background generations are bounded ---------------------------------------------------------------------

def test_background_generations_are_capped(tmp_path: Path) -> None:
    """At c1c983b ``max_concurrent_streams = 5`` still let 300 background responses run at once."""
    with Gateway(tmp_path, upstreams=["scripted:50?delay_ms=100"], max_background_responses=3,
                 max_concurrent_streams=5) as gw:
        replies = [httpx.post(f"{gw.url}/v1/responses", json={"input": "x", "background": True, "stream": False},
                              timeout=10) for _ in range(6)]
    codes = [r.status_code for r in replies]
    assert codes[:3] == [200] * 3 and codes[3:] == [429] * 3, codes
    error = replies[-1].json()["error"]
    assert error["code"] == "too_many_background_responses" and "max_background_responses" in error["message"]
    assert "retry-after" in replies[-1].headers


# -- 20: a prompt over the model's context is refused before the stream --------------------------------------------

def test_prompt_over_the_context_is_a_400_before_the_stream() -> None:
    from respstream.server.upstream.scripted import ScriptedUpstream

    upstream = ScriptedUpstream(4, name="small", models=["scripted-a"])
    upstream.context_tokens = 1000  # type: ignore[attr-defined]  # as the embedded model declares its n_ctx
    with ServerThread(make_app(upstreams={"scripted-a": upstream})) as srv:
        over = httpx.post(f"{srv.url}/v1/responses", json={"input": "word " * 2000, "stream": True})
        fits = httpx.post(f"{srv.url}/v1/responses", json={"input": "word " * 100, "stream": False})
    assert over.status_code == 400 and over.headers["content-type"].startswith("application/json"), over.text[:200]
    error = over.json()["error"]
    assert error["code"] == "context_length_exceeded" and "1000" in error["message"]
    assert "upstream_options.n_ctx" in error["message"]
    assert fits.status_code == 200
