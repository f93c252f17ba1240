"""The pipeline's Chat-style messages -> Gemini ``systemInstruction`` and ``contents`` (sans-IO).

How this works: system (and developer) messages become ``systemInstruction`` parts, in order; user messages
``user`` contents (text, images and files as ``inlineData`` for base64 data URLs, ``fileData`` for http(s) URLs);
assistant text and ``tool_calls`` ``model`` contents (``functionCall`` parts, ``args`` parsed from the arguments
JSON, ``""`` -> ``{}``); ``tool`` results ``user`` contents of ``functionResponse`` parts, named after the call they
answer (the pipeline only keeps a call together with its result and a result together with its call, so every
``functionCall`` turn is followed by its responses by construction). Consecutive contents of one role merge into one.

Signatures: a ``reasoning`` item with ``encrypted_content`` holds a ``thoughtSignature`` Gemini gave on the part that
came right after it (gemini/stream.py). The history hands it over on the assistant message that followed it
(``REASONING_KEY``, upstream/provider_tools.py; server/inputs/history.py), and it goes back, unchanged, on the first
part made from that message (its text, else its first ``functionCall``); one marked ``after`` (no part followed it
in its turn) goes back on an empty text part closing that message's parts, as Gemini sent it.

A call id we generated (Gemini gave none: :data:`~.stream.GENERATED_CALL_PREFIX`) is not sent back as Gemini's
``id``. Anything that cannot be said to Gemini raises ``RefusedField`` (upstream/provider_tools.py) naming where.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from collections.abc import Callable
from typing import Any

import msgspec

from respstream.server.upstream.gemini.stream import GENERATED_CALL_PREFIX
from respstream.server.upstream.provider_tools import REASONING_KEY, RefusedField, arguments_object

__all__ = ["build_contents"]


def build_contents(messages: list[dict[str, Any]], rename: Callable[[str], str] = str
                   ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """``(systemInstruction or None, contents)`` for ``messages``. ``rename``: a tool name as Gemini knows it.
    Raises ``RefusedField``."""
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id -> function name (a functionResponse must name its function)

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            text = _plain_text(content, where)
            if text:
                system.append({"text": text})
        elif role == "user":
            add("user", _user_parts(content, where))
        elif role == "assistant":
            parts: list[dict[str, Any]] = []
            text = _plain_text(content, where)
            if text:
                parts.append({"text": text})
            for j, call in enumerate(message.get("tool_calls") or ()):
                parts.append(_function_call(call, f"{where}.tool_calls[{j}]", names, rename))
            add("model", _signed(parts, message.get(REASONING_KEY), calls=bool(message.get("tool_calls"))))
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            name = names.get(call_id)
            if name is None:
                raise RefusedField("input", f"{where}: a function_call_output for call_id {call_id!r} has no "
                                              "function_call before it (Gemini needs the call to name the function)")
            response: dict[str, Any] = {"name": name, "response": _response_object(_plain_text(content, where))}
            if call_id and not call_id.startswith(GENERATED_CALL_PREFIX):
                response["id"] = call_id
            add("user", [{"functionResponse": response}])
        else:
            raise RefusedField("input", f"{where}.role {role!r} has no Gemini equivalent")
    return ({"parts": system} if system else None), contents


def _signed(parts: list[dict[str, Any]], reasoning: Any, *, calls: bool) -> list[dict[str, Any]]:
    """``parts`` of one assistant message with the signatures of the reasoning that came with it: the last one before
    the message on its first part (earlier ones each on an empty text part before it), the ``after`` ones on empty
    text parts at the end. A message with ``calls`` (a server tool's round, its text and calls in one message) puts
    it on its first ``functionCall`` instead: Gemini requires the signature there, it only recommends it on text."""
    if not isinstance(reasoning, list):
        return parts
    before = [e["encrypted_content"] for e in reasoning if isinstance(e, dict) and not e.get("after")
              and isinstance(e.get("encrypted_content"), str) and e["encrypted_content"]]
    after = [e["encrypted_content"] for e in reasoning if isinstance(e, dict) and e.get("after")
             and isinstance(e.get("encrypted_content"), str) and e["encrypted_content"]]
    if before:
        if parts:
            at = next((i for i, p in enumerate(parts) if "functionCall" in p), 0) if calls else 0
            parts = [*parts[:at], *({"text": "", "thoughtSignature": s} for s in before[:-1]),
                     {**parts[at], "thoughtSignature": before[-1]}, *parts[at + 1:]]
        else:
            after = before + after
    return parts + [{"text": "", "thoughtSignature": s} for s in after]


def _plain_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise RefusedField("input", f"{where}.content[{j}]: a {kind!r} part is only taken in user messages")
        return "".join(texts)
    raise RefusedField("input", f"{where}.content must be text")


def _user_parts(content: Any, where: str) -> list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return [{"text": content}] if content else []
    if not isinstance(content, list):
        raise RefusedField("input", f"{where}.content must be text or a list of parts")
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            text = str(part.get("text", ""))
            if text:
                parts.append({"text": text})
        elif kind == "image_url":
            image = part.get("image_url") or {}
            parts.append(_media(str(image.get("url") or ""), None, at))
        elif kind == "file":
            file = part.get("file") or {}
            data = file.get("file_data")
            if not isinstance(data, str) or not data:
                raise RefusedField("input", f"{at}: Gemini takes files as inline data only (file_data)")
            parts.append(_media(data, file.get("filename"), at))
        else:
            raise RefusedField("input", f"{at}: a {kind!r} part has no Gemini equivalent")
    return parts


def _media(url: str, filename: Any, where: str) -> dict[str, Any]:
    """An image or file as Gemini's ``inlineData`` (base64 data URL, or bare base64 file data) or ``fileData``."""
    if url.startswith(("http://", "https://")):
        mime = mimetypes.guess_type(url.split("?", 1)[0])[0]
        data: dict[str, Any] = {"fileUri": url}
        if mime:
            data["mimeType"] = mime
        return {"fileData": data}
    if url.startswith("data:"):
        head, sep, payload = url[5:].partition(",")
        if not sep or not head.endswith(";base64"):
            raise RefusedField("input", f"{where}: a data URL must be base64 (data:<type>;base64,...)")
        mime = head[: -len(";base64")] or "application/octet-stream"
    else:
        payload = url
        guessed = mimetypes.guess_type(filename)[0] if isinstance(filename, str) else None
        mime = guessed or "application/pdf"
    try:
        base64.b64decode(payload[:4096].rstrip("=") + "=" * (-len(payload[:4096].rstrip("=")) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise RefusedField("input", f"{where}: the inline data is not base64") from None
    return {"inlineData": {"mimeType": mime, "data": payload}}


def _function_call(call: Any, where: str, names: dict[str, str], rename: Callable[[str], str]) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise RefusedField("input", f"{where} is not a function call")
    name = rename(str(function.get("name") or ""))
    args = arguments_object(str(function.get("arguments") or ""), "input")
    call_id = str(call.get("id") or "")
    names[call_id] = name
    out: dict[str, Any] = {"name": name, "args": args}
    if call_id and not call_id.startswith(GENERATED_CALL_PREFIX):
        out["id"] = call_id
    return {"functionCall": out}


def _response_object(output: str) -> dict[str, Any]:
    """A ``functionResponse.response`` (an object): the output itself when it is a JSON object, else
    ``{"output": text}``."""
    if output.startswith("{"):
        try:
            value = msgspec.json.decode(output)
        except msgspec.DecodeError:
            value = None
        if isinstance(value, dict):
            return value
    return {"output": output}
