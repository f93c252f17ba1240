"""Answer quality of `make serve`'s embedded models: a fixed prompt set through the real gateway, per model size.

Usage (from the repository root)::

    .venv/bin/python benchmarks/answer_quality.py [--sizes small,medium,large] [--markdown]

For each size, ``respstream serve --model-size SIZE`` runs in its own process (openai dialect, memory store, the
default configuration otherwise; the grounded prompts list the ``calculator`` and ``current_datetime`` tools, as
that dialect runs only the hosted tools a request names) and gets the prompts below one at a time through
``POST /v1/responses`` (``stream: true``, the respstream client). Scored per prompt, from the assembled stream:

- **grounded** (10: arithmetic and time, English/Dutch/German/French): the final text states the tool's result
  (calculator: the number; current_datetime: the time, see ``responses/grounded_answer.py``). ``model`` counts what the
  model itself streamed (before the gateway's GroundedFacts rewrite), ``final`` what the client ends up with.
- **words & places** (10, issue 31): arithmetic in number words (English/Dutch/German/French: "seven times eight
  plus twelve", "zevenentwintig keer drie"), the time in places named in Dutch/German/French ("Tokio", "Londen",
  "Peking", "Moscou", "Kaapstad") and the weekday there. ``tool`` counts prompts where the gateway ran the right
  tool with the right input (the expression's value, the place's IANA zone); ``model`` / ``final`` as for grounded,
  and the time check now also fails a wrong weekday.
- **facts** (10, two of them Dutch/German): the answer contains the expected word.
- **long** (2 long-answer prompts, no ``max_output_tokens``): the response ends within the default cap
  (``output_tokens <= 1024``); ``repetition`` counts answers the loop guard ended.
- **tool** (5 prompts with a client function tool): the response ends in a ``function_call`` of that tool with
  schema-valid arguments.
- **cited** (3 questions about the gateway's own notes, ``web_search`` over the embedded corpus): ``model`` counts
  answers where the model itself cited a result (a ``url_citation`` whose span lies in the text it streamed, i.e.
  not in the ``Sources:`` line the gateway appends), ``final`` answers with any ``url_citation`` annotation; every
  annotation's span is checked to be inside the final text.

Each size's row is printed as soon as that size is done, so a run cut short by a timeout keeps what it measured.

Peer (the ratio asked of every benchmark here): each size against ``small`` (SmolLM2-135M, the previous default)
run in the same process on the same prompts. Greedy-ish sampling (the embedded defaults: temperature 0.2).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from respstream.client.sync import Client
from respstream.errors import RespstreamError
from respstream.server.responses.grounded_answer import check_calculation, check_datetime
from respstream.server.upstream.embedded.adapter import DEFAULT_MAX_OUTPUT_TOKENS, EmbeddedUpstream
from respstream.server.upstream.tool_schemas import schema_errors

GROUNDED = [
    "What is 17 * 23?", "What is (17 + 25) * 3?", "What is 15% of 80?", "What is the square root of 144?",
    "What is 2^10?", "Wat is 12 keer 12?", "Was ist 7 mal 6?", "What time is it in Amsterdam?",
    "Hoe laat is het in Tokyo?", "Quelle heure est-il à Paris ?",
]  # fmt: skip
# (prompt, expected calculator result or IANA zone)
WORDS_AND_PLACES = [
    ("What is seven times eight plus twelve?", "68"), ("Hoeveel is zevenentwintig keer drie?", "81"),
    ("Was ist sieben mal acht?", "56"), ("Combien font douze fois douze ?", "144"),
    ("Hoe laat is het in Tokio?", "Asia/Tokyo"), ("Hoe laat is het in Londen?", "Europe/London"),
    ("Wie spät ist es in Peking?", "Asia/Shanghai"), ("Quelle heure est-il à Moscou ?", "Europe/Moscow"),
    ("What day of the week is it in Tokyo right now?", "Asia/Tokyo"),
    ("Welke dag is het vandaag in Kaapstad?", "Africa/Johannesburg"),
]  # fmt: skip
FACTS = [
    ("Who wrote Hamlet?", ("shakespeare",)), ("What is the capital of France?", ("paris",)),
    ("What is the largest planet in our solar system?", ("jupiter",)),
    ("What is the chemical symbol of gold?", ("au",)),
    ("Who painted the Mona Lisa?", ("leonardo", "vinci")), ("How many continents are there?", ("7", "seven")),
    ("Who wrote the novel 1984?", ("orwell",)), ("What is the capital of Japan?", ("tokyo",)),
    ("Wat is de hoofdstad van Duitsland?", ("berlijn", "berlin")), ("Wer hat Faust geschrieben?", ("goethe",)),
]  # fmt: skip
LONG = ["Tell me a long story about a dragon.", "Write a detailed essay about the history of the printing press."]
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
           "required": ["city"], "additionalProperties": False}
CONVERT = {"type": "object", "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}},
           "required": ["amount", "currency"]}
TOOL_PROMPTS = [
    ("What is the weather in Paris right now?", "get_weather", WEATHER),
    ("Is it raining in Oslo? Check the weather.", "get_weather", WEATHER),
    ("Convert 100 dollars to euros.", "convert_currency", CONVERT),
    ("Hoe is het weer in Utrecht?", "get_weather", WEATHER),
    ("How much is 250 euros in yen?", "convert_currency", CONVERT),
]
CITED = [
    "Search the docs: how does the gateway route around an unhealthy upstream?",
    "Look up how respstream resumes a stream with starting_after.",
    "Search: what does the SSE event stream format look like?",
]


@dataclass
class Score:
    size: str
    model: str = ""
    grounded_model: int = 0
    grounded_final: int = 0
    words_tool: int = 0
    words_model: int = 0
    words_final: int = 0
    facts: int = 0
    long_within_cap: int = 0
    long_repetition: int = 0
    tool_calls: int = 0
    cited_model: int = 0
    cited_final: int = 0
    seconds: float = 0.0
    output_tokens: int = 0
    notes: list[str] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tool_outputs(result: Any) -> list[tuple[str, dict[str, Any], str]]:
    out = []
    for item in result.output:
        if item.get("type") in ("mcp_call", "function_call") and item.get("output") is not None:
            try:
                arguments = json.loads(item.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            out.append((str(item.get("name")), arguments, str(item["output"])))
    return out


def _stated(text: str, tools: list[tuple[str, dict[str, Any], str]]) -> bool:
    for name, arguments, output in tools:
        if name == "calculator":
            return check_calculation(text, str(arguments.get("expression", "")), output) is None
        if name == "current_datetime":
            return check_datetime(text, output) is None
    return False


def _right_tool(tools: list[tuple[str, dict[str, Any], str]], expected: str) -> bool:
    """The gateway ran the expected tool with the expected input: the calculator's result, or the clock's zone."""
    for name, arguments, output in tools:
        if name == "calculator":
            return output == expected
        if name == "current_datetime":
            return arguments.get("timezone") == expected
    return False


def _citations(result: Any) -> tuple[bool, bool]:
    """(the model cited a result itself, the final answer has a url_citation). Raises on an annotation outside
    the text: that is a gateway bug, not a quality figure."""
    model = final = False
    for item in result.output:
        if item.get("type") != "message":
            continue
        for part in item.get("content") or []:
            text = part.get("text") or ""
            for a in part.get("annotations") or []:
                if a.get("type") != "url_citation":
                    continue
                if not 0 <= a["start_index"] <= a["end_index"] <= len(text):
                    raise SystemExit(f"annotation out of range: {a} for {len(text)} characters")
                final = True
                model = model or a["end_index"] <= len(result.streamed_text)
    return model, final


SETS = ("grounded", "words", "facts", "long", "tool", "cited")


def run_size(size: str, verbose: bool, sets: tuple[str, ...] = SETS) -> Score:
    score = Score(size)
    port = _free_port()
    data = tempfile.mkdtemp(prefix="respstream-quality-")
    env = {**os.environ, "RESPSTREAM_DATA_DIR": data}
    proc = subprocess.Popen([sys.executable, "-m", "respstream", "serve", "--port", str(port), "--dialect", "openai",
                             "--model-size", size], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    started = time.monotonic()
    try:
        while True:
            try:
                models = httpx.get(f"{url}/models", timeout=2).json()
                score.model = next(m["id"] for m in models["data"] if m["id"] != "auto")
                break
            except (httpx.HTTPError, KeyError, IndexError, ValueError, StopIteration):
                if proc.poll() is not None or time.monotonic() - started > 180:
                    raise SystemExit(f"{size}: the gateway did not start") from None
                time.sleep(0.5)
        with Client(url, idle_timeout=300) as client:
            def ask(body: dict[str, Any]) -> Any:
                t0 = time.monotonic()
                stream = client.stream(**body)
                with stream:
                    for _ in stream:
                        pass
                    try:
                        result = stream.result()
                    except RespstreamError as exc:  # incomplete / failed: still scored on what arrived
                        result = getattr(exc, "response", None) or stream.snapshot()
                score.seconds += time.monotonic() - t0
                usage = result.usage or {}
                score.output_tokens += int(usage.get("output_tokens") or 0)
                return result

            for prompt in GROUNDED if "grounded" in sets else ():
                # The openai dialect runs only the hosted tools a request lists (docs/compatibility.md).
                result = ask({"input": prompt, "tools": [{"type": "calculator"}, {"type": "current_datetime"}]})
                tools = _tool_outputs(result)
                model_ok, final_ok = _stated(result.streamed_text, tools), _stated(result.output_text, tools)
                score.grounded_model += model_ok
                score.grounded_final += final_ok
                if verbose:
                    print(f"  [{size}] grounded {model_ok}/{final_ok} {prompt!r} -> {result.output_text[:120]!r}")
            for prompt, expected in WORDS_AND_PLACES if "words" in sets else ():
                result = ask({"input": prompt, "tools": [{"type": "calculator"}, {"type": "current_datetime"}]})
                tools = _tool_outputs(result)
                right = _right_tool(tools, expected)
                model_ok, final_ok = _stated(result.streamed_text, tools), _stated(result.output_text, tools)
                score.words_tool += right
                score.words_model += model_ok
                score.words_final += final_ok
                if verbose:
                    print(f"  [{size}] words {right}/{model_ok}/{final_ok} {prompt!r} {tools[:1]} -> "
                          f"{result.output_text[:140]!r}")
            for prompt, words in FACTS if "facts" in sets else ():
                result = ask({"input": prompt})
                ok = any(w in result.output_text.lower().replace("-", " ") for w in words)
                score.facts += ok
                if verbose:
                    print(f"  [{size}] fact {ok} {prompt!r} -> {result.output_text[:120]!r}")
            for prompt in LONG if "long" in sets else ():
                result = ask({"input": prompt})
                tokens = int((result.usage or {}).get("output_tokens") or 0)
                reason = (result.incomplete_details or {}).get("reason")
                score.long_within_cap += tokens <= DEFAULT_MAX_OUTPUT_TOKENS
                score.long_repetition += reason == "repetition"
                if verbose:
                    print(f"  [{size}] long {result.status} {reason} {tokens} tokens")
            for prompt, name, schema in TOOL_PROMPTS if "tool" in sets else ():
                tool = {"type": "function", "name": name, "description": f"{name.replace('_', ' ')}",
                        "parameters": schema}
                result = ask({"input": prompt, "tools": [tool]})
                calls = [c for c in result.tool_calls if c.get("name") == name]
                ok = False
                if calls:
                    try:
                        ok = not schema_errors(json.loads(calls[0]["arguments"]), schema)
                    except ValueError:
                        ok = False
                score.tool_calls += ok
                if verbose:
                    print(f"  [{size}] tool {ok} {prompt!r} -> {[(c['name'], c['arguments']) for c in calls]}"
                          f" {result.output_text[:80]!r}")
            for prompt in CITED if "cited" in sets else ():
                result = ask({"input": prompt, "tools": [{"type": "web_search"}]})
                model_ok, final_ok = _citations(result)
                score.cited_model += model_ok
                score.cited_final += final_ok
                if verbose:
                    print(f"  [{size}] cited {model_ok}/{final_ok} {prompt!r} -> {result.output_text[-160:]!r}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return score


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="small,medium,large")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--sets", default=",".join(SETS), help=f"prompt sets to run (default all: {','.join(SETS)})")
    args = parser.parse_args()
    sizes = [s for s in args.sizes.split(",") if s]
    sets = tuple(s for s in args.sets.split(",") if s)
    unknown = [s for s in sets if s not in SETS]
    if unknown:
        print(f"unknown prompt set(s): {', '.join(unknown)} (known: {', '.join(SETS)})", file=sys.stderr)
        return 2
    missing = [s for s in sizes if not EmbeddedUpstream.available(s)]
    if missing:
        print(f"not installed: {', '.join(missing)} (make install-model MODEL_SIZE=...)", file=sys.stderr)
        return 2
    header = ("| size | model | grounded: model / final (of 10) | words & places: tool / model / final (of 10) | "
              "facts (of 10) | long within cap (of 2) | "
              "ended by loop guard | client tool call (of 5) | cited: model / final (of 3) | s per prompt | "
              "output tokens / request second |")
    print(header)
    print("|" + "---|" * 11, flush=True)
    scores = []
    counts = {"grounded": len(GROUNDED), "words": len(WORDS_AND_PLACES), "facts": len(FACTS), "long": len(LONG),
              "tool": len(TOOL_PROMPTS), "cited": len(CITED)}
    prompts = sum(counts[s] for s in sets)
    for size in sizes:
        s = run_size(size, args.verbose, sets)
        scores.append(s)
        print(f"| {s.size} | {s.model} | {s.grounded_model} / {s.grounded_final} | "
              f"{s.words_tool} / {s.words_model} / {s.words_final} | {s.facts} | {s.long_within_cap} | "
              f"{s.long_repetition} | {s.tool_calls} | {s.cited_model} / {s.cited_final} | "
              f"{s.seconds / prompts:.1f} | {s.output_tokens / max(s.seconds, 1e-9):.1f} |", flush=True)
    small = next((s for s in scores if s.size == "small"), None)
    if small is not None:
        for s in scores:
            if s is not small:
                facts = s.facts / max(1, small.facts)
                tools = s.tool_calls / max(1, small.tool_calls) if small.tool_calls else float("inf")
                print(f"ratio {s.size}/small: facts x{facts:.2f}, grounded (model) "
                      f"x{s.grounded_model / max(1, small.grounded_model):.2f}, tool calls "
                      f"{f'x{tools:.2f}' if tools != float('inf') else f'{s.tool_calls} vs 0'}, "
                      f"time per prompt x{(s.seconds / max(small.seconds, 1e-9)):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
