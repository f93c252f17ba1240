"""``current_datetime``: the current date and time in an IANA time zone, as ISO 8601."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["TimeZoneError", "current_datetime"]


class TimeZoneError(ValueError):
    """Not an IANA time zone name."""


def current_datetime(timezone: str | None = None, *, now: Callable[[], datetime] | None = None) -> str:
    """``2026-11-29T10:45:12+01:00`` in ``timezone`` (default UTC). Raises :class:`TimeZoneError`."""
    name = (timezone or "UTC").strip()
    if not name or len(name) > 64:
        raise TimeZoneError("time zone must be an IANA name such as Europe/Amsterdam")
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise TimeZoneError(f"unknown time zone {name!r} (use an IANA name such as Europe/Amsterdam)") from None
    moment = (now or (lambda: datetime.now(UTC)))()
    return moment.astimezone(zone).isoformat(timespec="seconds")
