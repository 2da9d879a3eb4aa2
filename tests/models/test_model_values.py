"""The model values and ``FunctionModel``, the dynamic public double."""

from __future__ import annotations

import pytest

import membrane
import membrane.lowlevel
from membrane.errors import ModelError
from membrane.models import Message, Model, ModelRequest, ModelResponse, ToolCall, Usage
from membrane.testing import FunctionModel, ScriptedModel


def test_usage_adds_up() -> None:
    assert Usage(1, 2) + Usage(10, 20) == Usage(11, 22)


def test_a_response_becomes_the_assistant_message_that_records_it() -> None:
    call = ToolCall(id="c1", name="Read", arguments={"path": "a.py"})
    response = ModelResponse(text="reading", tool_calls=(call,), stop_reason="tool_calls")
    assert response.message() == Message(role="assistant", content="reading", tool_calls=(call,))


def test_defaults_describe_a_plain_final_answer() -> None:
    response = ModelResponse()
    assert (response.text, response.tool_calls, response.stop_reason, response.usage) == (
        "",
        (),
        "stop",
        Usage(0, 0),
    )
    message = Message(role="user")
    assert (message.kind, message.is_error, message.tool_call_id) == ("text", False, None)


def test_the_doubles_satisfy_the_model_protocol() -> None:
    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text=request.agent)

    models: list[Model] = [FunctionModel(answer), ScriptedModel({"default": [{"text": "x"}]})]
    assert [m.name for m in models] == ["function", "scripted"]


def test_the_package_exports_the_model_and_store_names() -> None:
    for name in ("Model", "ModelRequest", "ModelResponse", "Message", "ToolCall", "Usage"):
        assert getattr(membrane, name) is getattr(membrane.models, name)
    assert membrane.lowlevel.Store is membrane.store.Store
    assert membrane.SQLiteStore is membrane.store.SQLiteStore


@pytest.mark.anyio
async def test_function_model_records_each_request_and_returns_what_fn_returns() -> None:
    async def answer(request: ModelRequest) -> ModelResponse:
        if request.run_id == "bad":
            raise ModelError("provider down")
        return ModelResponse(text=f"hello {request.agent}")

    model = FunctionModel(answer, name="echo")
    good = ModelRequest(agent="a", run_id="ok", system="", messages=())
    bad = ModelRequest(agent="a", run_id="bad", system="", messages=())
    assert (await model.request(good)).text == "hello a"
    with pytest.raises(ModelError):
        await model.request(bad)
    assert model.requests == [good, bad]
    assert model.name == "echo"
