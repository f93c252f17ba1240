"""``respstream serve``: defaults (127.0.0.1:8080, the embedded model), the startup banner and its examples working
as printed, the not-installed message, and a clean exit on SIGTERM. Subprocess runs use the SIMULATED scripted
upstream on a free port (never 8080: other runs may hold it)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from respstream.cli import build_parser, main
from respstream.commands.serve import banner
from respstream.server.config import load_config
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

from .helpers import decode, free_port
from .serve_process import healthy


def test_serve_without_arguments_means_loopback_8080_and_the_embedded_model() -> None:
    args = build_parser("serve").parse_args(["serve"])
    config = load_config(args.config, {"host": args.host, "port": args.port, "upstreams": args.upstreams})
    assert (config.host, config.port, config.upstreams) == ("127.0.0.1", 8080, ["embedded"])


@pytest.mark.parametrize(("host", "shown"), [("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "127.0.0.1"), ("::1", "[::1]")])
def test_banner_shows_the_playground_and_ready_examples(host: str, shown: str) -> None:
    text = banner(host, 9123)
    base = f"http://{shown}:9123"
    assert f"playground: {base}/\n" in text
    assert f"curl -N {base}/v1/responses -H 'Content-Type: application/json' -d " in text
    assert f"respstream stream \"Say hello in one sentence.\" --url {base}/v1" in text


def test_missing_embedded_model_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(EmbeddedUpstream, "available", staticmethod(lambda size="large": False))
    assert main(["serve", "--port", str(free_port())]) == 1
    err = capsys.readouterr().err
    assert "not installed" in err and "make install-model" in err and "--upstream http://" in err


def test_banner_examples_work_as_printed_and_sigterm_exits_0(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RESPSTREAM_DATA_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "respstream", "serve", "--port", str(port), "--upstream",
                             "scripted:5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(4)]
        assert lines[0].strip() == f"respstream gateway on http://127.0.0.1:{port}"
        assert healthy(f"http://127.0.0.1:{port}", proc, 20), "serve did not come up"
        curl = shlex.split(lines[2].split("try:", 1)[1])
        assert curl[:2] == ["curl", "-N"]
        body = curl[curl.index("-d") + 1]
        streamed = httpx.post(curl[2], content=body, headers={"content-type": "application/json"}, timeout=20)
        core = decode(streamed.content, dialect="platform")
        assert core.violations == [] and core.result.status == "completed" and core.result.output_text
        stream_cmd = shlex.split(lines[3].split("or:", 1)[1])
        assert stream_cmd[:2] == ["respstream", "stream"]
        ran = subprocess.run([sys.executable, "-m", "respstream", *stream_cmd[1:]], capture_output=True, text=True,
                             timeout=60, env=env)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
