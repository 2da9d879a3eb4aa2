"""OpenTelemetry traces of a runtime's runs (the optional ``otel`` extra).

``RunTracer`` turns the lifecycle events of every run into spans, with the times the events
carry, so a delegation tree shows up as one trace in any OpenTelemetry backend:

* one span per run, ``invoke_agent AGENT`` (attributes ``gen_ai.agent.name``,
  ``gen_ai.request.model``, ``membrane.run_id``, ``membrane.depth``, ``membrane.parent_id``,
  ``membrane.provider``, ``membrane.outcome``), a child of its parent run's span when the parent
  is a run of this runtime, so the whole tree shares one trace id;
* one span per model request, ``chat MODEL``, below its run (``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, cache tokens, ``membrane.turn``);
* one span per tool call, ``execute_tool TOOL`` (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``membrane.outcome``: ``ok`` or the error code, e.g. ``tool-call-denied``). The call's
  arguments are recorded (``membrane.tool.arguments``, JSON) only when the tracer is built with
  ``arguments=True`` (the ``trace_tool_arguments`` setting): they can hold secrets.

A run that fails ends its span with an error status. The spans go to the tracer provider given,
else OpenTelemetry's global one, so the host's SDK configuration (exporters, sampling) applies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

from membrane._version import __version__
from membrane.errors import ExtraNotInstalled
from membrane.json_types import JSONObject
from membrane.runtime.events import EventStream, LifecycleEvent

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

__all__ = ["RunTracer"]

#: Looks up the arguments of tool call ``call_id`` of run ``run_id`` (``None``: unknown).
ArgumentsLookup = Callable[[str, str], JSONObject | None]


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


class RunTracer:
    """Spans for runs, model requests and tool calls, from lifecycle events."""

    def __init__(self, tracer_provider: object | None = None, *, arguments: bool = False) -> None:
        """``tracer_provider``: an OpenTelemetry ``TracerProvider`` (default: the global one)."""
        try:
            from opentelemetry import trace
        except ImportError as exc:  # pragma: no cover - the extra is pinned in development
            raise ExtraNotInstalled(
                "tracing needs OpenTelemetry: pip install 'membrane[otel]'", extra="otel"
            ) from exc
        provider = (
            cast("TracerProvider", tracer_provider)
            if tracer_provider is not None
            else trace.get_tracer_provider()
        )
        self._trace = trace
        self._tracer = provider.get_tracer("membrane", __version__)
        self.arguments = arguments
        #: Set by the runtime: where a tool call's arguments are found.
        self.lookup: ArgumentsLookup | None = None
        self._runs: dict[str, Span] = {}
        self._models: dict[str, Span] = {}
        self._tools: dict[tuple[str, str], Span] = {}
        self._model_names: dict[str, str] = {}

    async def follow(self, stream: EventStream) -> None:
        """Trace every event of ``stream`` until it ends (the runtime closes it)."""
        async with stream:
            async for event in stream:
                self.observe(event)
        for run_id in list(self._runs):
            self._end_run(run_id, None, "unfinished")

    def observe(self, event: LifecycleEvent) -> None:
        """Open, annotate or end the spans ``event`` concerns."""
        kind, run_id, data, at = event.kind, event.run_id, event.data, _ns(event.at)
        if kind == "published":
            self._start_run(event, at)
        elif run_id not in self._runs:
            return
        elif kind == "turn":
            self._start_model(run_id, data, at)
        elif kind == "usage":
            self._end_model(run_id, data, at)
        elif kind == "tool_call":
            self._start_tool(run_id, data, at)
        elif kind == "tool_result":
            self._end_tool(run_id, data, at)
        elif kind in ("completed", "error", "stopped"):
            self._end_run(run_id, at, kind, data)

    def _start_run(self, event: LifecycleEvent, at: int) -> None:
        data = event.data
        model = data.get("model") if isinstance(data.get("model"), str) else None
        self._model_names[event.run_id] = model or "default"
        parent = self._runs.get(event.parent_id or "")
        context = None if parent is None else self._trace.set_span_in_context(parent)
        attributes: dict[str, str | int | bool] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": event.agent,
            "gen_ai.request.model": model or "default",
            "membrane.run_id": event.run_id,
            "membrane.depth": int(data.get("depth", 0) or 0),
            "membrane.parent_id": event.parent_id or "",
            "membrane.provider": str(data.get("provider", "")),
            "membrane.background": bool(data.get("background", False)),
        }
        self._runs[event.run_id] = self._tracer.start_span(
            f"invoke_agent {event.agent}", context=context, start_time=at, attributes=attributes
        )

    def _child(self, run_id: str, name: str, at: int, attributes: Mapping[str, object]) -> Span:
        context = self._trace.set_span_in_context(self._runs[run_id])
        clean = {k: v for k, v in attributes.items() if isinstance(v, (str, int, float, bool))}
        return self._tracer.start_span(name, context=context, start_time=at, attributes=clean)

    def _start_model(self, run_id: str, data: Mapping[str, object], at: int) -> None:
        model = self._model_names.get(run_id, "default")
        attributes: dict[str, object] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "membrane.turn": data.get("turn", 0),
        }
        self._models[run_id] = self._child(run_id, f"chat {model}", at, attributes)

    def _end_model(self, run_id: str, data: Mapping[str, object], at: int) -> None:
        span = self._models.pop(run_id, None)
        if span is None:  # a mention's delegation: usage with no request of its own
            span = self._child(run_id, f"chat {self._model_names.get(run_id)}", at, {})
        for key, name in (
            ("input_tokens", "gen_ai.usage.input_tokens"),
            ("output_tokens", "gen_ai.usage.output_tokens"),
            ("cache_read_tokens", "membrane.usage.cache_read_tokens"),
            ("cache_write_tokens", "membrane.usage.cache_write_tokens"),
        ):
            value = data.get(key)
            if isinstance(value, int):
                span.set_attribute(name, value)
        span.end(end_time=at)

    def _start_tool(self, run_id: str, data: Mapping[str, object], at: int) -> None:
        name, call_id = str(data.get("name", "")), str(data.get("id", ""))
        attributes: dict[str, object] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
        }
        if self.arguments and self.lookup is not None:
            arguments = self.lookup(run_id, call_id)
            if arguments is not None:
                text = json.dumps(arguments, ensure_ascii=False, default=str)
                attributes["membrane.tool.arguments"] = text
        self._tools[(run_id, call_id)] = self._child(run_id, f"execute_tool {name}", at, attributes)

    def _end_tool(self, run_id: str, data: Mapping[str, object], at: int) -> None:
        span = self._tools.pop((run_id, str(data.get("id", ""))), None)
        if span is None:
            return
        code = data.get("code") if data.get("is_error") else None
        span.set_attribute("membrane.outcome", str(code or ("error" if code else "ok")))
        if data.get("is_error"):
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(code)))
        span.end(end_time=at)

    def _end_run(
        self, run_id: str, at: int | None, kind: str, data: Mapping[str, object] | None = None
    ) -> None:
        for key in [k for k in self._tools if k[0] == run_id]:
            self._tools.pop(key).end(end_time=at)
        model = self._models.pop(run_id, None)
        if model is not None:
            model.end(end_time=at)
        span = self._runs.pop(run_id)
        span.set_attribute("membrane.outcome", kind)
        if kind == "error":
            error = (data or {}).get("error")
            code = error.get("code") if isinstance(error, Mapping) else None
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(code or kind)))
        span.end(end_time=at)
