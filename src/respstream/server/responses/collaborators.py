"""What a response's work is done with: the router, the server tools and the rewriter, as Protocols.

Why a module of its own: the pipeline and its mixins (tool rounds, ground first) all take these, and the pipeline
imports its mixins; with the Protocols in the pipeline a mixin importing them closed an import circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from respstream.server.upstream.base import Upstream

__all__ = ["RewriterLike", "RouteDecisionLike", "RouterLike", "ToolResultLike", "ToolsLike"]


class RouteDecisionLike(Protocol):
    model_id: str
    category: str
    source: str
    reasoning: str
    upstream: Upstream


class RouterLike(Protocol):
    async def route(self, input_text: str, pinned_model: str | None) -> Any: ...
    def models(self) -> list[str]: ...
    def fallback(self, decision: Any, error: BaseException) -> Any: ...
    def record_success(self, upstream: Upstream) -> None: ...
    def record_failure(self, upstream: Upstream, error: BaseException) -> None: ...


class ToolResultLike(Protocol):
    output: str
    status: str


class ToolsLike(Protocol):
    def specs(self) -> list[dict[str, Any]]: ...
    def names(self) -> set[str]: ...
    async def run(self, name: str, arguments_json: str) -> Any: ...


class RewriterLike(Protocol):
    async def rewrite(self, text: str, *, language: str | None) -> str: ...
