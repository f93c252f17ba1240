"""Item 3: view code. Each snippet, run exactly as the page shows it, streams the same answer from the real
gateway (SIMULATED scripted upstream); copy buttons copy what is shown; code is highlighted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import Gateway, open_page, wait_status
from .fake_gateway import Script

pytestmark = pytest.mark.browser

VENV_BIN = Path(sys.executable).parent


def shown(page: Any, tab: str) -> str:
    page.click(f".tabs [data-lang={tab}]")
    page.wait_for_function("t => document.getElementById('code-text').dataset.lang === t", arg=tab)
    text: str = page.get_attribute("#code-text", "data-raw") or ""
    return text


def run(cmd: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}"}
    env.pop("OPENAI_API_KEY", None)
    env.pop("RESPSTREAM_API_KEY", None)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, cwd=tmp, check=False)


def replayed_text(sse: str, tmp: Path) -> str:
    path = tmp / "out.sse"
    path.write_text(sse)
    done = run([str(VENV_BIN / "respstream"), "replay", "--json", str(path)], tmp)
    text: str = json.loads(done.stdout)["output_text"]
    return text


def test_each_snippet_run_as_shown_streams_the_same_answer(page: Any, gateway: Gateway, tmp_path: Path) -> None:
    with gateway("scripted:9?delay_ms=2") as url:
        open_page(page, url)
        page.fill("#instructions", "Be brief.")
        page.fill("#temperature", "0.5")
        page.fill("#prompt", "Say it's \"quoted\" & $HOME stays literal")
        page.click("#send")
        wait_status(page, "completed")
        answer = page.evaluate("window.__playground.finalText")
        request = page.evaluate("window.__playground.request")
        page.click("#view-code")
        page.locator("#code-dialog").wait_for(state="visible")
        assert "last request sent" in page.inner_text("#code-source")

        curl = shown(page, "curl")
        assert page.locator("#code-text .tok-str").count() > 0  # highlighted
        done = run(["bash", "-c", curl], tmp_path)
        assert done.returncode == 0, done.stderr
        assert replayed_text(done.stdout, tmp_path) == answer

        page.click("#copy-code")
        assert page.evaluate("window.__lastCopied") == curl

        openai_py = shown(page, "openai")
        (tmp_path / "openai_snippet.py").write_text(openai_py)
        done = run([sys.executable, "openai_snippet.py"], tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == answer

        client_py = shown(page, "respstream")
        (tmp_path / "client_snippet.py").write_text(client_py)
        done = run([sys.executable, "client_snippet.py"], tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == answer

        cli = shown(page, "cli")
        # temperature has no `respstream stream` flag: the snippet says so instead of dropping it silently.
        assert "no flag for: temperature" in cli
        done = run(["bash", "-c", cli], tmp_path)
        assert done.returncode == 0, done.stderr
        assert answer in done.stdout

        fetch_js = shown(page, "fetch")
        assert json.dumps(request, indent=2) in fetch_js


def test_answer_code_blocks_are_highlighted_and_copyable(page: Any, fake: Any) -> None:
    code = 'def greet(name):\n    return f"hi {name}"  # friendly'
    fake.script = Script(chunks=["Here:\n\n```python title=\"greet.py\"\n", code, "\n```\n\nDone."])
    open_page(page, fake.url)
    page.click("#send")
    wait_status(page, "completed")
    block = page.locator("#answer pre[data-lang=python]")
    assert block.locator(".tok-kw").all_inner_texts()[:2] == ["def", "return"]
    assert block.locator(".tok-com").inner_text() == "# friendly"
    block.locator("button.copy-code").click()
    assert page.evaluate("window.__lastCopied") == code
    page.click("#copy-answer")
    assert page.evaluate("window.__lastCopied") == page.evaluate("window.__playground.finalText")
