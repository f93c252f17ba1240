"""docs/compatibility.md's per-provider rows for the prompt-cache fields and compaction, held to the code: a column
that says a field is "not sent" is checked by sending a request with and without the field through the gateway to a
SIMULATED upstream of that kind (the Chat Completions fake, the SIMULATED Anthropic and Gemini providers) and
comparing what each received; the Anthropic column's claims about ``cache_control`` are checked on the body; and every
compaction row names the test file that covers it, which must exist and exercise that upstream kind."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.chat_server import Done, FakeChatCompletionsServer, finish, text
from fakes.server_thread import ServerThread
from providers.anthropic.made_streams import text_stream
from providers.anthropic.simulated_anthropic import Reply, SimulatedAnthropic
from providers.gemini.simulated_gemini import Reply as GeminiReply
from providers.gemini.simulated_gemini import SimulatedGemini, sse_body
from respstream.server.config import Config
from respstream.server.http.app import create_app

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "compatibility.md"
KINDS = ("chat", "anthropic", "gemini")  # the per-provider table's columns after the field's own
CACHE_ROW = "`prompt_cache_options`, `prompt_cache_retention`, `prompt_cache_breakpoint`"
MARKED = {"type": "input_text", "text": "Hi there.", "prompt_cache_breakpoint": {"mode": "explicit"}}
CACHE_FIELDS: dict[str, Any] = {"prompt_cache_options": {"ttl": "12h", "mode": "explicit"},
                                "input": [{"role": "user", "content": [MARKED]}]}
GEMINI_KEY = "test-gemini-key-not-a-secret"


def _provider_rows() -> dict[str, dict[str, str]]:
    """First cell -> {kind: cell} of the "## Per provider" table."""
    text_ = PAGE.read_text(encoding="utf-8")
    section = text_[text_.index("## Per provider"):text_.index("## Endpoints")]
    rows: dict[str, dict[str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 4 and line.startswith("| ") and not line.startswith("|---"):
            rows[cells[0]] = dict(zip(KINDS, cells[1:], strict=True))
    assert rows, "docs/compatibility.md: no per-provider table"
    return rows


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, Any]]:
    """A gateway per upstream kind and what its SIMULATED upstream received: ``kind -> (url, received bodies)``."""
    gemini = SimulatedGemini(api_key=GEMINI_KEY, models=["gemini-2.5-flash"], seed=5)
    with FakeChatCompletionsServer(models=["fake-model"]) as chat, SimulatedAnthropic(["claude-sonnet-4-20250514"]) \
            as anthropic, ServerThread(gemini) as gemini_server:
        configs = {
            "chat": Config(dialect="openai", upstreams=[chat.url], upstream_options={"retries": 0}),
            "anthropic": Config(dialect="openai", upstreams=[f"anthropic+{anthropic.url}"],
                                upstream_options={"retries": 0, "api_key": "sk-ant-test-key"}),
            "gemini": Config(dialect="openai", upstreams=[f"gemini+{gemini_server.url}"],
                             upstream_options={"retries": 0, "api_key": GEMINI_KEY}),
        }
        with ServerThread(create_app(configs["chat"])) as g_chat, \
                ServerThread(create_app(configs["anthropic"])) as g_anthropic, \
                ServerThread(create_app(configs["gemini"])) as g_gemini:
            yield {"chat": (g_chat, chat), "anthropic": (g_anthropic, anthropic), "gemini": (g_gemini, gemini)}


_MODELS = {"chat": "fake-model", "anthropic": "claude-sonnet-4-20250514", "gemini": "gemini-2.5-flash"}


def _sent(upstreams: dict[str, Any], kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """What the ``kind`` upstream received for one response of ``body``."""
    gateway, fake = upstreams[kind]
    if kind == "chat":
        fake.reset()
        fake.script(text("Hello."), finish(), Done())
    elif kind == "anthropic":
        fake.reset()
        fake.replies.append(Reply(text_stream("Hello.")))
    else:
        fake.requests.clear()
        fake.queue(GeminiReply(200, sse_body({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "Hello."}]}, "finishReason": "STOP"}]})))
    answer = httpx.post(f"{gateway.base_url}/responses",
                        json={"model": _MODELS[kind], "stream": False, **body}, timeout=30)
    assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
    if kind == "chat":
        return dict(fake.requests[-1])
    if kind == "anthropic":
        assert fake.problems == []
        return dict(fake.requests[-1].body)
    return dict(fake.requests[-1][1])


@pytest.mark.parametrize("kind", KINDS)
def test_a_not_sent_cache_column_sends_the_same_body(upstreams: dict[str, Any], kind: str) -> None:
    cell = _provider_rows()[CACHE_ROW][kind]
    plain = {"instructions": "Be brief.", "input": [{"role": "user", "content": [{"type": "input_text",
                                                                                    "text": "Hi there."}]}]}
    without = _sent(upstreams, kind, plain)
    for fields in ({**plain, **CACHE_FIELDS}, {**plain, "prompt_cache_retention": "24h"}):
        with_fields = _sent(upstreams, kind, fields)
        if cell.startswith("not sent"):
            assert with_fields == without, f"docs say {kind} is not sent {sorted(fields)}, but it was"
        else:  # a column that claims a mapping must show in the body
            assert with_fields != without, f"docs say {kind} maps {sorted(fields)} ({cell!r}), but nothing changed"


def test_anthropic_cache_control_follows_the_cache_fields(upstreams: dict[str, Any]) -> None:
    cell = _provider_rows()[CACHE_ROW]["anthropic"]
    assert "`mode: explicit` writes only the client's breakpoints" in cell and '`ttl: "1h"`' in cell
    # explicit mode, 12h: only the client's breakpoint, one hour (the system block is not marked)
    sent = _sent(upstreams, "anthropic", {**CACHE_FIELDS, "instructions": "Be brief.", "prompt_cache_key": "k-1"})
    assert sent["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert re.findall(r"'cache_control': (\{[^}]*\})", repr(sent)) == ["{'type': 'ephemeral', 'ttl': '1h'}"]
    # prompt_cache_key alone: the automatic ones, Anthropic's default lifetime
    plain = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi there."}]}]}
    sent = _sent(upstreams, "anthropic", {**plain, "instructions": "Be brief.", "prompt_cache_key": "k-1"})
    assert re.findall(r"'cache_control': (\{[^}]*\})", repr(sent)) == ["{'type': 'ephemeral'}"]
    assert re.findall(r"'cache_control'", repr(_sent(upstreams, "anthropic", plain))) == []


@pytest.mark.parametrize("row", ["`context_management` past `compact_threshold`", "`compaction_trigger` input item",
                                 "`compaction` input item", "`POST /v1/responses/compact`"])
def test_every_compaction_row_has_a_cell_per_kind_and_its_tests_exist(row: str) -> None:
    cells = _provider_rows()[row]
    assert all(cells[kind] for kind in KINDS), cells
    page = PAGE.read_text(encoding="utf-8")
    named = {"anthropic": ["tests/providers/anthropic/test_compaction.py"],
             "gemini": ["tests/providers/gemini/test_compaction.py"],
             "chat": ["tests/server/test_context_management.py", "tests/server/test_compaction_cap.py"]}
    needle = {"context_management": "context_management", "compaction_trigger": "compaction_trigger",
              "compaction` input": "decode_compaction", "compact`": "/responses/compact"}
    key = next(k for k in needle if k in row)
    for kind, paths in named.items():
        for path in paths:
            assert f"`{path}`" in page, f"docs/compatibility.md does not name {path}"
        sources = [(ROOT / path).read_text(encoding="utf-8") for path in paths]
        assert any(needle[key] in source for source in sources), f"{paths} do not exercise the {row} row ({kind})"
