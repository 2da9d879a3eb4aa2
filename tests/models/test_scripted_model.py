"""``ScriptedModel``: script loading, replay per run, errors with codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.errors import ModelError, ScriptError
from membrane.models import Message, ModelRequest, ScriptedModel, Usage
from membrane.testing import ScriptedModel as PublicScriptedModel

SCRIPT = """\
agents:
  parent:
    - tool_calls:
        - {name: Task, arguments: {agent: reviewer, task: "Review src/"}}
    - text: "final answer"
  reviewer:
    - tool_calls: [{name: Grep, arguments: {pattern: "TODO"}}, {name: Bash, id: mine}]
    - text: "done"
"""


def ask(agent: str, run_id: str = "run-1", *, tools: tuple[str, ...] = ()) -> ModelRequest:
    return ModelRequest(
        agent=agent,
        run_id=run_id,
        system="You review code.",
        messages=(Message(role="user", content="go"),),
        tools=tuple({"name": n, "description": "", "input_schema": {}} for n in tools),
    )


async def replay(model: ScriptedModel, agent: str, run_id: str, turns: int) -> list[Any]:
    return [await model.request(ask(agent, run_id)) for _ in range(turns)]


def test_the_public_double_is_the_scripted_model() -> None:
    assert PublicScriptedModel is ScriptedModel


@pytest.mark.anyio
async def test_a_run_replays_its_agents_turns_in_order() -> None:
    model = ScriptedModel(SCRIPT)
    first, second = await replay(model, "parent", "run-1", 2)
    assert [(c.name, dict(c.arguments)) for c in first.tool_calls] == [
        ("Task", {"agent": "reviewer", "task": "Review src/"})
    ]
    assert (first.stop_reason, first.text) == ("tool_calls", "")
    assert (second.text, second.tool_calls, second.stop_reason) == ("final answer", (), "stop")


@pytest.mark.anyio
async def test_each_run_id_starts_again_from_turn_zero() -> None:
    model = ScriptedModel(SCRIPT)
    a = await model.request(ask("reviewer", "run-a"))
    b = await model.request(ask("reviewer", "run-b"))
    a2 = await model.request(ask("reviewer", "run-a"))
    assert [c.name for c in a.tool_calls] == [c.name for c in b.tool_calls] == ["Grep", "Bash"]
    assert a2.text == "done"
    assert (model.turns_used("run-a"), model.turns_used("run-b")) == (2, 1)


@pytest.mark.anyio
async def test_tool_call_ids_are_deterministic_unless_the_script_gives_one() -> None:
    model = ScriptedModel(SCRIPT)
    response = await model.request(ask("reviewer", "r7"))
    assert [c.id for c in response.tool_calls] == ["call_r7_0_0", "mine"]
    again = await ScriptedModel(SCRIPT).request(ask("reviewer", "r7"))
    assert [c.id for c in again.tool_calls] == ["call_r7_0_0", "mine"]


@pytest.mark.anyio
async def test_the_script_calls_tools_the_request_did_not_offer() -> None:
    model = ScriptedModel(SCRIPT)
    response = await model.request(ask("reviewer", tools=("Read",)))
    assert [c.name for c in response.tool_calls] == ["Grep", "Bash"]


@pytest.mark.anyio
async def test_every_request_is_recorded_in_order() -> None:
    model = ScriptedModel(SCRIPT)
    requests = [ask("parent", "p"), ask("reviewer", "r"), ask("parent", "p")]
    for request in requests:
        await model.request(request)
    assert model.requests == requests


@pytest.mark.anyio
async def test_running_out_of_turns_names_the_agent_and_the_turn() -> None:
    model = ScriptedModel(SCRIPT)
    await replay(model, "parent", "run-1", 2)
    with pytest.raises(ScriptError) as info:
        await model.request(ask("parent", "run-1"))
    error = info.value
    assert error.code == "model-script-invalid"
    assert (error.data["agent"], error.data["turn"], error.data["run_id"]) == ("parent", 2, "run-1")
    assert "'parent'" in str(error) and "turn 2" in str(error)


@pytest.mark.anyio
async def test_agents_without_an_entry_use_the_default_list() -> None:
    model = ScriptedModel({"agents": {"parent": [{"text": "p"}]}, "default": [{"text": "d"}]})
    assert (await model.request(ask("anyone", "run-1"))).text == "d"
    assert (await model.request(ask("parent", "run-2"))).text == "p"


@pytest.mark.anyio
async def test_an_agent_with_no_entry_and_no_default_is_a_script_error() -> None:
    model = ScriptedModel(SCRIPT)
    with pytest.raises(ScriptError, match="no turns for agent 'stranger'") as info:
        await model.request(ask("stranger"))
    assert "parent, reviewer" in str(info.value)


@pytest.mark.anyio
async def test_an_error_turn_raises_model_error_and_uses_up_the_turn() -> None:
    model = ScriptedModel({"default": [{"error": "rate limited"}, {"text": "recovered"}]})
    with pytest.raises(ModelError, match="rate limited") as info:
        await model.request(ask("a"))
    assert info.value.code == "model-error"
    assert info.value.data["turn"] == 0
    assert (await model.request(ask("a"))).text == "recovered"


@pytest.mark.anyio
async def test_stop_reason_and_usage_come_from_the_script() -> None:
    script = {
        "default": [
            {"text": "", "stop_reason": "length", "usage": {"input_tokens": 7}},
            {"text": "both", "tool_calls": [{"name": "Read"}], "stop_reason": "error"},
        ]
    }
    model = ScriptedModel(script)
    first = await model.request(ask("a"))
    assert (first.text, first.stop_reason, first.usage) == ("", "length", Usage(7, 0))
    second = await model.request(ask("a"))
    assert (second.text, second.stop_reason) == ("both", "error")
    assert [(c.name, dict(c.arguments)) for c in second.tool_calls] == [("Read", {})]


@pytest.mark.anyio
async def test_a_script_loads_from_a_path_or_a_path_string(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(SCRIPT)
    for script in (path, str(path)):
        model = ScriptedModel(script)
        assert model.source == str(path)
        assert (await model.request(ask("reviewer"))).tool_calls[0].name == "Grep"


@pytest.mark.anyio
async def test_arguments_are_plain_json_values() -> None:
    model = ScriptedModel(
        "default:\n  - tool_calls:\n      - name: T\n        arguments: "
        "{n: 1.5, k: 2, b: true, s: yes, z: null, l: [1, {x: off}]}\n"
    )
    arguments = (await model.request(ask("a"))).tool_calls[0].arguments
    assert arguments == {"n": 1.5, "k": 2, "b": True, "s": "yes", "z": None, "l": [1, {"x": "off"}]}
    assert [type(v) for v in (arguments["n"], arguments["k"], arguments["s"])] == [float, int, str]


@pytest.mark.anyio
async def test_concurrent_runs_of_one_agent_each_get_the_whole_script() -> None:
    model = ScriptedModel(SCRIPT)
    texts: dict[str, str] = {}

    async def run(run_id: str) -> None:
        await model.request(ask("reviewer", run_id))
        texts[run_id] = (await model.request(ask("reviewer", run_id))).text

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for n in range(5):
                group.start_soon(run, f"run-{n}")
    assert texts == {f"run-{n}": "done" for n in range(5)}


MALFORMED = [
    ({}, "script", "empty"),
    ([], "script", "expected a mapping"),
    ({"agent": {}}, "script.agent", "did you mean `agents`"),
    ({"agents": []}, "agents", "expected a mapping"),
    ({"agents": {}}, "agents", "no agent has turns"),
    ({"agents": {"a": []}}, "agents.a", "non-empty list"),
    ({"agents": {"a": [{}]}}, "agents.a[0]", "needs `text`, `tool_calls` or `error`"),
    ({"agents": {"a": [{"txt": "x"}]}}, "agents.a[0].txt", "did you mean `text`"),
    ({"agents": {"a": [{"text": 3}]}}, "agents.a[0].text", "expected a string"),
    ({"default": [{"tool_calls": {"name": "T"}}]}, "default[0].tool_calls", "expected a list"),
    ({"default": [{"tool_calls": [{"arguments": {}}]}]}, "default[0].tool_calls[0].name", "name"),
    ({"default": [{"tool_calls": [{"name": ""}]}]}, "default[0].tool_calls[0].name", "empty"),
    (
        {"default": [{"tool_calls": [{"name": "T", "arguments": [1]}]}]},
        "default[0].tool_calls[0].arguments",
        "expected a mapping",
    ),
    ({"default": [{"text": "x", "stop_reason": "done"}]}, "default[0].stop_reason", "one of"),
    ({"default": [{"text": "x", "usage": {"input_tokens": -1}}]}, "usage.input_tokens", "integer"),
    ({"default": [{"text": "x", "usage": {"tokens": 1}}]}, "default[0].usage.tokens", "unknown"),
    ({"default": [{"error": "boom", "text": "x"}]}, "default[0]", "only `error`"),
    ({"default": [{"error": 5}]}, "default[0].error", "expected a string"),
]


@pytest.mark.parametrize(("script", "key", "problem"), MALFORMED)
def test_a_malformed_script_names_the_key(script: Any, key: str, problem: str) -> None:
    with pytest.raises(ScriptError) as info:
        ScriptedModel(script)
    assert info.value.code == "model-script-invalid"
    assert key in info.value.data["key"]
    assert problem in str(info.value)


def test_a_malformed_file_names_the_file_the_key_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("agents:\n  parent:\n    - text: ok\n    - tool_calls:\n        - {nam: T}\n")
    with pytest.raises(ScriptError) as info:
        ScriptedModel(path)
    error = info.value
    assert (error.data["path"], error.data["key"], error.data["line"]) == (
        str(path),
        "agents.parent[1].tool_calls[0].nam",
        5,
    )
    assert str(error).startswith(f"{path}:5: ")


def test_a_yaml_date_in_arguments_must_be_quoted() -> None:
    with pytest.raises(ScriptError, match="quote it") as info:
        ScriptedModel("default:\n  - tool_calls: [{name: T, arguments: {since: 2024-01-01}}]\n")
    assert info.value.data["key"] == "default[0].tool_calls[0].arguments.since"


def test_invalid_yaml_is_a_script_error_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("agents:\n  parent:\n    - text: [unclosed\n")
    with pytest.raises(ScriptError, match="not valid YAML") as info:
        ScriptedModel(path)
    assert info.value.data["path"] == str(path)
    assert info.value.data["line"] is not None


def test_a_missing_file_is_a_script_error_with_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ScriptError, match="cannot read") as info:
        ScriptedModel(str(missing))
    assert info.value.data["path"] == str(missing)


def test_a_duplicate_key_is_a_script_error_with_the_line() -> None:
    with pytest.raises(ScriptError, match="duplicate key") as info:
        ScriptedModel("agents:\n  a: [{text: x}]\n  a: [{text: y}]\n")
    assert info.value.data["line"] == 3


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("default:\n  - text: x\n    usage: {input_tokens: !!int abc}\n", 3, "invalid value"),
        ("default:\n  - tool_calls: [{name: T, arguments: {d: 2023-02-30}}]\n", 2, "day is"),
        ("default:\n  - text: !!float zz\n", 2, "invalid value"),
        ("default:\n  - text: " + "[" * 3000 + "]" * 3000 + "\n", 2, "nests too deeply"),
    ],
)
def test_a_value_yaml_cannot_build_is_a_script_error_with_the_line(
    text: str, line: int, problem: str
) -> None:
    with pytest.raises(ScriptError, match="not valid YAML") as info:
        ScriptedModel(text)
    assert info.value.data["line"] == line
    assert problem in str(info.value)


def test_a_one_line_string_yaml_cannot_build_is_read_as_a_path() -> None:
    with pytest.raises(ScriptError, match="cannot read"):
        ScriptedModel("!!int abc")


@pytest.mark.parametrize("number", [".nan", ".inf", "-.inf"])
def test_arguments_that_are_not_json_numbers_are_refused(number: str) -> None:
    with pytest.raises(ScriptError, match="not a JSON number") as info:
        ScriptedModel(f"default:\n  - tool_calls: [{{name: T, arguments: {{x: {number}}}}}]\n")
    assert info.value.data["key"] == "default[0].tool_calls[0].arguments.x"
    assert info.value.data["line"] == 2


def test_arguments_that_contain_themselves_are_refused() -> None:
    loop: dict[str, Any] = {}
    loop["again"] = loop
    script = {"default": [{"tool_calls": [{"name": "T", "arguments": loop}]}]}
    with pytest.raises(ScriptError, match="contains itself"):
        ScriptedModel(script)


@pytest.mark.parametrize("delay", [-1, "soon", True, 3601])
def test_a_turns_delay_is_a_number_of_seconds_from_0_to_3600(delay: object) -> None:
    with pytest.raises(ScriptError, match=r"agents\.slow\[0\]\.delay") as info:
        ScriptedModel({"agents": {"slow": [{"text": "done", "delay": delay}]}})
    assert info.value.code == "model-script-invalid"


@pytest.mark.anyio
async def test_a_delayed_turn_waits_on_the_event_loop_and_then_answers() -> None:
    model = ScriptedModel({"agents": {"slow": [{"text": "done", "delay": 0.01}]}})
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            waited = anyio.Event()

            async def beside() -> None:
                # Runs while the turn waits: the delay does not block the loop.
                waited.set()

            group.start_soon(beside)
            response = await model.request(ask("slow"))
    assert waited.is_set() and response.text == "done"
