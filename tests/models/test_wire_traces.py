"""A three-level delegation over the real ``openai`` SDK, traced: the spans the OpenTelemetry
SDK's in-memory exporter receives carry what the GenAI semantic conventions require of each
operation, hang where the conventions say, and show every decision of the boundary as an
``apply_guardrail`` span. docs/observability.md's table is rendered from ``CONVENTIONS`` here
(``MEMBRANE_WRITE_DOCS=1`` rewrites it)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from wire_server import WireServer

from membrane import RuntimeOptions, SubagentRuntime, SubagentStartRequest
from membrane.models.specs import ModelRouter
from membrane.runtime import InProcessProvider
from membrane.runtime.tracing import RunTracer
from membrane.runtime.workspace import Workspace

pytestmark = pytest.mark.anyio

REPO_ROOT = Path(__file__).resolve().parents[2]
DOC = REPO_ROOT / "docs" / "observability.md"
BEGIN, END = "<!-- conventions table: begin -->", "<!-- conventions table: end -->"
SECRET = "the stock count is 42"

#: Per operation: each attribute the conventions require (R), conditionally require (C) or
#: recommend (r) that Membrane knows, and what Membrane puts there.
CONVENTIONS: dict[str, list[tuple[str, str, str]]] = {
    "invoke_agent": [
        ("gen_ai.operation.name", "R", "`invoke_agent`"),
        ("gen_ai.provider.name", "R", "the run's model provider (`openai`, `anthropic`, ...)"),
        ("gen_ai.agent.name", "C", "the agent's name"),
        ("gen_ai.agent.id", "C", "the run id"),
        ("gen_ai.conversation.id", "C", "the run id (its session)"),
        ("gen_ai.request.model", "C", "the model the run's definition or call names"),
        ("error.type", "C", "the Membrane error code, when the run failed"),
    ],
    "chat": [
        ("gen_ai.operation.name", "R", "`chat`"),
        ("gen_ai.provider.name", "R", "`openai`, `anthropic` or `membrane.scripted`"),
        ("gen_ai.request.model", "C", "the model asked (the settings entry's `model`)"),
        ("gen_ai.conversation.id", "C", "the run id"),
        ("server.address", "r", "the host of the entry's `base_url`"),
        ("server.port", "C", "the port of the entry's `base_url`"),
        ("gen_ai.response.id", "r", "the provider's response id"),
        ("gen_ai.response.model", "r", "the model that answered, as the provider says"),
        ("gen_ai.response.finish_reasons", "r", "the provider's own finish reason"),
        ("gen_ai.usage.input_tokens", "r", "input tokens"),
        ("gen_ai.usage.output_tokens", "r", "output tokens"),
        ("error.type", "C", "the Membrane error code, when the request failed"),
    ],
    "execute_tool": [
        ("gen_ai.operation.name", "R", "`execute_tool`"),
        ("gen_ai.tool.name", "r", "the name the model called"),
        ("gen_ai.tool.call.id", "r", "the call id"),
        ("gen_ai.tool.type", "r", "`function`"),
        ("error.type", "C", "the error code of a failed or refused call"),
    ],
    "apply_guardrail": [
        ("gen_ai.operation.name", "R", "`apply_guardrail`"),
        ("gen_ai.security.decision.type", "R", "`deny`, `allow` or `warn` (a hook's `ask`)"),
        ("gen_ai.security.target.type", "R", "`tool_call`"),
        ("gen_ai.agent.id", "C", "the run id"),
        ("gen_ai.conversation.id", "C", "the run id"),
        ("gen_ai.security.target.id", "C", "the call id"),
        ("gen_ai.security.decision.reason", "C", "the error code (`tool-not-visible`, ...)"),
        ("gen_ai.security.policy.id", "C", "the permission rule that decided, when one did"),
        ("gen_ai.guardian.name", "r", "`membrane`"),
        ("gen_ai.guardian.version", "r", "Membrane's version"),
    ],
}
LEVELS = {"R": "Required", "C": "Conditionally Required", "r": "Recommended"}
#: The attributes only a failure or a rule sets (not on every span of a successful tree).
CONDITIONAL = {"error.type", "gen_ai.security.policy.id"}


def conventions_table() -> str:
    lines = [
        "| operation | attribute | the conventions | Membrane sets |",
        "| --- | --- | --- | --- |",
    ]
    for operation, rows in CONVENTIONS.items():
        for attribute, level, value in rows:
            lines.append(f"| `{operation}` | `{attribute}` | {LEVELS[level]} | {value} |")
    return "\n".join(lines)


def test_docs_table_is_the_one_this_test_checks() -> None:
    text = DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    wanted = f"{head}{BEGIN}\n{conventions_table()}\n{END}{tail}"
    if os.environ.get("MEMBRANE_WRITE_DOCS") == "1":
        DOC.write_text(wanted, encoding="utf-8")
        text = wanted
    assert text == wanted, "docs/observability.md's table is stale: MEMBRANE_WRITE_DOCS=1"


def _project(tmp_path: Path, server: WireServer) -> Path:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (project / ".membrane" / "config.toml").write_text(
        f'[models.local]\nprovider = "openai"\nmodel = "smollm2"\nbase_url = "{server.url}/v1"\n'
        'api_key_env = "MEMBRANE_TRACE_KEY"\nstream = false\n'
    )
    for name, extra in (
        ("lead", "allowed_subagents: [middle]\n"),
        ("middle", "allowed_subagents: [leaf]\n"),
        ("leaf", ""),
    ):
        (agents / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: {name.title()}.\nmodel: local\ntools: Read\n"
            f"{extra}---\nDo the task.\n"
        )
    (project / "notes.txt").write_text(SECRET + "\n")
    return project


def _script(agent: str, turn: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """lead -> Task(middle) -> Task(leaf) -> Read + a call to a tool leaf cannot see."""
    if turn == 1:
        return {"text": f"{agent} is done"}
    if agent in ("lead", "middle"):
        task = {"agent": "middle" if agent == "lead" else "leaf", "task": "Find the count."}
        return {"tool_calls": [{"name": "Task", "arguments": task}]}
    return {
        "tool_calls": [
            {"name": "Read", "arguments": {"file_path": "notes.txt"}},
            {"name": "Bash", "arguments": {"command": "cat notes.txt"}},
        ]
    }


async def _traced_tree(tmp_path: Path, *, arguments: bool) -> tuple[list[ReadableSpan], int]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with WireServer(_script, wire="openai", flavour="vllm") as server:
        project = _project(tmp_path, server)
        ws = Workspace.open(project)
        router = ModelRouter.from_settings(ws.settings)
        runtime = SubagentRuntime.on_workspace(
            ws,
            InProcessProvider(router),
            store=ws.open_store(tmp_path / "state.db"),
            options=RuntimeOptions(tracer=RunTracer(provider, arguments=arguments)),
        )
        try:
            with anyio.fail_after(60):
                async with runtime:
                    result = await runtime.run(SubagentStartRequest("lead", "Go."))
        finally:
            await router.aclose()
        port = int(server.url.rsplit(":", 1)[1])
    assert result.status == "completed", result.error
    assert server.refused == []
    return list(exporter.get_finished_spans()), port


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


def _under(span: ReadableSpan, parent: ReadableSpan) -> bool:
    return span.parent is not None and span.parent.span_id == parent.context.span_id


@pytest.mark.parametrize("arguments", [False, True])
async def test_a_traced_tree_carries_the_conventions_attributes_where_they_belong(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch, arguments: bool
) -> None:
    monkeypatch.setenv("MEMBRANE_TRACE_KEY", "sk-test")
    spans, port = await _traced_tree(tmp_path, arguments=arguments)
    assert len({span.context.trace_id for span in spans}) == 1
    by_operation: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_operation.setdefault(str(span.attributes["gen_ai.operation.name"]), []).append(span)
    assert {k: len(v) for k, v in by_operation.items()} == {
        "invoke_agent": 3,
        "chat": 6,
        "execute_tool": 4,
        "apply_guardrail": 1,
    }
    for operation, rows in CONVENTIONS.items():
        for span in by_operation[operation]:
            missing = [a for a, _, _ in rows if a not in CONDITIONAL and a not in span.attributes]
            assert missing == [], (span.name, missing)

    # The tree: each child below the Task call that started it.
    lead, middle, leaf = (_one(spans, f"invoke_agent {a}") for a in ("lead", "middle", "leaf"))
    assert lead.parent is None
    [lead_task, middle_task] = sorted(
        (s for s in spans if s.name == "execute_tool Task"), key=lambda s: s.start_time or 0
    )
    assert _under(lead_task, lead) and _under(middle, lead_task)
    assert _under(middle_task, middle) and _under(leaf, middle_task)
    for run in (lead, middle, leaf):
        assert run.kind is SpanKind.INTERNAL
        assert run.attributes["gen_ai.provider.name"] == "openai"
        assert run.attributes["gen_ai.request.model"] == "smollm2"
        assert run.attributes["gen_ai.agent.id"] == run.attributes["membrane.run_id"]

    # Inference: a client call to the server the entry names, with what the server said.
    for chat in by_operation["chat"]:
        assert chat.name == "chat smollm2" and chat.kind is SpanKind.CLIENT
        assert chat.parent is not None
        assert chat.parent.span_id in {s.context.span_id for s in (lead, middle, leaf)}
        assert (chat.attributes["server.address"], chat.attributes["server.port"]) == (
            "127.0.0.1",
            port,
        )
        assert chat.attributes["gen_ai.response.id"] == "chatcmpl-w"
        assert chat.attributes["gen_ai.response.model"] == "m"
        assert chat.attributes["gen_ai.response.finish_reasons"] in (("tool_calls",), ("stop",))
        assert (
            chat.attributes["gen_ai.usage.input_tokens"],
            chat.attributes["gen_ai.usage.output_tokens"],
        ) == (10, 5)
        assert "membrane.usage.cache_read_tokens" not in chat.attributes

    # The boundary's decision: below the refused call, naming the code, never the view.
    bash = _one(spans, "execute_tool Bash")
    read = _one(spans, "execute_tool Read")
    [guard] = by_operation["apply_guardrail"]
    assert guard.name == "apply_guardrail membrane" and _under(guard, bash)
    assert guard.attributes["gen_ai.security.decision.type"] == "deny"
    assert guard.attributes["gen_ai.security.target.type"] == "tool_call"
    assert guard.attributes["gen_ai.security.target.id"] == bash.attributes["gen_ai.tool.call.id"]
    assert guard.attributes["gen_ai.security.decision.reason"] == "tool-not-visible"
    assert bash.attributes["error.type"] == "tool-not-visible"
    assert bash.status.status_code is StatusCode.ERROR
    assert "error.type" not in read.attributes

    # Arguments and results only on opt-in, under the conventions' names.
    if arguments:
        assert json.loads(str(read.attributes["gen_ai.tool.call.arguments"])) == {
            "file_path": "notes.txt"
        }
        assert SECRET in str(read.attributes["gen_ai.tool.call.result"])
    else:
        opted = ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")
        assert not any(key in (s.attributes or {}) for s in spans for key in opted)
