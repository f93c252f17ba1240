"""Fuzzing what issue 13 hardened: Host / Origin / Content-Type headers and resume cursors against the HTTP API
(never a 5xx, always the error envelope), and the linear text scanners against the regexes they replaced (the same
answers on small inputs, where the old regexes are still fast) and against hostile shapes (no exception)."""

from __future__ import annotations

import re

import httpx
from hypothesis import given
from hypothesis import strategies as st

from respstream.server.responses.rewrite import _json_value_end, normalise_whitespace, strip_tool_markup
from respstream.server.routing.url_scan import find_url
from respstream.server.tools.html_text import html_to_text

from .test_http_api import FUZZ, assert_envelope

# Header values as they can be on the wire: printable ASCII without leading or trailing spaces.
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60).map(str.strip)


@FUZZ
@given(host=HEADER_TEXT, origin=st.none() | HEADER_TEXT, ctype=st.none() | HEADER_TEXT,
       method=st.sampled_from(["GET", "POST", "DELETE"]))
def test_host_origin_content_type(open_gateway: tuple[str, httpx.Client], host: str, origin: str | None,
                                  ctype: str | None, method: str) -> None:
    _, client = open_gateway
    headers = {"host": host or "127.0.0.1"}  # an empty Host is sent as 127.0.0.1
    if origin is not None:
        headers["origin"] = origin
    if ctype is not None:
        headers["content-type"] = ctype
    path = "/v1/responses" if method == "POST" else "/v1/responses/resp_x"
    response = client.request(method, path, content=b'{"input": "x", "stream": false}' if method == "POST" else None,
                              headers=headers)
    assert_envelope(response)


@FUZZ
@given(cursor=st.integers(-(2**80), 2**80).map(str) | HEADER_TEXT)
def test_resume_cursors(open_gateway: tuple[str, httpx.Client], cursor: str) -> None:
    _, client = open_gateway
    rid = client.post("/v1/responses", json={"input": "x", "stream": False}).json()["id"]
    assert_envelope(client.get(f"/v1/responses/{rid}", params={"stream": "true", "starting_after": cursor}))
    header = cursor.strip()  # a header value cannot start or end with spaces on the wire
    assert_envelope(client.get(f"/v1/responses/{rid}", params={"stream": "true"}, headers={"last-event-id": header}))


_OLD_URL = re.compile(r"\bhttps?://\S+|\bwww\.\S+\.\w+", re.IGNORECASE)
_OLD_TAGGED = re.compile(
    r"<tool_call>.*?(?:</tool_call>|\Z)|<function=[^>]*>.*?(?:</function>|\Z)|<tool_calls?>.*?(?:</tool_calls?>|\Z)",
    re.DOTALL)
_OLD_PREFIXED = re.compile(r"\[TOOL_CALLS\]|<\|tool_call\|>|<\|python_tag\|>|<\|tool_calls_section_begin\|>")
_OLD_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)


def _old_strip(text: str) -> str:
    if "<" not in text and "[TOOL_CALLS]" not in text:
        return text
    text = _OLD_TAGGED.sub("", text)
    while (match := _OLD_PREFIXED.search(text)) is not None:
        text = text[: match.start()] + text[_json_value_end(text, match.end()) :]
    return text


def _old_whitespace(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", _OLD_TRAILING.sub("", text.replace("\r\n", "\n"))).strip()


PIECES = st.lists(st.sampled_from([
    "www.", "http://", "HTTPS://", ".", "a", "-", " ", "\n", "\t", "\r\n", "é", "_", "(", "1", "<tool_call>",
    "</tool_call>", "<tool_calls>", "</tool_calls>", "<function=f>", "<function=", "</function>", ">", "<",
    "[TOOL_CALLS]", "<|python_tag|>", "{", "}", "[", "]", '"', "<a ", "<p>", "</p>", "<!--", "-->", "<script>",
    "</script>", "&amp;", "<title>", "</title>", "'",
]), max_size=14).map("".join)


@FUZZ
@given(text=PIECES)
def test_linear_scanners_match_the_regexes_they_replaced(text: str) -> None:
    old = _OLD_URL.search(text)
    assert find_url(text) == (old.group(0) if old else None)
    assert strip_tool_markup(text) == _old_strip(text)
    assert normalise_whitespace(text) == _old_whitespace(text)
    title, body = html_to_text(text)
    assert isinstance(title, str) and isinstance(body, str)
