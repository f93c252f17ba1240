"""Config: the stable instance id (restart recovery) and the promise that every key is documented."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from respstream.server.app import create_app
from respstream.server.config import Config, load_config, stable_instance_id

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


def test_every_config_key_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", text, flags=re.MULTILINE))
    missing = [f.name for f in fields(Config) if f.name not in documented]
    assert missing == [], f"docs/configuration.md has no table row for: {missing}"
