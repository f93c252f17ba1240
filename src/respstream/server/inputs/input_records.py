"""The request's input items as a response keeps them (``record.request["input_items"]``), each with an id.

Made when a response is created (:mod:`~respstream.server.responses.responses_service`) and when items are added to
a conversation; listed by ``GET /v1/responses/{id}/input_items`` (:mod:`~respstream.server.endpoints.input_items`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from respstream.server.events.dialects import Dialect
    from respstream.server.inputs.response_request import InputItem

__all__ = ["input_item_records"]

_ID_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}


def input_item_records(items: list[InputItem], dialect: Dialect) -> list[dict[str, Any]]:
    """The request's input items as stored for the list endpoint: each with its id (and status)."""
    records = []
    for item in items:
        record = {"id": dialect.new_id(_ID_PREFIX.get(item.type, "item")), **item.to_json()}
        if item.type in ("message", "function_call", "function_call_output"):
            record["status"] = "completed"
        records.append(record)
    return records
