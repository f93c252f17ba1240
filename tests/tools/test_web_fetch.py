"""web_fetch: address policy after DNS and on every redirect hop; size/type limits; HTML to text."""

from __future__ import annotations

import ipaddress

import pytest

from respstream.server.tools import ToolRegistry
from respstream.server.tools.html_text import html_to_text
from respstream.server.tools.netguard import AddressPolicy, is_public_address

from .conftest import LoopbackServer

ADDRESSES = [
    ("8.8.8.8", True),
    ("2606:4700:4700::1111", True),
    ("127.0.0.1", False),
    ("127.8.9.10", False),
    ("10.0.0.1", False),
    ("10.255.255.254", False),
    ("172.16.5.4", False),
    ("192.168.1.1", False),
    ("169.254.169.254", False),
    ("100.64.0.1", False),
    ("0.0.0.0", False),
    ("224.0.0.1", False),
    ("255.255.255.255", False),
    ("::1", False),
    ("::", False),
    ("fe80::1", False),
    ("fc00::1", False),
    ("fd12:3456::1", False),
    ("ff02::1", False),
    ("::ffff:127.0.0.1", False),
    ("::ffff:169.254.169.254", False),
    ("::ffff:8.8.8.8", True),
    ("64:ff9b::a00:1", False),
    ("2002:7f00:1::", False),
]


@pytest.mark.parametrize(("address", "public"), ADDRESSES, ids=[a for a, _ in ADDRESSES])
def test_address_classification(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public


def test_allow_list() -> None:
    policy = AddressPolicy(["127.0.0.1/32", "intranet.example"])
    policy.check("x", [ipaddress.ip_address("127.0.0.1")])
    policy.check("intranet.example", [ipaddress.ip_address("10.1.1.1")])
    with pytest.raises(PermissionError, match=r"resolves to 127\.0\.0\.2"):
        policy.check("y", [ipaddress.ip_address("127.0.0.2")])


def tools(allow: list[str] | None = None, **extra: object) -> ToolRegistry:
    config: dict[str, object] = {"fetch_allow": allow or [], "timeouts": {"web_fetch": 3.0}}
    config.update(extra)
    return ToolRegistry(config)


def args(url: str) -> str:
    import json

    return json.dumps({"url": url})


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/page",
        "http://localhost:{port}/page",
        "http://[::1]:{port}/page",
        "http://10.0.0.1/",
        "http://10.200.3.4:8080/admin",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]:{port}/page",
        "http://0.0.0.0:{port}/page",
        "http://[fd00::1]/",
    ],
)
async def test_refuses_private_targets(web: LoopbackServer, url: str) -> None:
    result = await tools().run("web_fetch", args(url.format(port=web.port)))
    assert result.status == "failed"
    assert "refusing to fetch" in result.output


@pytest.mark.parametrize(
    "target",
    [
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:{port}/page",
        "http://127.0.0.2:{port}/page",
    ],
)
async def test_refuses_redirects_to_private_targets(web: LoopbackServer, target: str) -> None:
    # The loopback test server itself is allowed explicitly; where it redirects to is not.
    from urllib.parse import quote

    url = web.url("/redirect?to=" + quote(target.format(port=web.port), safe=""))
    result = await tools(["127.0.0.1/32"]).run("web_fetch", args(url))
    assert result.status == "failed" and "refusing to fetch" in result.output


async def test_allowed_loopback_page_becomes_text(web: LoopbackServer) -> None:
    result = await tools(["127.0.0.1/32"]).run("web_fetch", args(web.url("/redirect?to=/page")))
    assert result.status == "completed", result.output
    assert "Title: Test Page" in result.output
    assert "Hello\n\nFirst & second paragraph.\n\nThird" in result.output
    assert "alert" not in result.output and "color:red" not in result.output
    assert f"URL: {web.url('/page')}" in result.output


async def test_host_header_keeps_the_name(web: LoopbackServer) -> None:
    result = await tools(["127.0.0.1/32"]).run("web_fetch", args(web.url("/host")))
    assert f"host=127.0.0.1:{web.port}" in result.output


async def test_limits(web: LoopbackServer) -> None:
    small = tools(["127.0.0.1/32"], fetch_max_bytes=1000)
    big = await small.run("web_fetch", args(web.url("/big")))
    assert big.status == "completed" and big.output.endswith("[truncated]") and big.output.count("x") == 1000
    binary = await small.run("web_fetch", args(web.url("/binary")))
    assert binary.status == "failed" and "image/png" in binary.output
    missing = await small.run("web_fetch", args(web.url("/nope")))
    assert missing.status == "failed" and "HTTP 404" in missing.output
    loop = await small.run("web_fetch", args(web.url("/loop")))
    assert loop.status == "failed" and "too many redirects" in loop.output
    scheme = await small.run("web_fetch", args("file:///etc/passwd"))
    assert scheme.status == "failed" and "only http and https" in scheme.output


async def test_timeout(web: LoopbackServer) -> None:
    slow = ToolRegistry({"fetch_allow": ["127.0.0.1/32"], "timeouts": {"web_fetch": 0.3}})
    result = await slow.run("web_fetch", args(web.url("/slow")))
    assert result.status == "failed" and "timed out after 0.3 s" in result.output


def test_html_to_text_handles_broken_markup() -> None:
    title, text = html_to_text("<title>T</title><p>a<b>b</p><script>x<p>c")
    assert title == "T" and text == "ab"
