"""RSS of ``respstream serve`` under a bounded version of issue 42's H4v attack (docs/security.md, Round 4).

32 WebSockets of 4 API keys each send ``TURNS`` ``store: false`` turns of 30,000 tiny input items (900 KB of compact
JSON, within the default ``max_body_bytes``); the server runs at its defaults with a SIMULATED scripted upstream slow
enough that turns overlap. The server's RSS is sampled every 0.1 s from ``/proc``. Loopback only; bounded in count.

    python benchmarks/request_memory_rss.py [SRC_DIR] [PORT]

``SRC_DIR`` (default: the installed package) is put on the server's ``PYTHONPATH``, so the same script measures an
older tree (``git archive <commit> src | tar -x -C /tmp/old``) in the same run; alternate the sides on a loaded machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from websockets.sync.client import connect

SOCKETS, KEYS, TURNS, ITEMS = 32, 4, 3, 30_000
_ENDS = ("response.completed", "response.failed", "response.incomplete", "error")


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _keys(keys_file: Path, env: dict[str, str]) -> list[str]:
    made = []
    for i in range(KEYS):
        out = subprocess.run(["respstream", "keys", "--file", str(keys_file), "create", "--name", f"k{i}", "--json"],
                             env=env, capture_output=True, text=True, check=True).stdout
        made.append(json.loads(out)["key"])
    return made


def main(src: str | None, port: int) -> None:
    env = dict(os.environ, **({"PYTHONPATH": src} if src else {}))
    with tempfile.TemporaryDirectory() as work:
        keys = _keys(Path(work) / "keys.json", env)
        server = subprocess.Popen(["respstream", "serve", "--port", str(port), "--upstream", "scripted:6?delay_ms=200",
                                   "--keys-file", str(Path(work) / "keys.json"), "--dialect", "openai",
                                   "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        url = f"ws://127.0.0.1:{port}/v1/responses"
        try:
            for _ in range(100):  # wait for the server
                try:
                    with connect(url, additional_headers={"Authorization": f"Bearer {keys[0]}"}):
                        break
                except OSError:
                    time.sleep(0.3)
            time.sleep(1)
            start, peak, stop = _rss(server.pid), [0], threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    peak[0] = max(peak[0], _rss(server.pid))
                    time.sleep(0.1)

            threading.Thread(target=sample, daemon=True).start()
            body = json.dumps({"type": "response.create", "store": False,
                               "input": [{"role": "user", "content": "x"}] * ITEMS}, separators=(",", ":"))
            outcomes: dict[str, int] = {}

            def client(n: int) -> None:
                with connect(url, max_size=None, open_timeout=60,
                             additional_headers={"Authorization": f"Bearer {keys[n % KEYS]}"}) as ws:
                    for _ in range(TURNS):
                        ws.send(body)
                        while (event := json.loads(ws.recv(timeout=120)))["type"] not in _ENDS:
                            pass
                        kind = event["type"] if event["type"] != "error" else \
                            f"error {event.get('status')} {event['error']['code']}"
                        outcomes[kind] = outcomes.get(kind, 0) + 1

            began = time.monotonic()
            with ThreadPoolExecutor(SOCKETS) as pool:
                list(pool.map(client, range(SOCKETS)))
            time.sleep(0.5)
            stop.set()
            print(f"{src or 'installed'}: message {len(body)} bytes; RSS {start / 1e6:.0f} MB at start, peak "
                  f"{peak[0] / 1e6:.0f} MB, {_rss(server.pid) / 1e6:.0f} MB at the end; "
                  f"{time.monotonic() - began:.1f} s; {outcomes}")
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None, int(sys.argv[2]) if len(sys.argv) > 2 else 18770)
