"""The rewrite pass after generation: a pipeline of small rewriters over the final answer text.

How this works: :class:`Rewriter` runs its steps in order, each taking the previous step's text. The defaults are
pure and cheap: :func:`strip_tool_markup` (tool-call syntax a model printed instead of calling: ``<tool_call>…``,
``<|tool_call|>…``, ``[TOOL_CALLS]…``, ``<function=…>…</function>``, ``<|python_tag|>…``), :func:`strip_think`
(leftover ``<think>`` blocks) and :func:`normalise_whitespace` (trailing spaces, runs of blank lines, leading and
trailing whitespace). Opt-in steps ask an upstream model: :class:`LanguageAlignment` (answer in the requested language)
and :class:`SpellingFix`; a model step that fails, times out or returns something implausible keeps its input. A step
that raises is skipped, so ``rewrite()`` never loses the answer. When nothing applies the input comes back unchanged
(the pipeline announces ``response.rewrite.in_progress`` only when the text changed).

Config (the ``[rewrite]`` table, or ``Rewriter.from_config``)::

    steps = ["strip_tool_markup", "strip_think", "whitespace"]   # default; [] disables the pass
    language_alignment = false     # opt-in: rewrite into `language` (per call, or the default below)
    language = "nl"                # default target language for alignment (none: alignment only when asked)
    spelling = false               # opt-in
    upstream = "embedded"          # spec for the model steps (see upstream.factory), and
    model = "smollm2-135m-instruct"
    timeout = 20.0                 # seconds per model step
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, Protocol

from respstream.server.upstream.base import Chunk, GenerationRequest, TextDelta, Upstream, UpstreamError

__all__ = [
    "DEFAULT_STEPS",
    "FunctionStep",
    "LanguageAlignment",
    "RewriteStep",
    "Rewriter",
    "SpellingFix",
    "normalise_whitespace",
    "strip_think",
    "strip_tool_markup",
]

log = logging.getLogger("respstream.server.responses.rewrite")

DEFAULT_STEPS = ("strip_tool_markup", "strip_think", "whitespace")


class RewriteStep(Protocol):
    name: str

    async def __call__(self, text: str, language: str | None) -> str: ...


# -- pure rewriters --------------------------------------------------------------------------------------------------

# Every pure rewriter is linear in its input (the text comes from a model: assume it is hostile). Opening tags are
# found with a fixed-length pattern; each closing tag is searched for once, and when it is missing the block runs to the
# end, so no character is scanned twice. (A regex like ``<function=[^>]*>`` rescans the rest of the text for every
# ``<function=`` when no ``>`` follows: quadratic.)
_TAG_OPEN = re.compile(r"<tool_calls?>|<function=")
_TAG_CLOSE = {"<tool_call>": re.compile(r"</tool_call>"), "<function=": re.compile(r"</function>")}
_TAG_CLOSE_PLURAL = re.compile(r"</tool_calls?>")
_PREFIXED = re.compile(r"\[TOOL_CALLS\]|<\|tool_call\|>|<\|python_tag\|>|<\|tool_calls_section_begin\|>")
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)|</think>", re.DOTALL)


def _json_value_end(text: str, start: int) -> int:
    """End of a JSON-ish bracketed value starting at or after ``start`` (skipping spaces); else end of line."""
    pos = start
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    if pos >= len(text) or text[pos] not in "[{":
        newline = text.find("\n", start)
        return len(text) if newline == -1 else newline
    depth, in_string, escaped = 0, False, False
    for i in range(pos, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _strip_tagged(text: str) -> str:
    """Drop ``<tool_call>…</tool_call>``, ``<tool_calls>…</tool_calls>`` and ``<function=…>…</function>`` blocks (an
    unclosed one runs to the end). Linear: see the comment above ``_TAG_OPEN``."""
    out: list[str] = []
    pos = 0
    while (opening := _TAG_OPEN.search(text, pos)) is not None:
        body = opening.end()
        tag = opening.group(0)
        if tag == "<function=":
            gt = text.find(">", body)
            if gt == -1:  # no ">" anywhere after: no opening tag of any kind can follow
                break
            body = gt + 1
            closing = _TAG_CLOSE[tag]
        else:
            closing = _TAG_CLOSE.get(tag, _TAG_CLOSE_PLURAL)
        out.append(text[pos : opening.start()])
        end = closing.search(text, body)
        if end is None:
            return "".join(out)
        pos = end.end()
    out.append(text[pos:])
    return "".join(out)


def strip_tool_markup(text: str) -> str:
    """Remove tool-call markup a model printed as text (see module docstring for the shapes). Linear time."""
    if "<" not in text and "[TOOL_CALLS]" not in text:
        return text
    text = _strip_tagged(text)
    out: list[str] = []
    pos = 0
    while (match := _PREFIXED.search(text, pos)) is not None:
        out.append(text[pos : match.start()])
        pos = _json_value_end(text, match.end())
    out.append(text[pos:])
    return "".join(out)


def strip_think(text: str) -> str:
    """Remove ``<think>…</think>`` blocks (an unclosed one runs to the end) and stray ``</think>``."""
    if "think>" not in text:
        return text
    return _THINK.sub("", text)


_BLANK_RUNS = re.compile(r"\n{3,}")


def normalise_whitespace(text: str) -> str:
    """Trailing spaces off every line, at most one blank line in a row, no leading/trailing whitespace. Linear: the
    per-line ``rstrip`` replaces ``[ \\t]+$`` (MULTILINE), which backtracks over every space run that does not end a
    line ("a" + 150,000 spaces + "x" took 39 s)."""
    lines = text.replace("\r\n", "\n").split("\n")
    text = "\n".join(line.rstrip(" \t") for line in lines)
    # The regex scans the whole answer; most answers have no run of three newlines for it to find.
    return (_BLANK_RUNS.sub("\n\n", text) if "\n\n\n" in text else text).strip()


class FunctionStep:
    """A pure ``str -> str`` function as a step."""

    def __init__(self, name: str, func: Callable[[str], str]) -> None:
        self.name = name
        self.func = func

    async def __call__(self, text: str, language: str | None) -> str:
        return self.func(text)


_BUILTIN: dict[str, Callable[[str], str]] = {
    "strip_tool_markup": strip_tool_markup,
    "strip_think": strip_think,
    "whitespace": normalise_whitespace,
}


# -- model rewriters -------------------------------------------------------------------------------------------------


class _ModelStep:
    name = "model"
    min_ratio, max_ratio = 0.3, 3.0

    def __init__(self, upstream: Upstream, model: str | None = None, *, timeout: float = 20.0) -> None:
        self.upstream = upstream
        self.model = model or (upstream.models[0] if upstream.models else "default")
        self.timeout = timeout

    def instruction(self, language: str | None) -> str | None:
        raise NotImplementedError

    async def __call__(self, text: str, language: str | None) -> str:
        instruction = self.instruction(language)
        if instruction is None or not text.strip():
            return text
        request = GenerationRequest(
            model=self.model,
            messages=[{"role": "system", "content": instruction}, {"role": "user", "content": text}],
            max_output_tokens=max(64, len(text)),
            temperature=0.0,
        )
        parts: list[str] = []
        try:
            async with asyncio.timeout(self.timeout):
                async for chunk in self.upstream.generate(request):
                    if isinstance(chunk, TextDelta):
                        parts.append(chunk.text)
        except (UpstreamError, TimeoutError) as exc:
            log.warning("rewrite step %s skipped: %s", self.name, exc)
            return text
        result = strip_think("".join(parts)).strip()
        # A small model can answer the text instead of rewriting it: keep the original when the size is implausible.
        if not result or not self.min_ratio <= len(result) / max(1, len(text)) <= self.max_ratio:
            return text
        return result


class LanguageAlignment(_ModelStep):
    """Rewrite the answer into ``language`` (per call, else ``default_language``); no language -> unchanged."""

    name = "language_alignment"

    def __init__(
        self,
        upstream: Upstream,
        model: str | None = None,
        *,
        default_language: str | None = None,
        timeout: float = 20.0,
    ) -> None:
        super().__init__(upstream, model, timeout=timeout)
        self.default_language = default_language

    def instruction(self, language: str | None) -> str | None:
        target = language or self.default_language
        if not target:
            return None
        return (
            f"Rewrite the user's text in the language '{target}'. Keep its meaning, markdown and line breaks. "
            "If it is already in that language, return it unchanged. Output only the rewritten text."
        )


class SpellingFix(_ModelStep):
    """Fix spelling and grammar without changing meaning."""

    name = "spelling"
    min_ratio, max_ratio = 0.8, 1.25

    def instruction(self, language: str | None) -> str | None:
        return (
            "Correct the spelling and grammar of the user's text. Do not change its meaning, language, markdown or "
            "line breaks. Output only the corrected text."
        )


# -- the pass --------------------------------------------------------------------------------------------------------


class Rewriter:
    """Runs rewrite steps in order. ``rewriters``: a list of steps (or built-in names), a ``[rewrite]`` config mapping,
    or ``None`` for the defaults. Raises ValueError on an unknown step name or config key."""

    def __init__(
        self,
        rewriters: Sequence[RewriteStep | str] | Mapping[str, Any] | None = None,
        *,
        upstream_factory: Callable[[str], Upstream] | None = None,
    ) -> None:
        if isinstance(rewriters, Mapping):
            self.steps = _steps_from_config(rewriters, upstream_factory)
        else:
            self.steps = [_step(s) for s in (DEFAULT_STEPS if rewriters is None else rewriters)]

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    @property
    def model_steps(self) -> Rewriter:
        """The same without the pure clean-up steps (markup, ``<think>``, whitespace), which exist for small local
        models: for an upstream whose text is passed as written (``exact_text``: the provider adapters)."""
        kept = Rewriter([])
        kept.steps = [s for s in self.steps if not isinstance(s, FunctionStep)]
        return kept

    async def rewrite(self, text: str, *, language: str | None = None) -> str:
        """The rewritten text, or ``text`` itself when no step changed anything. Never raises."""
        result = text
        for step in self.steps:
            try:
                result = await step(result, language)
            except Exception:  # a broken rewriter must never cost the answer
                log.exception("rewrite step %s failed; skipped", step.name)
        return text if result == text else result


def _step(item: RewriteStep | str) -> RewriteStep:
    if isinstance(item, str):
        if item not in _BUILTIN:
            raise ValueError(f"unknown rewrite step {item!r}; built-in: {', '.join(_BUILTIN)}")
        return FunctionStep(item, _BUILTIN[item])
    return item


_CONFIG_KEYS = {"steps", "language_alignment", "language", "spelling", "upstream", "model", "timeout"}


def _steps_from_config(config: Mapping[str, Any], factory: Callable[[str], Upstream] | None) -> list[RewriteStep]:
    unknown = set(config) - _CONFIG_KEYS
    if unknown:
        raise ValueError(f"unknown rewrite config key(s): {', '.join(sorted(unknown))}")
    names = config.get("steps", list(DEFAULT_STEPS))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError("rewrite.steps must be a list of step names")
    steps: list[RewriteStep] = [_step(n) for n in names]
    want_language = bool(config.get("language_alignment"))
    want_spelling = bool(config.get("spelling"))
    if want_language or want_spelling:
        spec = str(config.get("upstream") or "embedded")
        if factory is None:
            from respstream.server.upstream.factory import build_upstream

            factory = build_upstream
        upstream = _LazyUpstream(spec, factory)
        model = config.get("model")
        timeout = float(config.get("timeout", 20.0))
        if want_language:
            steps.append(LanguageAlignment(upstream, model, default_language=config.get("language"), timeout=timeout))
        if want_spelling:
            steps.append(SpellingFix(upstream, model, timeout=timeout))
        # Model output gets the cheap clean-up again.
        steps += [_step("strip_tool_markup"), _step("whitespace")]
    return steps


class _LazyUpstream:
    """Builds the rewrite model's upstream on first use, so a disabled or unused rewriter costs nothing."""

    def __init__(self, spec: str, factory: Callable[[str], Upstream]) -> None:
        self.spec = spec
        self.factory = factory
        self._upstream: Upstream | None = None
        self.name = f"rewrite:{spec}"
        self.models: list[str] = []

    def _get(self) -> Upstream:
        if self._upstream is None:
            self._upstream = self.factory(self.spec)
            self.models = list(self._upstream.models)
        return self._upstream

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        upstream = self._get()
        if request.model == "default" and upstream.models:
            request.model = upstream.models[0]
        async for chunk in upstream.generate(request):
            yield chunk

    async def aclose(self) -> None:
        if self._upstream is not None:
            await self._upstream.aclose()
