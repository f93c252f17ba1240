"""docs/compatibility.md is checked against the code: a row that claims something the gateway does not do fails here.

Every row of the page's request-field, tool-type, input-item and content-part tables says whether the thing is
honoured ("forwarded" / "gateway") or "refused" (400 ``unsupported_parameter`` naming it), or both (some values
honoured, others refused). Each claim needs an example below, and the example is sent to a real gateway (the app
under uvicorn on loopback) in front of the SIMULATED in-process scripted upstream: an honoured example must be
answered 200, a refused one 400 ``unsupported_parameter`` with the ``param`` given. A row whose decision has no
matching example, or an example whose row says otherwise, fails too, so a row cannot be flipped without the gateway
agreeing. The lists the page must cover (tool, item and part types, endpoints) are read from the code itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Mount, Route, WebSocketRoute

from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.events.client_tool_kinds import CALL_KINDS, CLIENT_KINDS, OUTPUT_KINDS
from respstream.server.http.app import create_app
from respstream.server.inputs import request_input, request_tools
from respstream.server.inputs.compaction_item import encode_compaction
from respstream.server.inputs.input_parts import MEDIA_PART_TYPES
from respstream.server.inputs.request_tools import SERVER_TOOL_TYPES

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "compatibility.md"
CONFORMANCE = ROOT / "docs" / "conformance.md"
DECISIONS = {"forwarded", "gateway", "refused"}
HONOURED = {"forwarded", "gateway"}

Body = dict[str, Any] | Callable[[httpx.Client], dict[str, Any]]
PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJ"
       "RU5ErkJggg==")
WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}


@dataclass(frozen=True)
class Claim:
    """What the test knows how to show for one row: a body the gateway takes, and/or one it refuses (+ its param)."""

    ok: Body | None = None
    refused: tuple[Body, str] | None = None
    skip: str | None = None  # why the live check cannot run on this branch (names the branch that brings the code)


def _prior_response(client: httpx.Client) -> dict[str, Any]:
    answer = client.post("/v1/responses", json={"input": "Remember: cobalt.", "stream": False})
    assert answer.status_code == 200, answer.text
    return {"previous_response_id": answer.json()["id"]}


def _conversation(client: httpx.Client) -> dict[str, Any]:
    made = client.post("/v1/conversations", json={})
    assert made.status_code == 200, made.text
    return {"conversation": made.json()["id"]}


SCHEMA_FORMAT = {"type": "json_schema", "name": "person", "schema": {"type": "object"}}
FIELDS: dict[str, Claim] = {
    "model": Claim(ok={"model": "scripted"}),
    "input": Claim(ok={"input": [{"role": "user", "content": "Say hi."}]},
                   refused=({"input": [{"type": "computer_call", "id": "c"}]}, "input[0].type")),
    "previous_response_id": Claim(ok=_prior_response),
    "include": Claim(ok={"include": ["message.output_text.logprobs", "reasoning.encrypted_content"]},
                     refused=({"include": ["code_interpreter_call.outputs"]}, "include[0]")),
    "tools": Claim(ok={"tools": [WEATHER, {"type": "calculator"}]},
                   refused=({"tools": [{"type": "file_search"}]}, "tools[0].type")),
    "tool_choice": Claim(ok={"tools": [WEATHER], "tool_choice": {"type": "function", "name": "get_weather"}}),
    "metadata": Claim(ok={"metadata": {"team": "docs"}}),
    "text": Claim(ok={"text": {"verbosity": "low"}}, refused=({"text": {"colour": "red"}}, "text.colour")),
    "text.format": Claim(ok={"text": {"format": SCHEMA_FORMAT}},
                         refused=({"text": {"format": {**SCHEMA_FORMAT, "colour": 1}}}, "text.format.colour")),
    "text.verbosity": Claim(ok={"text": {"verbosity": "high"}}),
    "temperature": Claim(ok={"temperature": 0.2}),
    "top_p": Claim(ok={"top_p": 0.5}),
    "presence_penalty": Claim(ok={"presence_penalty": 0.5}),
    "frequency_penalty": Claim(ok={"frequency_penalty": 0.5}),
    "parallel_tool_calls": Claim(ok={"tools": [WEATHER], "parallel_tool_calls": False}),
    "stream": Claim(ok={"stream": True}),
    "stream_options": Claim(ok={"stream": True, "stream_options": {"include_obfuscation": False}},
                            refused=({"stream": True, "stream_options": {"chunk_size": 3}},
                                     "stream_options.chunk_size")),
    "stream_options.include_obfuscation": Claim(
        ok={"stream": True, "stream_options": {"include_obfuscation": False}},
        refused=({"stream": True, "stream_options": {"include_obfuscation": True}},
                 "stream_options.include_obfuscation")),
    "background": Claim(ok={"background": True}),
    "background_options": Claim(ok={"background": True, "background_options": {"completion_window": "2h"}},
                                refused=({"background": True, "background_options": {"continuation_id": "c1"}},
                                         "background_options.continuation_id")),
    "max_output_tokens": Claim(ok={"max_output_tokens": 16}),
    "max_tool_calls": Claim(ok={"max_tool_calls": 1}),
    "reasoning": Claim(ok={"reasoning": {"effort": "low"}},
                       refused=({"reasoning": {"depth": 3}}, "reasoning.depth")),
    "reasoning.effort": Claim(ok={"reasoning": {"effort": "high"}}),
    "reasoning.summary": Claim(ok={"reasoning": {"summary": "auto"}},
                               refused=({"reasoning": {"summary": "detailed"}}, "reasoning.summary")),
    "safety_identifier": Claim(ok={"safety_identifier": "user-7"}),
    "prompt_cache_key": Claim(ok={"prompt_cache_key": "chat-7"}),
    "truncation": Claim(ok={"truncation": "auto"}),
    "instructions": Claim(ok={"instructions": "Be brief."}),
    "store": Claim(ok={"store": False}),
    "service_tier": Claim(ok={"service_tier": "flex"}),
    "top_logprobs": Claim(ok={"top_logprobs": 2}),
    "conversation": Claim(ok=_conversation),
    "conversation_id": Claim(ok={"conversation_id": "5f0c3c1e-8d4e-4b7a-9a51-6f1d2a3b4c5d"}),
    "user": Claim(ok={"user": "user-7"}),
    "prompt": Claim(refused=({"prompt": {"id": "pmpt_1"}}, "prompt")),
    "prompt_cache_retention": Claim(ok={"prompt_cache_retention": "24h"}),
    "response_format": Claim(refused=({"response_format": {"type": "json_object"}}, "response_format")),
    "project_id": Claim(ok={"project_id": "0b7e1c9a-3f2d-4e5b-8a6c-1d2e3f4a5b6c"}),
    "client_metadata": Claim(ok={"client_metadata": {"originator": "codex_exec"}}),
    "reasoning.context": Claim(ok={"reasoning": {"context": "all_turns"}}),
    # late-2026 fields
    "context_management": Claim(ok={"context_management": [{"type": "compaction", "compact_threshold": 1000}]},
                                refused=({"context_management": [{"type": "truncate"}]},
                                         "context_management[0].type")),
    "prompt_cache_options": Claim(ok={"prompt_cache_options": {"ttl": "30m", "mode": "explicit"}},
                                  refused=({"prompt_cache_options": {"scope": "org"}}, "prompt_cache_options.scope")),
    "input[].content[].prompt_cache_breakpoint": Claim(
        ok={"input": [{"role": "user", "content": [
            {"type": "input_text", "text": "Long instructions.", "prompt_cache_breakpoint": {"mode": "explicit"}}]}]},
        refused=({"input": [{"role": "user", "content": [
            {"type": "input_text", "text": "x", "prompt_cache_breakpoint": {"size": 1}}]}]},
            "input[0].content[0].prompt_cache_breakpoint.size")),
    "access_programs": Claim(ok={"access_programs": {"cyber": "standard"}},
                             refused=({"access_programs": {"cyber": "daybreak_red"}}, "access_programs.cyber")),
    "moderation": Claim(refused=({"moderation": {"model": "omni-moderation-latest"}}, "moderation")),
    "multi_agent": Claim(refused=({"multi_agent": {"enabled": True}}, "multi_agent")),
    "image": Claim(refused=({"image": {"context_compression": "auto"}}, "image")),
}


def _tool(kind: str) -> Body:
    extra: dict[str, dict[str, Any]] = {
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
        # A loopback server_url: the gateway takes the tool and refuses to connect (network policy), in the response.
        "mcp": {"server_label": "notes", "server_url": "http://127.0.0.1:9/mcp", "require_approval": "never"},
        "custom": {"name": "run_sql", "description": "One SQL statement."},
        "namespace": {"name": "crm", "description": "The CRM.", "tools": [
            {"type": "function", "name": "find", "parameters": {"type": "object", "properties": {}}}]},
    }
    return {"tools": [{"type": kind, **extra.get(kind, {})}]}


def _item(item: dict[str, Any]) -> Body:
    return {"input": [{"role": "user", "content": "Say hi."}, item]}


def _part(part: dict[str, Any]) -> Body:
    return {"input": [{"role": "user", "content": [{"type": "input_text", "text": "Look."}, part]}]}


ITEMS: dict[str, Claim] = {
    "message": Claim(ok=_item({"type": "message", "role": "developer", "content": "Be brief."})),
    "function_call": Claim(ok=_item({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"})),
    "function_call_output": Claim(ok={"input": [
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"}]}),
    "reasoning": Claim(ok=_item({"type": "reasoning", "id": "rs_1", "summary": []})),
    "compaction": Claim(ok=_item({"type": "compaction", "id": "cmp_1",
                                  "encrypted_content": encode_compaction("We spoke of cobalt.", "scripted")})),
    "mcp_call": Claim(ok=_item({"type": "mcp_call", "id": "mcp_1", "server_label": "notes", "name": "find",
                                "arguments": "{}", "output": "found"})),
    "mcp_approval_request": Claim(ok=_item({"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "notes",
                                            "name": "find", "arguments": "{}"})),
    "mcp_approval_response": Claim(ok={"input": [
        {"role": "user", "content": "Say hi."},
        {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "notes", "name": "find", "arguments": "{}"},
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": False}]}),
    "web_search_call": Claim(ok=_item({"type": "web_search_call", "id": "ws_1", "status": "completed",
                                       "action": {"type": "search", "query": "cobalt"}})),
    "file_search_call": Claim(ok=_item({"type": "file_search_call", "id": "fs_1", "status": "completed",
                                        "queries": ["cobalt"]})),
    "mcp_list_tools": Claim(ok=_item({"type": "mcp_list_tools", "id": "ml_1", "server_label": "notes",
                                      "tools": []})),
    "item_reference": Claim(ok=_item({"type": "item_reference", "id": "msg_1"})),
    "compaction_trigger": Claim(ok={"input": [{"role": "user", "content": "Remember: cobalt."},
                                              {"type": "compaction_trigger"}]}),
    "computer_call": Claim(refused=(_item({"type": "computer_call", "id": "cc_1"}), "input[1].type")),
    "tool_search_call": Claim(ok=_item({"type": "tool_search_call", "id": "ts_1", "status": "completed"})),
    "tool_search_output": Claim(ok=_item({"type": "tool_search_output", "id": "tso_1", "tools": []})),
    "custom_tool_call": Claim(ok=_item({"type": "custom_tool_call", "call_id": "c2", "name": "run_sql",
                                        "input": "SELECT 1"})),
    "custom_tool_call_output": Claim(ok={"input": [
        {"type": "custom_tool_call", "call_id": "c2", "name": "run_sql", "input": "SELECT 1"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "1"}]}),
    "shell_call": Claim(ok=_item({"type": "shell_call", "call_id": "c3", "action": {"commands": ["ls"]}})),
    "shell_call_output": Claim(ok={"input": [
        {"type": "shell_call", "call_id": "c3", "action": {"commands": ["ls"]}},
        {"type": "shell_call_output", "call_id": "c3",
         "output": [{"stdout": "a.txt", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}]}),
    "local_shell_call": Claim(ok=_item({"type": "local_shell_call", "call_id": "c4",
                                        "action": {"type": "exec", "command": ["ls"], "env": {}}})),
    "local_shell_call_output": Claim(ok={"input": [
        {"type": "local_shell_call", "call_id": "c4", "action": {"type": "exec", "command": ["ls"], "env": {}}},
        {"type": "local_shell_call_output", "id": "c4", "output": "a.txt"}]}),
    "apply_patch_call": Claim(ok=_item({"type": "apply_patch_call", "call_id": "c5", "operation": {
        "type": "update_file", "path": "a.txt", "diff": "@@\n-a\n+b\n"}})),
    "apply_patch_call_output": Claim(ok={"input": [
        {"type": "apply_patch_call", "call_id": "c5",
         "operation": {"type": "update_file", "path": "a.txt", "diff": "@@\n-a\n+b\n"}},
        {"type": "apply_patch_call_output", "call_id": "c5", "status": "completed"}]}),
}
PARTS: dict[str, Claim] = {
    "input_text": Claim(ok=_part({"type": "input_text", "text": "And this."})),
    "output_text": Claim(ok={"input": [{"role": "assistant", "content": [{"type": "output_text", "text": "Hi."}]},
                                       {"role": "user", "content": "Again."}]}),
    "text": Claim(ok=_part({"type": "text", "text": "And this."})),
    "refusal": Claim(ok={"input": [{"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
                                   {"role": "user", "content": "Please."}]}),
    "input_image": Claim(ok=_part({"type": "input_image", "image_url": PNG, "detail": "low"}),
                         refused=(_part({"type": "input_image", "file_id": "file-1"}),
                                  "input[0].content[1].file_id")),
    "input_file": Claim(ok=_part({"type": "input_file", "filename": "note.txt",
                                  "file_data": "data:text/plain;base64,aGVsbG8="}),
                        refused=(_part({"type": "input_file", "file_id": "file-1"}), "input[0].content[1].file_id")),
    "input_audio": Claim(refused=(_part({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}),
                                  "input[0].content[1].type")),
    "image_url": Claim(refused=(_part({"type": "image_url", "image_url": {"url": PNG}}),
                                "input[0].content[1].type")),
    "file": Claim(refused=(_part({"type": "file", "file": {"file_data": "aGVsbG8="}}), "input[0].content[1].type")),
}
# The parser's own (private) lists are read on purpose: the page must cover what the code knows.
REFUSED_TOOL_TYPES = frozenset(request_tools._UNSUPPORTED_TOOL_TYPES)
TOOLS: dict[str, Claim] = {
    kind: Claim(refused=(_tool(kind), "tools[0].type")) if kind in REFUSED_TOOL_TYPES else Claim(ok=_tool(kind))
    for kind in sorted({"function", "mcp", *SERVER_TOOL_TYPES, *REFUSED_TOOL_TYPES, *CLIENT_KINDS})
}
TABLES: dict[str, tuple[tuple[str, ...], dict[str, Claim]]] = {
    "fields": (("### Open Responses `CreateResponseBody`", "### OpenAI Responses fields beyond the spec",
                "### Late-2026 request fields"), FIELDS),
    "tools": (("### Tool types",), TOOLS),
    "items": (("### Input items",), ITEMS),
    "parts": (("### Content parts",), PARTS),
}


# -- reading the page ----------------------------------------------------------------------------------------------
def _section(heading: str) -> str:
    """The page's text from ``heading`` to the next heading of the same or a higher level."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(heading)
    level = heading.split(" ", 1)[0]
    stop = re.compile(rf"^#{{1,{len(level)}}} ", re.MULTILINE)
    after = stop.search(text, start + len(heading))
    return text[start:after.start() if after else len(text)]


def _rows(headings: tuple[str, ...]) -> dict[str, set[str]]:
    """``name -> decisions`` for every table row of the sections whose second column is a decision."""
    rows: dict[str, set[str]] = {}
    text = "".join(_section(heading) for heading in headings)
    heading = " + ".join(headings)
    for name, decision in re.findall(r"^\| `([^`]+)` \| ([a-z /]+) \|", text, flags=re.MULTILINE):
        words = {w.strip() for w in decision.split("/")}
        assert words <= DECISIONS, f"docs/compatibility.md row `{name}`: unknown decision {decision!r}"
        assert name not in rows, f"docs/compatibility.md: two rows for `{name}` under {heading!r}"
        rows[name] = words
    assert rows, f"docs/compatibility.md: no rows under {heading!r}"
    return rows


def _claims() -> list[tuple[str, str, str]]:
    """(table, row, "ok" | "refused") for every claim the page makes."""
    found = []
    for table, (heading, _) in TABLES.items():
        for name, words in _rows(heading).items():
            if words & HONOURED:
                found.append((table, name, "ok"))
            if "refused" in words:
                found.append((table, name, "refused"))
    return found


@pytest.mark.parametrize("table", list(TABLES))
def test_every_row_has_an_example_for_exactly_its_decision(table: str) -> None:
    heading, claims = TABLES[table]
    rows = _rows(heading)
    assert sorted(set(claims) - set(rows)) == [], f"the code has these, docs/compatibility.md has no row ({heading})"
    for name, words in rows.items():
        claim = claims.get(name)
        assert claim is not None, f"row `{name}` ({heading}): no example in this test to check it"
        assert (claim.ok is not None) == bool(words & HONOURED), (
            f"row `{name}` says {sorted(words)}, but the gateway {'honours' if claim.ok else 'does not honour'} it")
        assert (claim.refused is not None) == ("refused" in words), (
            f"row `{name}` says {sorted(words)}, but the gateway {'refuses' if claim.refused else 'never refuses'} it")


def test_every_input_item_type_the_parser_knows_has_a_row() -> None:
    source = Path(request_input.__file__).read_text(encoding="utf-8")
    function = next(n for n in ast.walk(ast.parse(source))
                    if isinstance(n, ast.FunctionDef) and n.name == "parse_input_items")
    handled = {c.comparators[0].value for c in ast.walk(function)
               if isinstance(c, ast.Compare) and isinstance(c.left, ast.Name) and c.left.id == "kind"
               and isinstance(c.comparators[0], ast.Constant)}
    # The client-run kinds are handled by set membership (``kind in CALL_KINDS``), not by a compare the walk sees.
    known = handled | set(request_input._IGNORED_ITEMS) | CALL_KINDS | OUTPUT_KINDS
    assert {"message", "function_call", "compaction"} <= known  # the walk found the parser's branches
    missing = sorted(known - set(_rows(TABLES["items"][0])))
    assert missing == [], f"input item types with no row in docs/compatibility.md: {missing}"


def test_every_content_part_type_the_parser_knows_has_a_row() -> None:
    known = ({"refusal"} | set(request_input._TEXT_PARTS) | set(MEDIA_PART_TYPES)
             | set(request_input._UNSUPPORTED_PARTS))
    missing = sorted(known - set(_rows(TABLES["parts"][0])))
    assert missing == [], f"content part types with no row in docs/compatibility.md: {missing}"


def _served_endpoints() -> set[str]:
    found: set[str] = set()
    for route in create_app(Config(upstreams=["scripted:2"])).routes:
        if isinstance(route, WebSocketRoute):
            found.add(f"GET {route.path} (WebSocket)")
        elif isinstance(route, Route):
            found.update(f"{method} {route.path}" for method in route.methods or () if method != "HEAD")
        elif isinstance(route, Mount):
            found.add(f"GET {route.path}/...")
    return found


def test_the_endpoint_table_is_exactly_the_served_routes() -> None:
    documented = set(re.findall(r"^\| `([A-Z]+ /[^`]*)`( \(WebSocket\))? \|", _section("## Endpoints"),
                                flags=re.MULTILINE))
    documented_names = {path + suffix for path, suffix in documented}
    served = _served_endpoints()
    assert "POST /v1/responses" in served and len(served) > 10
    assert sorted(served - documented_names) == [], "served but not in docs/compatibility.md's endpoint table"
    assert sorted(documented_names - served) == [], "in docs/compatibility.md's endpoint table but not served"


def test_the_compliance_figures_match_the_conformance_table() -> None:
    claim = re.search(r"(\d+)/(\d+) with the SIMULATED scripted upstream, (\d+)/(\d+) with the embedded",
                      PAGE.read_text(encoding="utf-8"))
    assert claim, "docs/compatibility.md no longer states the compliance figures this test checks"
    table = CONFORMANCE.read_text(encoding="utf-8").split("<!-- openresponses-suite:start -->", 1)[1]
    header = next(line for line in table.splitlines() if line.startswith("| test |"))
    passed = next(line for line in table.splitlines() if line.startswith("| **passed** |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    counts = [re.sub(r"[*]", "", c).strip() for c in passed.strip("|").split("|")]
    by_run = dict(zip(columns, counts, strict=True))
    assert by_run["`openresponses` scripted"] == f"{claim[1]} of {claim[2]}"
    assert by_run["`openresponses` embedded"] == f"{claim[3]} of {claim[4]}"
    readme = re.search(r"Open Responses suite: (\d+)/(\d+); (\d+)/(\d+) with the embedded model",
                       (ROOT / "README.md").read_text(encoding="utf-8"))
    assert readme, "README.md no longer states the compliance figures this test checks"
    assert readme.groups() == claim.groups(), "README.md and docs/compatibility.md give different figures"


# -- the claims, against a live gateway ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gateway() -> Iterator[httpx.Client]:
    # The openai dialect: a request without `stream` is answered as JSON; decisions are the same in every dialect.
    app = create_app(Config(dialect="openai", upstreams=["scripted:4"]))
    with ServerThread(app, lifespan="on") as server, httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.mark.parametrize(("table", "name", "kind"), _claims(), ids=lambda v: str(v))
def test_the_row_holds_on_a_live_gateway(gateway: httpx.Client, table: str, name: str, kind: str) -> None:
    claim = TABLES[table][1].get(name)
    assert claim is not None, f"row `{name}`: no example to check it (see the test above)"
    if claim.skip:
        pytest.skip(claim.skip)
    example = claim.ok if kind == "ok" else (claim.refused[0] if claim.refused else None)
    assert example is not None, f"row `{name}` claims {kind}: no such example"
    fields = example(gateway) if callable(example) else example
    body = {"input": "Say hi.", "stream": False, **fields}
    answer = gateway.post("/v1/responses", json=body)
    if kind == "ok":
        assert answer.status_code == 200, f"docs say `{name}` is honoured; the gateway said {answer.text[:300]}"
        return
    assert claim.refused is not None
    error = answer.json().get("error") or {}
    assert (answer.status_code, error.get("code"), error.get("param")) == (
        400, "unsupported_parameter", claim.refused[1]), f"docs say `{name}` is refused; got {answer.text[:300]}"


def _dialect_rows() -> dict[str, str]:
    """dialect -> the claim of the "Which server tools may run" table."""
    rows: dict[str, str] = {}
    for names, claim in re.findall(r"^\| ((?:`[a-z]+`(?:, )?)+) \| (.+) \|$", _section("### Tool types"),
                                   flags=re.MULTILINE):
        for name in re.findall(r"`([a-z]+)`", names):
            rows[name] = claim
    return rows


@pytest.mark.parametrize("dialect", ["platform", "openai", "openresponses"])
def test_the_server_tools_per_dialect_row_holds(dialect: str) -> None:
    claim = _dialect_rows().get(dialect)
    assert claim is not None, f"docs/compatibility.md: no 'which server tools may run' row for {dialect}"
    runs_unlisted = claim.startswith("The seed's fixed server-side catalogue")
    assert runs_unlisted or claim.startswith("Only the hosted tool types the request lists"), claim
    app = create_app(Config(dialect=dialect, upstreams=["scripted:4"]))
    with ServerThread(app, lifespan="on") as server, httpx.Client(base_url=server.url, timeout=30) as client:
        def tool_items(extra: dict[str, Any]) -> list[str]:
            answer = client.post("/v1/responses", headers={"Accept": "application/json"},
                                 json={"input": "What is 17 * 23?", "stream": False, **extra})
            assert answer.status_code == 200, answer.text[:300]
            return [item["type"] for item in answer.json()["output"] if item["type"] != "message"]

        unlisted = tool_items({})
        assert bool(unlisted) == runs_unlisted, f"{dialect}: with no tools listed the gateway ran {unlisted}"
        assert tool_items({"tools": [{"type": "calculator"}]}), f"{dialect}: a listed calculator did not run"
