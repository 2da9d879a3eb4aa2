"""OpenTelemetry traces of a delegation tree, read back through the SDK's in-memory exporter."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from membrane.builtin_tools import register_builtin_tools
from membrane.runtime import SubagentStartRequest
from membrane.runtime.tracing import RunTracer
from membrane.testing import ScriptedModel
from membrane.tools.registry import ToolRegistry

from .conftest import Project

SCRIPT = {
    "agents": {
        "lead": [
            {
                "tool_calls": [{"name": "Task", "arguments": {"agent": "kid", "task": "look"}}],
                "usage": {"input_tokens": 11, "output_tokens": 3},
            },
            {"text": "done", "usage": {"input_tokens": 20, "output_tokens": 5}},
        ],
        "kid": [
            {
                "tool_calls": [
                    {"name": "Read", "arguments": {"file_path": "secret.txt"}},
                    {"name": "Nope", "arguments": {}},
                ],
                "usage": {"input_tokens": 7, "output_tokens": 2},
            },
            {"text": "seen", "usage": {"input_tokens": 9, "output_tokens": 1}},
        ],
    }
}


@pytest.mark.anyio
@pytest.mark.parametrize("arguments", [False, True])
async def test_a_delegation_tree_is_one_trace_with_runs_requests_and_tool_calls(
    project: Project, arguments: bool
) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[kid]", model="scripted:trace")
    project.agent("kid", tools="Read", model="scripted:trace")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = RunTracer(provider, arguments=arguments)
    async with project.runtime(ScriptedModel(SCRIPT), tracer=tracer) as runtime:
        lead = await runtime.run(SubagentStartRequest("lead", "lead"))
    spans = exporter.get_finished_spans()
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    assert len({span.context.trace_id for span in spans}) == 1
    [lead_span] = by_name["invoke_agent lead"]
    [kid_span] = by_name["invoke_agent kid"]
    assert lead_span.parent is None
    [task] = by_name["execute_tool Task"]
    # The child hangs from the Task call that started it.
    assert kid_span.parent is not None and kid_span.parent.span_id == task.context.span_id
    assert lead_span.attributes["membrane.run_id"] == lead.run_id
    assert lead_span.attributes["gen_ai.request.model"] == "trace"
    assert lead_span.attributes["gen_ai.provider.name"] == "membrane.scripted"
    assert (lead_span.attributes["membrane.depth"], kid_span.attributes["membrane.depth"]) == (0, 1)
    assert kid_span.attributes["membrane.parent_id"] == lead.run_id
    assert lead_span.attributes["membrane.outcome"] == "completed"
    requests = by_name["chat trace"]
    assert len(requests) == 4
    tokens = sorted(
        (s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"])
        for s in requests
    )
    assert tokens == [(7, 2), (9, 1), (11, 3), (20, 5)]
    for request in requests:
        assert request.parent is not None
        assert request.parent.span_id in (lead_span.context.span_id, kid_span.context.span_id)
    [read] = by_name["execute_tool Read"]
    [nope] = by_name["execute_tool Nope"]
    assert read.parent.span_id == kid_span.context.span_id  # type: ignore[union-attr]
    assert task.parent.span_id == lead_span.context.span_id  # type: ignore[union-attr]
    assert read.attributes["membrane.outcome"] == "ok"
    assert nope.attributes["membrane.outcome"] == "tool-not-visible"
    assert nope.status.status_code is StatusCode.ERROR
    assert task.start_time <= kid_span.start_time and kid_span.end_time <= task.end_time
    if arguments:
        arguments_text = read.attributes["gen_ai.tool.call.arguments"]
        assert json.loads(arguments_text) == {"file_path": "secret.txt"}
    else:
        assert not any("gen_ai.tool.call.arguments" in (s.attributes or {}) for s in spans)


@pytest.mark.anyio
async def test_a_failed_run_ends_its_span_with_an_error(project: Project) -> None:
    project.agent("broken", tools="Read")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    script = {"agents": {"broken": [{"error": "the model is down"}]}}
    async with project.runtime(ScriptedModel(script), tracer=RunTracer(provider)) as runtime:
        await runtime.run(SubagentStartRequest("broken", "go"))
    spans = exporter.get_finished_spans()
    [span] = [s for s in spans if s.name.startswith("invoke_agent")]
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["membrane.outcome"] == "error"
    # The request that failed says so too, with the code a host would catch.
    [request] = [s for s in spans if s.attributes["gen_ai.operation.name"] == "chat"]
    assert request.status.status_code is StatusCode.ERROR
    assert request.attributes["error.type"] == span.attributes["error.type"]
    assert str(request.attributes["error.type"]).startswith("model-")


@pytest.mark.anyio
async def test_a_rule_denial_is_an_apply_guardrail_span_below_the_call(project: Project) -> None:
    registry = ToolRegistry()
    register_builtin_tools(registry)
    project.registry = registry
    project.agent("worker", tools="[Bash]", disallowed_tools="'Bash(rm:*)'")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    calls = [{"name": "Bash", "arguments": {"command": "rm -rf victim"}}]
    script = {"agents": {"worker": [{"tool_calls": calls}, {"text": "done"}]}}
    async with project.runtime(ScriptedModel(script), tracer=RunTracer(provider)) as runtime:
        await runtime.run(SubagentStartRequest("worker", "clean up"))
    spans = exporter.get_finished_spans()
    [bash] = [s for s in spans if s.name == "execute_tool Bash"]
    [guard] = [s for s in spans if s.name == "apply_guardrail membrane"]
    assert guard.parent is not None and guard.parent.span_id == bash.context.span_id
    assert guard.attributes["gen_ai.security.decision.type"] == "deny"
    assert guard.attributes["gen_ai.security.policy.id"] == "Bash(rm:*)"
    assert guard.attributes["gen_ai.security.decision.reason"] == "tool-call-denied"
    assert bash.attributes["error.type"] == "tool-call-denied"
