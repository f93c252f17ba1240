"""The ``[models]`` config table: client-facing aliases, input modalities and context windows per model.

How this works: ``aliases`` maps a name clients send (``gpt-4o-mini``) to a served model id or ``auto``; the alias is
resolved before routing, so ``model: "gpt-4o-mini"`` behaves exactly like its target (``auto``: routed;
a model id: pinned). ``input_modalities`` and ``context_window`` are keyed by model id or upstream name (the model id
wins); unset, a model takes what its upstream says (``input_modalities`` attribute; llama.cpp's ``n_ctx`` for the
embedded model), else text only and an unknown window (``truncation`` then leaves the context to the upstream).
``GET /v1/models`` lists every model and alias with its input modalities (:meth:`ModelCatalog.listing`).

```toml
[models]
aliases = { "gpt-4o-mini" = "auto", "gpt-4o" = "qwen2.5-7b-instruct" }
input_modalities = { "qwen2.5-vl-7b" = ["text", "image"] }
context_window = { "qwen2.5-7b-instruct" = 32768 }
```
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MODALITIES", "ModelCatalog", "model_modalities"]

MODALITIES = ("text", "image", "file")

_KEYS = ("aliases", "input_modalities", "context_window")


def model_modalities(model_id: str, upstream: Any, configured: Mapping[str, Sequence[str]]) -> list[str]:
    """The input modalities ``model_id`` (served by ``upstream``) takes: ``configured`` (``[models]
    input_modalities``) for the model id, else for the upstream's name, else the upstream's own
    ``input_modalities`` attribute, else text only."""
    found = configured.get(model_id)
    if found is None:
        found = configured.get(str(getattr(upstream, "name", "")))
    if found is None:
        found = getattr(upstream, "input_modalities", None) or ("text",)
    return [m for m in MODALITIES if m in found]


@dataclass(slots=True)
class ModelCatalog:
    aliases: dict[str, str] = field(default_factory=dict)
    input_modalities: dict[str, list[str]] = field(default_factory=dict)
    context_window: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_config(cls, table: Mapping[str, Any] | None) -> ModelCatalog:
        """Build from the ``[models]`` table. Raises ValueError naming the key that is wrong."""
        table = dict(table or {})
        unknown = sorted(set(table) - set(_KEYS))
        if unknown:
            raise ValueError(f"unknown [models] key {unknown[0]!r} (known: {', '.join(_KEYS)})")
        aliases = table.get("aliases") or {}
        if not isinstance(aliases, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                    for k, v in aliases.items()):
            raise ValueError("models.aliases must map names to model ids (or \"auto\")")
        if "auto" in aliases:
            raise ValueError("models.aliases cannot redefine \"auto\"")
        modalities = table.get("input_modalities") or {}
        if not isinstance(modalities, dict):
            raise ValueError("models.input_modalities must be a table of model id -> list of modalities")
        for key, value in modalities.items():
            if not isinstance(value, list) or not value or any(m not in MODALITIES for m in value):
                raise ValueError(f"models.input_modalities.{key} must be a list of {', '.join(MODALITIES)}")
        windows = table.get("context_window") or {}
        if not isinstance(windows, dict) or any(isinstance(v, bool) or not isinstance(v, int) or v < 1
                                                for v in windows.values()):
            raise ValueError("models.context_window must map model ids to positive token counts")
        return cls(dict(aliases), {k: list(v) for k, v in modalities.items()}, dict(windows))

    def resolve(self, model: str) -> str:
        """The model id (or ``auto``) a client's ``model`` stands for."""
        return self.aliases.get(model, model)

    def modalities(self, model_id: str, upstream: Any) -> list[str]:
        return model_modalities(model_id, upstream, self.input_modalities)

    def window(self, model_id: str, upstream: Any) -> int | None:
        """The context window in tokens, or ``None`` when nobody said."""
        for key in (model_id, str(getattr(upstream, "name", ""))):
            if key in self.context_window:
                return self.context_window[key]
        found = getattr(upstream, "context_window", None) or getattr(upstream, "n_ctx", None)
        return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else None

    def listing(self, served: Iterable[tuple[str, Any]]) -> list[dict[str, Any]]:
        """``/v1/models`` entries: ``auto``, every served ``(model id, upstream)``, then the aliases."""
        entries: dict[str, dict[str, Any]] = {}
        served = list(served)
        # `auto` may route to any served model: it promises only what every one of them takes.
        common = [m for m in MODALITIES if all(m in self.modalities(mid, up) for mid, up in served)] or ["text"]
        entries["auto"] = {"id": "auto", "object": "model", "created": 0, "owned_by": "respstream",
                           "input_modalities": common}
        for model_id, upstream in served:
            if model_id not in entries:
                entries[model_id] = {"id": model_id, "object": "model", "created": 0, "owned_by": "respstream",
                                     "input_modalities": self.modalities(model_id, upstream)}
                provider = getattr(upstream, "provider", None)  # (the provider adapters: anthropic, gemini)
                if isinstance(provider, str):
                    entries[model_id]["provider"] = provider
        for alias, target in self.aliases.items():
            if alias in entries or target not in entries:
                continue  # an alias of nothing served is not listed (a request for it gets model_not_found)
            entries[alias] = {**entries[target], "id": alias, "alias_for": target}
        return list(entries.values())
