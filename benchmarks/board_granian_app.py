"""respstream's app for Granian (the board's ``respstream-granian``, issue 41 step 5): ``granian --factory
board_granian_app:app``. The config comes as ``respstream serve`` would build it from ``--config`` and
``--upstream`` (RESPSTREAM_BOARD_CONFIG, RESPSTREAM_BOARD_UPSTREAM). Only a measurement: what runs under Granian lacks
the protections uvicorn's protocol class carries here (server/http/http_guard.py: header and request deadlines, the
connection caps), so this is not a way to serve the gateway.
"""

from __future__ import annotations

import os
from typing import Any


def app() -> Any:
    from respstream.server.config import load_config
    from respstream.server.http.app import create_app
    from respstream.server.http.run_gateway import tune_collector
    from respstream.server.telemetry import configure_logging

    upstream = os.environ["RESPSTREAM_BOARD_UPSTREAM"]
    config = load_config(os.environ["RESPSTREAM_BOARD_CONFIG"], {"upstreams": [upstream]})
    configure_logging(config.logging_settings())
    application = create_app(config)
    tune_collector(config)
    return application
