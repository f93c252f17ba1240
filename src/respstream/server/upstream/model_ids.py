"""Readable model ids for upstreams that name their model after a file (llama.cpp reports the GGUF path). No IO.

How this works: :func:`readable_model_id` turns an id that looks like a file path (absolute, ``./``, ``~``, a
Windows drive, or anything ending in ``.gguf``) into its file name without ``.gguf``; other ids (``gpt-4o-mini``,
``meta-llama/Llama-3.1-8B``) are kept as they are. :func:`alias_models` does that for a whole list and keeps the way
back (readable id -> the id the upstream expects in requests); two paths with the same file name get ``-2``, ``-3``.
"""

from __future__ import annotations

import re

__all__ = ["alias_models", "looks_like_path", "readable_model_id"]

_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def looks_like_path(model_id: str) -> bool:
    """True for ids that are file paths rather than model names."""
    return (
        model_id.startswith(("/", "./", "../", "~", "\\"))
        or bool(_DRIVE.match(model_id))
        or model_id.lower().endswith(".gguf")
    )


def readable_model_id(model_id: str) -> str:
    """A path-like id -> its file name without ``.gguf``; any other id unchanged. Never returns an empty string."""
    if not looks_like_path(model_id):
        return model_id
    base = re.split(r"[\\/]", model_id.rstrip("/\\"))[-1]
    if base.lower().endswith(".gguf"):
        base = base[: -len(".gguf")]
    return base or model_id


def alias_models(upstream_ids: list[str]) -> dict[str, str]:
    """Readable id -> upstream id, in the upstream's order. Readable ids are unique (a clash gets ``-2``, ...)."""
    out: dict[str, str] = {}
    taken = set(upstream_ids)  # an upstream's own plain ids win over a derived one
    for upstream_id in dict.fromkeys(upstream_ids):
        readable = readable_model_id(upstream_id)
        if readable != upstream_id:
            candidate, n = readable, 1
            while candidate in out or (candidate in taken and candidate != upstream_id):
                n += 1
                candidate = f"{readable}-{n}"
            readable = candidate
        out.setdefault(readable, upstream_id)
    return out
