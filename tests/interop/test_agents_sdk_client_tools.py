"""The OpenAI Agents SDK's own client-run tools (``ShellTool``, ``ApplyPatchTool``, ``LocalShellTool``) through our
gateway (``openai`` dialect, loopback) on the SIMULATED scripted upstream, which calls the flat function the gateway
offers for the tool, then answers the tool's output with text. The SDK must get a ``shell_call`` /
``apply_patch_call`` / ``local_shell_call`` it can run, send the ``*_output`` item back, and finish the run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    ApplyPatchTool,
    LocalShellTool,
    OpenAIResponsesModel,
    Runner,
    ShellTool,
    set_tracing_disabled,
)
from agents.editor import ApplyPatchOperation, ApplyPatchResult
from openai import AsyncOpenAI

from .gateways import Gateway, serve


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    yield from serve("openai", "scripted:4?delay_ms=1&tool=shell,apply_patch,local_shell")


class Editor:
    """Records the operations the SDK hands it (no file is touched)."""

    def __init__(self) -> None:
        self.operations: list[tuple[str, str]] = []

    def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        self.operations.append((str(operation.type), operation.path))
        return ApplyPatchResult(status="completed", output=f"created {operation.path}")

    def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return self.create_file(operation)

    def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return self.create_file(operation)


async def _run(gateway: Gateway, tool: Any) -> Any:
    set_tracing_disabled(True)  # tracing would try to upload to api.openai.com
    client = AsyncOpenAI(base_url=gateway.base_url, api_key="k", max_retries=0, timeout=20)
    agent = Agent(name="dev", instructions="Use your tool once, then answer.", tools=[tool],
                  model=OpenAIResponsesModel(model="auto", openai_client=client))
    try:
        return await Runner.run(agent, "Do the task.", max_turns=4)
    finally:
        await client.close()


async def test_shell_tool(gateway: Gateway) -> None:
    commands: list[list[str]] = []

    def executor(request: Any) -> str:
        commands.append(list(request.data.action.commands))
        return "ok\n"

    result = await _run(gateway, ShellTool(executor=executor))
    assert commands == [["example"]]
    assert result.final_output


async def test_apply_patch_tool(gateway: Gateway) -> None:
    editor = Editor()
    result = await _run(gateway, ApplyPatchTool(editor=editor))
    assert editor.operations == [("create_file", "example")]
    assert result.final_output


async def test_local_shell_tool(gateway: Gateway) -> None:
    commands: list[list[str]] = []

    def executor(request: Any) -> str:
        commands.append(list(request.data.action.command))
        return "a.txt"

    result = await _run(gateway, LocalShellTool(executor=executor))
    assert commands == [["example"]]
    assert result.final_output
