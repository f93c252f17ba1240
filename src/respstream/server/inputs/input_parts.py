"""Non-text input parts (``input_image``, ``input_file``) and the input modalities a model takes.

How this works: :func:`media_part` validates one Responses content part and returns its Chat Completions form
(``image_url`` / ``file`` part), which the message keeps beside its text (``InputItem.parts``). An image URL goes to
the upstream as it is (the upstream fetches it, as OpenAI does). A ``file_url`` has no Chat Completions form: the
part keeps it until :mod:`~respstream.server.inputs.input_files` fetches it through the network policy and inlines it as
``file_data`` (after routing, before anything streams). Before that, :func:`check_modalities` refuses (400
``unsupported_parameter``) a part the chosen model does not take, naming the part, the model and what it accepts.

A model's modalities: ``[models] input_modalities`` in the config (model id or upstream name -> list of ``text``,
``image``, ``file``), else the upstream's own ``input_modalities`` attribute (the SIMULATED scripted upstream takes
all three), else text only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from respstream.server.http_errors import HTTPError
from respstream.server.model_catalog import MODALITIES, model_modalities  # defined with the [models] table

__all__ = ["MEDIA_PART_TYPES", "MODALITIES", "check_modalities", "media_part", "model_modalities", "part_modality"]

MEDIA_PART_TYPES = frozenset({"input_image", "input_file"})
_DETAILS = ("auto", "low", "high")
_IMAGE_SCHEMES = ("http://", "https://", "data:image/")


def _bad(message: str, param: str, code: str = "invalid_value") -> HTTPError:
    return HTTPError(400, code, message, param=param)


def _opt_string(part: dict[str, Any], key: str, where: str) -> str | None:
    value = part.get(key)
    if value is not None and not isinstance(value, str):
        raise _bad(f"{where}.{key} must be a string", f"{where}.{key}", "invalid_type")
    return value


def media_part(part: dict[str, Any], where: str) -> dict[str, Any]:
    """The Chat Completions content part for an ``input_image`` / ``input_file`` part. Raises 400 naming it."""
    kind = part.get("type")
    if part.get("file_id") is not None:
        raise _bad(f"{where}.file_id is not supported (this gateway has no Files API; send the data inline)",
                   f"{where}.file_id", "unsupported_parameter")
    if kind == "input_image":
        url = _opt_string(part, "image_url", where)
        if not url:
            raise _bad(f"{where}.image_url is required", f"{where}.image_url", "missing_required_parameter")
        if not url.startswith(_IMAGE_SCHEMES) or (url.startswith("data:") and ";base64," not in url[:200]):
            raise _bad(f"{where}.image_url must be an http(s) URL or a base64 data URL (data:image/...;base64,...)",
                       f"{where}.image_url")
        detail = part.get("detail") or "auto"
        if detail not in _DETAILS:
            raise _bad(f"{where}.detail must be one of {', '.join(_DETAILS)}", f"{where}.detail")
        return {"type": "image_url", "image_url": {"url": url, "detail": detail}}
    url = _opt_string(part, "file_url", where)
    data = _opt_string(part, "file_data", where)
    if url is not None and data is not None:
        raise _bad(f"{where} gives both file_url and file_data; send one", f"{where}.file_url")
    file: dict[str, Any]
    if url is not None:
        if not url.startswith(("http://", "https://")):
            raise _bad(f"{where}.file_url must be an http(s) URL", f"{where}.file_url")
        file = {"file_url": url}  # fetched and inlined before the upstream sees it (server/inputs/input_files.py)
    elif not data:
        raise _bad(f"{where}.file_data or file_url is required", f"{where}.file_data", "missing_required_parameter")
    else:
        file = {"file_data": data}
    filename = _opt_string(part, "filename", where)
    if filename:
        file["filename"] = filename
    return {"type": "file", "file": file}


def part_modality(chat_part: Mapping[str, Any]) -> str:
    return {"image_url": "image", "file": "file"}.get(str(chat_part.get("type")), "text")


def check_modalities(parts: Sequence[tuple[str, Mapping[str, Any]]], model_id: str, accepted: Sequence[str]) -> None:
    """400 naming the first part (``(param, chat part)``) whose modality ``model_id`` does not accept."""
    for where, chat_part in parts:
        modality = part_modality(chat_part)
        if modality not in accepted:
            kind = "input_image" if modality == "image" else "input_file"
            raise _bad(f"{where} is an {kind} part, but model '{model_id}' accepts only {', '.join(accepted)} input",
                       where, "unsupported_parameter")
