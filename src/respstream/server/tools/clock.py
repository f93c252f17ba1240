"""``current_datetime``: the current date and time in an IANA time zone.

:func:`current_datetime` gives ISO 8601; :func:`describe_datetime` (what the tool returns) adds what people and
models need to state it right: the weekday, the date in words, the 24-hour time, the zone's name and abbreviation::

    Tuesday 1 December 2026, 11:25:03 in Europe/Amsterdam (CET, UTC+01:00); ISO 8601: 2026-12-01T11:25:03+01:00
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["TimeZoneError", "current_datetime", "describe_datetime", "zone_moment"]


class TimeZoneError(ValueError):
    """Not an IANA time zone name."""


def current_datetime(timezone: str | None = None, *, now: Callable[[], datetime] | None = None) -> str:
    """``2026-11-29T10:45:12+01:00`` in ``timezone`` (default UTC). Raises :class:`TimeZoneError`."""
    return zone_moment(timezone, now=now).isoformat(timespec="seconds")


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def describe_datetime(timezone: str | None = None, *, now: Callable[[], datetime] | None = None) -> str:
    """The tool's answer (see the module docstring): English words, 24-hour clock. Raises :class:`TimeZoneError`."""
    moment = zone_moment(timezone, now=now)
    offset = moment.strftime("%z")
    offset = f"UTC{offset[:3]}:{offset[3:]}" if offset else "UTC"
    abbreviation = moment.tzname() or ""
    zone = str(moment.tzinfo)
    names = f"{abbreviation}, {offset}" if abbreviation and abbreviation not in ("UTC", zone) else offset
    return (f"{_DAYS[moment.weekday()]} {moment.day} {_MONTHS[moment.month - 1]} {moment.year}, "
            f"{moment:%H:%M:%S} in {zone} ({names}); ISO 8601: {moment.isoformat(timespec='seconds')}")


def zone_moment(timezone: str | None = None, *, now: Callable[[], datetime] | None = None) -> datetime:
    """Now (or ``now()``) in ``timezone`` (default UTC). Raises :class:`TimeZoneError`."""
    name = (timezone or "UTC").strip()
    if not name or len(name) > 64:
        raise TimeZoneError("time zone must be an IANA name such as Europe/Amsterdam")
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise TimeZoneError(f"unknown time zone {name!r} (use an IANA name such as Europe/Amsterdam)") from None
    moment = (now or (lambda: datetime.now(UTC)))()
    return moment.astimezone(zone)
