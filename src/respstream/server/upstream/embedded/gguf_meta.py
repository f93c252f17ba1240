"""Read a model's own name from a GGUF file's metadata, so the model id comes from the model, not its file name.

How this works: a GGUF file starts with ``GGUF``, a version, the tensor count and the number of key/value pairs; the
pairs follow (key string, value type, value). :func:`read_gguf_metadata` reads pairs in order and stops at the first
array (the tokenizer's vocabulary, hundreds of thousands of strings) or after ``max_pairs`` / ``max_bytes``, because
the ``general.*`` keys we want come first. Reading is sequential, bounded and linear in what it reads.
:func:`model_id_from_metadata` turns ``general.name`` (``"Qwen2.5 Coder 1.5B Instruct"``) into a readable id
(``qwen2.5-coder-1.5b-instruct``).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["GGUFError", "model_id_from_metadata", "model_id_of", "read_gguf_metadata"]

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_MAX_STRING = 1 << 20


class GGUFError(ValueError):
    """Not a GGUF file, or its header is damaged (the message says where)."""


def _read(stream: BinaryIO, size: int, what: str) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise GGUFError(f"GGUF header ends early while reading {what} (byte {stream.tell()})")
    return data


def _string(stream: BinaryIO, what: str) -> str:
    (length,) = struct.unpack("<Q", _read(stream, 8, what))
    if length > _MAX_STRING:
        raise GGUFError(f"GGUF {what} is {length} bytes long (byte {stream.tell()}): damaged header")
    return _read(stream, length, what).decode("utf-8", "replace")


def read_gguf_metadata(path: str | Path, *, max_pairs: int = 256, max_bytes: int = 1 << 20) -> dict[str, Any]:
    """The scalar and string metadata before the first array. Raises :class:`GGUFError` or ``OSError``."""
    out: dict[str, Any] = {}
    with open(path, "rb") as stream:
        if _read(stream, 4, "the magic") != b"GGUF":
            raise GGUFError(f"{path} is not a GGUF file (no GGUF magic at byte 0)")
        (version,) = struct.unpack("<I", _read(stream, 4, "the version"))
        if version < 2:
            raise GGUFError(f"{path}: GGUF version {version} is not supported (2 or later)")
        _tensors, pairs = struct.unpack("<QQ", _read(stream, 16, "the counts"))
        for _ in range(min(pairs, max_pairs)):
            if stream.tell() > max_bytes:
                break
            key = _string(stream, "a metadata key")
            (kind,) = struct.unpack("<I", _read(stream, 4, f"the type of {key}"))
            if kind == _STRING:
                out[key] = _string(stream, f"the value of {key}")
            elif kind in _SCALARS:
                fmt = _SCALARS[kind]
                (out[key],) = struct.unpack(fmt, _read(stream, struct.calcsize(fmt), f"the value of {key}"))
            elif kind == _ARRAY:
                break  # the vocabulary and friends: everything we want came before
            else:
                raise GGUFError(f"{path}: metadata key {key!r} has unknown type {kind} (byte {stream.tell()})")
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.strip().lower()).strip("-.")


def model_id_from_metadata(metadata: dict[str, Any]) -> str | None:
    """A readable id from the model's own metadata: ``general.basename`` + ``general.size_label`` + the fine-tune
    (``instruct`` when the name or fine-tune says so), e.g. ``qwen2.5-coder-1.5b-instruct``; else ``general.name``
    as a slug. Packaging words (``gguf``) are dropped. None when the metadata names nothing."""
    basename, size = metadata.get("general.basename"), metadata.get("general.size_label")
    name = metadata.get("general.name") if isinstance(metadata.get("general.name"), str) else ""
    finetune = metadata.get("general.finetune") if isinstance(metadata.get("general.finetune"), str) else ""
    if isinstance(basename, str) and basename.strip() and isinstance(size, str) and size.strip():
        words = [basename, size]
        tune = "instruct" if "instruct" in f"{name} {finetune}".lower() else finetune
        if tune:
            words.append(tune)
        slug = _slug(" ".join(words))
    else:
        slug = _slug(str(name))
    slug = re.sub(r"(?:^|-)gguf(?=-|$)", "", slug).strip("-")
    return slug or None


def model_id_of(path: str | Path) -> str | None:
    """The model id a GGUF file names itself by, or None when it has no readable name. Never raises."""
    try:
        return model_id_from_metadata(read_gguf_metadata(path))
    except (OSError, GGUFError, struct.error):
        return None
