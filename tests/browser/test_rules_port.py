"""The page's JS port (static/sse.js + static/rules.js) agrees with the Python checker on every transcript.

Each hand-written transcript in tests/transcripts is decoded and checked twice: by respstream.protocol's
StreamCore and, inside chromium, by the playground's own SSE parser, sequencer and rules. The violation codes and
sequence numbers must match, so the timeline highlights exactly what `respstream check` reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from respstream.errors import RespstreamError
from respstream.protocol.stream import StreamCore

pytestmark = pytest.mark.browser

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "transcripts"
# Not ported: completed.output_mismatch needs the full assembler (the page shows the final text instead), and
# envelope.event_name_mismatch needs a declared dialect.
NOT_PORTED = {"completed.output_mismatch", "envelope.event_name_mismatch"}

JS_CHECK = """
async ({text, startingAfter, chunk, dialect}) => {
  const { SSEParser } = await import('/static/sse.js');
  const { Sequencer, Rules } = await import('/static/rules.js');
  const parser = new SSEParser();
  const seq = new Sequencer({ startingAfter });
  const rules = new Rules({ expectCreated: startingAfter < 0, dialect });
  const found = [];
  const release = (events) => { for (const ev of events) found.push(...rules.check(ev)); };
  const onMessage = (msg) => {
    if (msg.data === '[DONE]') return;
    let ev;
    try { ev = JSON.parse(msg.data); } catch { found.push({ code: 'bad_input', sequence_number: null }); return; }
    if (!ev || typeof ev !== 'object' || Array.isArray(ev)) { found.push({ code: 'bad_input' }); return; }
    const pushed = seq.push(ev);
    found.push(...pushed.violations);
    release(pushed.ready);
  };
  for (let i = 0; i < text.length; i += chunk) for (const m of parser.feed(text.slice(i, i + chunk))) onMessage(m);
  parser.end();
  const rest = seq.finish();
  found.push(...rest.violations);
  release(rest.ready);
  found.push(...rules.finish());
  return found.map((v) => [v.code, v.sequence_number ?? null]);
}
"""


def python_violations(
    data: bytes, starting_after: int | None, dialect: str | None = None
) -> list[tuple[str, int | None]] | None:
    core = StreamCore(starting_after=starting_after, dialect=dialect)
    try:
        core.feed(data)
        core.close()
    except RespstreamError:
        return None  # bad input (not an event stream): the CLI exits 2, the page shows "not JSON" rows
    if core.json_events == 0:
        return None
    return [(v.code, v.sequence_number) for v in core.violations]


def _cases() -> list[Path]:
    return sorted(TRANSCRIPTS.glob("*.sse"))


@pytest.fixture(scope="module")
def js_page(browser: Any, fake: Any) -> Any:
    context = browser.new_context()
    pg = context.new_page()
    pg.goto(fake.url + "/")
    pg.wait_for_selector("body[data-ready=true]")
    yield pg
    context.close()


def test_transcripts_exist() -> None:
    assert len(_cases()) >= 20


@pytest.mark.parametrize("path", _cases(), ids=lambda p: p.stem)
def test_js_rules_match_python_checker(js_page: Any, path: Path) -> None:
    data = path.read_bytes()
    starting_after = 9 if path.stem == "resumed" else None
    # The page picks the platform dialect when it sees `event: message` framing; check that mode the same way.
    dialect = "platform" if b"event: message" in data else None
    expected = python_violations(data, starting_after, dialect)
    if expected is None:
        pytest.skip("not an event stream: the Python checker rejects it as bad input")
    text = data.decode("utf-8")
    want = sorted((c, s) for c, s in expected if c not in NOT_PORTED)
    for chunk in (len(text) or 1, 7, 1):
        got = js_page.evaluate(JS_CHECK, {"text": text, "startingAfter": -1 if starting_after is None
                                          else starting_after, "chunk": chunk, "dialect": dialect})
        assert sorted((c, s) for c, s in got) == want, f"chunk size {chunk}"
