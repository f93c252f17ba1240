"""Which event loop and HTTP parser uvicorn runs on: ``fast`` (uvloop + httptools) or ``pure`` (asyncio + h11).

Why: uvloop and httptools (the ``fast`` extra, part of the default ``make install``) give the gateway 1.2-1.4x the
events/s of the pure-Python stack (docs/benchmarks.md), but they are C extensions that may not install everywhere.
``auto`` (the default ``http_stack``) takes each of them when it imports and falls back to the pure-Python one
otherwise; ``pure`` forces asyncio + h11 (for comparison, or to rule the extensions out); ``fast`` refuses to start
without them instead of silently running slower.
"""

from __future__ import annotations

import importlib.util

__all__ = ["STACKS", "StackError", "available", "uvicorn_options"]

STACKS = ("auto", "fast", "pure")


class StackError(ValueError):
    """``http_stack`` names something this machine cannot run."""


def available() -> dict[str, bool]:
    """Whether ``uvloop`` and ``httptools`` can be imported here."""
    return {name: importlib.util.find_spec(name) is not None for name in ("uvloop", "httptools")}


def uvicorn_options(stack: str) -> dict[str, str]:
    """``loop``/``http`` for ``uvicorn.Config``. Raises :class:`StackError` for an unknown stack, or ``fast``
    without the extensions installed (the message says how to install them)."""
    if stack not in STACKS:
        raise StackError(f"http_stack must be one of {', '.join(STACKS)}, not {stack!r}")
    if stack == "pure":
        return {"loop": "asyncio", "http": "h11"}
    have = available()
    if stack == "fast":
        missing = [name for name, ok in have.items() if not ok]
        if missing:
            raise StackError(f"http_stack fast needs {' and '.join(missing)}: pip install 'respstream[fast]' "
                             "(or use http_stack auto to fall back to asyncio + h11)")
    return {"loop": "uvloop" if have["uvloop"] else "asyncio", "http": "httptools" if have["httptools"] else "h11"}
