"""Config: the stable instance id (restart recovery) and the promise that every key is documented."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from respstream.server.config import Config, load_config, stable_instance_id
from respstream.server.http.app import create_app
from respstream.server.responses.rewrite import _CONFIG_KEYS as rewrite_config_keys
from respstream.server.routing.router import Router, RoutingRules
from respstream.server.tools.registry import ToolsConfig

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_instance_id_is_stable_per_data_dir_and_port(tmp_path: Path) -> None:
    first = stable_instance_id(Config(data_dir=str(tmp_path), port=8080))
    assert first == stable_instance_id(Config(data_dir=str(tmp_path), port=8080))  # a restart: same id
    assert (tmp_path / "instance-8080.id").read_text().strip() == first
    other_port = stable_instance_id(Config(data_dir=str(tmp_path), port=8081))
    other_dir = stable_instance_id(Config(data_dir=str(tmp_path / "elsewhere"), port=8080))
    assert len({first, other_port, other_dir}) == 3


def test_instance_id_file_that_is_garbage_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "instance-9000.id").write_text("not an id\n\x00")
    found = stable_instance_id(Config(data_dir=str(tmp_path), port=9000))
    assert re.fullmatch(r"[0-9a-f]{12}-9000", found)
    assert stable_instance_id(Config(data_dir=str(tmp_path), port=9000)) == found


def test_instance_id_without_a_writable_data_dir_falls_back_to_host_and_port(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    found = stable_instance_id(Config(data_dir=str(blocker / "data"), port=7000))
    assert found.endswith("-7000") and found == stable_instance_id(Config(data_dir=str(blocker / "data"), port=7000))


def test_explicit_instance_id_wins_and_apps_built_in_code_get_a_fresh_one(tmp_path: Path) -> None:
    assert load_config(None, {"instance_id": "gw-1"}).instance_id == "gw-1"
    a, b = Config(data_dir=str(tmp_path)), Config(data_dir=str(tmp_path))
    create_app(a)
    create_app(b)
    assert a.instance_id and b.instance_id and a.instance_id != b.instance_id
    assert not list(tmp_path.glob("instance-*.id"))  # only `respstream serve` persists one


def _documented() -> set[str]:
    return set(re.findall(r"^\| `([a-z_.]+)` \|", DOCS.read_text(encoding="utf-8"), flags=re.MULTILINE))


def test_every_config_key_is_documented() -> None:
    documented = _documented()
    missing = [f.name for f in fields(Config) if f.name not in documented]
    assert missing == [], f"docs/configuration.md has no table row for: {missing}"


def test_every_router_tools_and_rewrite_key_is_documented() -> None:
    keys = [f"tools.{f.name}" for f in fields(ToolsConfig)]
    keys += [f"router.rules.{f.name}" for f in fields(RoutingRules) if not f.name.startswith("_")]
    keys += [f"router.{k}" for k in ("categories", "rules", "failure_threshold", "open_seconds")]
    keys += [f"rewrite.{k}" for k in sorted(rewrite_config_keys)]
    # Router takes exactly these top-level keys: a whole table with all of them is accepted.
    Router([], {"categories": {"fast": ["m"]}, "rules": {}, "failure_threshold": 1, "open_seconds": 1.0})
    missing = [k for k in keys if k not in _documented()]
    assert missing == [], f"docs/configuration.md has no table row for: {missing}"


def test_the_young_gc_threshold_is_set_by_serve_and_validated() -> None:
    import gc

    from respstream.server.config import ConfigError
    from respstream.server.http.run_gateway import tune_collector

    before = gc.get_threshold()
    try:
        tune_collector(Config(gc_young_threshold=12345))
        assert gc.get_threshold() == (12345, *before[1:])
        gc.set_threshold(*before)
        tune_collector(Config(gc_young_threshold=0))  # 0: Python's own thresholds stay
        assert gc.get_threshold() == before
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
    with pytest.raises(ConfigError, match="gc_young_threshold"):
        Config(gc_young_threshold=-1).validate()
