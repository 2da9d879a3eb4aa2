"""The mention clone: ``@NAME rest`` delegated by a one-turn, one-tool copy of the parent."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from membrane.errors import InvalidRequest, ModelError
from membrane.loop.mention import parse_mention, run_mention_clone
from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall
from membrane.testing import FunctionModel, ScriptedModel
from membrane.tools.spec import Tool, ToolContext


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@reviewer check the auth change", ("reviewer", "check the auth change")),
        ("  @reviewer, please look\nat this", ("reviewer", "please look\nat this")),
        ("@code-reviewer: go", ("code-reviewer", "go")),
        ("@Explore", ("Explore", "")),
        ("@reviewer.", ("reviewer", "")),
        ("@team.lead do it", ("team.lead", "do it")),
        ("@a_b2 x", ("a_b2", "x")),
    ],
)
def test_parse_mention_finds_the_name_and_the_rest(text: str, expected: tuple[str, str]) -> None:
    assert parse_mention(text) == expected


@pytest.mark.parametrize(
    "text",
    ["mail me@example.com", "@ reviewer", "@", "", "@-dash", "@reviewer/x go", "hi @reviewer"],
)
def test_parse_mention_rejects_what_is_not_a_leading_mention(text: str) -> None:
    assert parse_mention(text) is None


class Delegation:
    """A stand-in ``Task`` tool recording how it was called."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.tool = Tool(
            name="Task",
            description="Start a child agent.",
            input_schema={
                "type": "object",
                "properties": {"agent_type": {"type": "string"}, "task": {"type": "string"}},
                "required": ["agent_type", "task"],
            },
            handler=self._run,
        )

    async def _run(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        self.calls.append(dict(arguments))
        return f"{arguments['agent_type']} finished: all good"


PARENT_MESSAGES = (
    Message(role="user", content="we changed src/auth.py"),
    Message(
        role="assistant",
        content="",
        tool_calls=(ToolCall(id="p1", name="Read", arguments={"path": "src/auth.py"}),),
    ),
    Message(role="tool", content="def login(): ...", tool_call_id="p1", name="Read"),
    Message(role="assistant", content="I read it."),
)


@pytest.mark.anyio
async def test_the_clone_sees_the_parent_context_and_only_the_delegation_tool() -> None:
    delegation = Delegation()
    model = ScriptedModel(
        {
            "agents": {
                "mention": [
                    {
                        "tool_calls": [
                            {
                                "name": "Task",
                                "arguments": {
                                    "agent_type": "reviewer",
                                    "task": "Review src/auth.py login()",
                                },
                            }
                        ]
                    }
                ]
            }
        }
    )
    result = await run_mention_clone(
        model,
        PARENT_MESSAGES,
        "parent system prompt",
        delegation.tool,
        "@reviewer check the auth change",
        context=ToolContext(agent="main"),
    )
    assert len(model.requests) == 1
    request = model.requests[0]
    assert request.system == "parent system prompt"
    assert request.messages[: len(PARENT_MESSAGES)] == PARENT_MESSAGES
    last = request.messages[-1]
    assert last.role == "user" and "@reviewer check the auth change" in last.content
    assert [entry["name"] for entry in request.tools] == ["Task"]
    assert delegation.calls == [{"agent_type": "reviewer", "task": "Review src/auth.py login()"}]
    assert (result.name, result.rest) == ("reviewer", "check the auth change")
    assert result.delegated
    assert result.calls[0].result.content == "reviewer finished: all good"


@pytest.mark.anyio
async def test_any_other_call_from_the_clone_is_vetoed() -> None:
    delegation = Delegation()
    events: list[tuple[str, dict[str, Any]]] = []

    async def greedy(request: ModelRequest) -> ModelResponse:
        return ModelResponse(
            tool_calls=(
                ToolCall(id="x1", name="Bash", arguments={"command": "rm -rf /"}),
                ToolCall(id="x2", name="Task", arguments={"agent_type": "reviewer"}),
            )
        )

    result = await run_mention_clone(
        FunctionModel(greedy),
        PARENT_MESSAGES,
        "sys",
        delegation.tool,
        "@reviewer look",
        context=ToolContext(),
        emit=lambda kind, data: events.append((kind, dict(data))),
    )
    bash, task = (call.result for call in result.calls)
    assert bash.is_error and json.loads(bash.content)["error"]["code"] == "tool-not-visible"
    assert task.is_error and json.loads(task.content)["error"]["code"] == "tool-arguments-invalid"
    assert delegation.calls == []
    assert not result.delegated
    assert ("vetoed_call", {"name": "Bash", "id": "x1", "code": "tool-not-visible"}) in events


@pytest.mark.anyio
async def test_a_clone_that_makes_no_call_reports_its_text_and_no_calls() -> None:
    async def chatty(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="I would rather answer myself")

    result = await run_mention_clone(
        FunctionModel(chatty), (), "sys", Delegation().tool, "@reviewer hi", context=ToolContext()
    )
    assert result.calls == ()
    assert result.text == "I would rather answer myself"


@pytest.mark.anyio
async def test_a_text_that_is_not_a_mention_is_rejected() -> None:
    with pytest.raises(InvalidRequest) as caught:
        await run_mention_clone(
            FunctionModel(_never), (), "sys", Delegation().tool, "no mention", context=ToolContext()
        )
    assert "@NAME" in caught.value.message


@pytest.mark.anyio
@pytest.mark.parametrize("failure", ["raise", "stop-error"])
async def test_a_failing_model_is_a_model_error(failure: str) -> None:
    async def broken(request: ModelRequest) -> ModelResponse:
        if failure == "raise":
            raise OSError("connection refused")
        return ModelResponse(stop_reason="error")

    with pytest.raises(ModelError):
        await run_mention_clone(
            FunctionModel(broken), (), "sys", Delegation().tool, "@a b", context=ToolContext()
        )


async def _never(request: ModelRequest) -> ModelResponse:
    raise AssertionError("the model must not be called")
