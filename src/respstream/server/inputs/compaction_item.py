"""The ``compaction`` item's ``encrypted_content``: what ``POST /v1/responses/compact`` hands out and input takes back.

How this works: the content is ``rsc1.`` + base64url of ``{"summary": <text>, "model": <model id>}`` (JSON). It is
opaque to clients as the spec asks, but *encoded, not encrypted*: the gateway keeps no secret, and a client can put
any text in its input anyway, so a reader of the item learns nothing it could not have sent itself. As input it
becomes one system message, "Summary of the earlier conversation: ...", at its place in the input.
"""

from __future__ import annotations

import base64
import binascii

import msgspec

from respstream.server.inputs.response_request import InputItem

__all__ = ["COMPACTION_PREFIX", "MAX_COMPACTION_BYTES", "SUMMARY_PREFIX", "decode_compaction", "encode_compaction",
           "summary_item"]

COMPACTION_PREFIX = "rsc1."
SUMMARY_PREFIX = "Summary of the earlier conversation: "  # the system message a compaction item becomes
MAX_COMPACTION_BYTES = 10 * 1024 * 1024  # the spec's maxLength of encrypted_content


class _Payload(msgspec.Struct):
    summary: str
    model: str = ""


def encode_compaction(summary: str, model: str) -> str:
    raw = msgspec.json.encode(_Payload(summary=summary, model=model))
    return COMPACTION_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def summary_item(summary: str, role: str = "system") -> InputItem:
    """The message a compaction's summary becomes in the model's context: a system message, or a user one where the
    context must go on with a user turn (:func:`~respstream.server.responses.compaction_step.compact_step`)."""
    return InputItem("message", role=role, text=SUMMARY_PREFIX + summary)


def decode_compaction(content: object) -> str:
    """The summary inside ``content``. Raises ``ValueError`` saying what is wrong with it."""
    if not isinstance(content, str):
        raise ValueError("must be a string")
    if len(content) > MAX_COMPACTION_BYTES:
        raise ValueError(f"is longer than {MAX_COMPACTION_BYTES} characters")
    if not content.startswith(COMPACTION_PREFIX):
        raise ValueError("is not a compaction made by this gateway (POST /v1/responses/compact)")
    body = content[len(COMPACTION_PREFIX):]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        return msgspec.json.decode(raw, type=_Payload).summary
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise ValueError("is damaged (not the content /v1/responses/compact returned)") from None
