"""docs/gateway.md's table of defaults says what ``Config()`` and the embedded model catalogue say."""

from __future__ import annotations

import re
from pathlib import Path

from respstream.server.config import Config
from respstream.server.upstream.model_catalog import DEFAULT_MODEL_SIZE, spec_for

PAGE = Path(__file__).resolve().parents[2] / "docs" / "gateway.md"


def _defaults() -> dict[str, str]:
    text = PAGE.read_text(encoding="utf-8").split("| Setting | Default | Flag |", 1)[1].split("\n\n", 1)[0]
    return {name: default for name, default in re.findall(r"^\| ([a-zA-Z ]+) \| ([^|]+) \|", text, re.MULTILINE)}


def test_the_documented_defaults_are_the_code_s() -> None:
    config, rows = Config(), _defaults()
    assert rows["address"].startswith(f"`{config.host}:{config.port}`")
    assert rows["dialect"].strip() == f"`{config.dialect}`"
    assert rows["store"].startswith(f"`{config.store}`")
    assert rows["processes"].strip() == str(config.workers)
    assert config.upstreams == ["embedded"] and config.model_size == DEFAULT_MODEL_SIZE
    model = spec_for(DEFAULT_MODEL_SIZE).title.split(" (")[0]  # "Qwen2.5-Coder-1.5B-Instruct"
    assert rows["model"].strip() == f"the embedded {model}"
    assert not config.keys_file and rows["API keys"].startswith("none")
