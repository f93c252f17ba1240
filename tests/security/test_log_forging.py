"""Issue 30 L4: the text log format cannot be made to forge lines or drive a terminal.

Before: a request for ``/x%0A12:00:00 info respstream.access: GET /admin 200%1B[2J`` wrote the decoded path into
the access line as is: a second, forged line and a terminal escape. The gateway runs for real on loopback."""

from __future__ import annotations

import httpx

from fakes.server_thread import ServerThread
from observability.log_capture import captured_logs
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.telemetry.settings import LoggingSettings

FORGED = "12:00:00 info    respstream.access: GET /admin 200"


def test_a_logged_path_stays_one_line_without_escapes() -> None:
    with (captured_logs(LoggingSettings(format="text")) as (out, _),
          ServerThread(create_app(Config(upstreams=["scripted:3"]))) as gw):
        attack = "/x%0A" + FORGED.replace(" ", "%20") + "%1B%5B2J%0D%C2%85%E2%80%A8"
        assert httpx.get(f"{gw.url}{attack}").status_code == 404
    text = out.getvalue()
    access = [line for line in text.splitlines() if "respstream.access" in line]
    assert len(access) == 1 and not access[0].startswith("12:00:00 info"), text
    assert "\x1b" not in text and "\r" not in text and "\x85" not in text and "\u2028" not in text
    assert "/x\\n12:00:00" in access[0] and "\\x1b[2J" in access[0]
