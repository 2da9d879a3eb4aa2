"""OpenTelemetry traces of a runtime's runs, on the GenAI semantic conventions (``otel`` extra).

``RunTracer`` turns the lifecycle events of every run into spans, with the times the events
carry, so a delegation tree shows up as one trace in any OpenTelemetry backend that reads the
conventions (docs/observability.md has the table of what each span carries):

* one span per run, ``invoke_agent AGENT`` (``gen_ai.operation.name``, ``gen_ai.provider.name``,
  ``gen_ai.agent.name``, ``gen_ai.agent.id`` and ``gen_ai.conversation.id``: the run id,
  ``gen_ai.request.model`` when the run names one; kind ``INTERNAL`` in this process,
  ``CLIENT`` for a child another process runs). A child's span is a child of the
  ``execute_tool Task`` span that started it (of its parent's run span when no tool call did),
  so the whole tree shares one trace id;
* one span per model request, ``chat MODEL`` below its run (kind ``CLIENT``; ``INTERNAL`` for a
  scripted model, which answers in this process): the provider and model, ``server.address``
  and ``server.port`` when a base URL is set, the response's id, model and finish reasons, and
  ``gen_ai.usage.input_tokens``, ``output_tokens``, ``cache_read.input_tokens`` and
  ``cache_creation.input_tokens``;
* one span per tool call, ``execute_tool TOOL`` (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.type`` ``function``, ``error.type``: the error code of a failed call). The
  call's arguments and result (``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``) are
  recorded only when the tracer is built with ``arguments=True`` (the ``trace_tool_arguments``
  setting): they can hold secrets, and the conventions make them opt-in;
* one ``apply_guardrail membrane`` span for every decision of the boundary the events show,
  below the call it concerns: a vetoed call (a tool outside the view, a permission rule's
  denial, an approval refused or unavailable, a command hook's refusal), a call an extension
  blocked, and a command hook's ``allow`` or ``ask`` (``gen_ai.security.decision.type``
  ``deny``, ``allow`` or ``warn``,
  ``gen_ai.security.target.type`` ``tool_call``, ``gen_ai.security.target.id`` the call id,
  ``gen_ai.security.policy.id`` the rule, ``gen_ai.security.decision.reason`` the error code).

A run or request that fails ends its span with an error status and ``error.type`` (the
Membrane error code). The spans go to the tracer provider given, else OpenTelemetry's global
one, so the host's SDK configuration (exporters, sampling) applies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

from membrane._version import __version__
from membrane.config.model_names import ModelChoice
from membrane.errors import ExtraNotInstalled, MembraneError, PermissionRefused, error_class
from membrane.json_types import JSONObject
from membrane.runtime.delegation import task_request_id
from membrane.runtime.events import EventStream, LifecycleEvent

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanKind, TracerProvider

__all__ = ["GUARDIAN", "RunTracer"]

#: Looks up the arguments of tool call ``call_id`` of run ``run_id`` (``None``: unknown).
ArgumentsLookup = Callable[[str, str], JSONObject | None]
#: Looks up the text of tool call ``call_id``'s result in run ``run_id`` (``None``: unknown).
ResultLookup = Callable[[str, str], str | None]
#: What a model spec means (``membrane.config.model_names.resolve_spec`` on the settings).
SpecResolver = Callable[[str], ModelChoice]

#: The ``gen_ai.guardian.name`` of Membrane's own boundary.
GUARDIAN = "membrane"
#: ``gen_ai.provider.name`` by Membrane's provider kinds (the conventions' well-known names).
_PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "scripted": "membrane.scripted"}
#: The delegation tool whose call starts a child (its span is the child's parent).
_STARTS_CHILD = "Task"
#: A command hook's decision that lets its call through, as a guardrail decision (one that
#: refuses the call is the call's own ``vetoed_call``, below the call).
_HOOK_DECISIONS = {"allow": "allow", "ask": "warn"}


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


class _ModelFacts:
    """What the conventions say of a model: provider, model, server address and port."""

    __slots__ = ("address", "model", "port", "provider")

    def __init__(self, label: str | None, choice: ModelChoice | None) -> None:
        self.address: str | None = None
        self.port: int | None = None
        if choice is not None:
            self.provider = _PROVIDERS.get(choice.provider, choice.provider)
            self.model: str | None = choice.model
            if choice.entry.base_url:
                parts = urlsplit(choice.entry.base_url)
                self.address = parts.hostname
                try:
                    self.port = parts.port or (443 if parts.scheme == "https" else 80)
                except ValueError:
                    self.port = None
        else:  # a host's own Model object: its name, ``provider:model`` when it says so
            prefix, _, rest = (label or "").partition(":")
            self.provider = _PROVIDERS.get(prefix, prefix) if rest else "membrane"
            self.model = rest or label or None

    def attributes(self) -> dict[str, str | int]:
        facts: dict[str, str | int] = {"gen_ai.provider.name": self.provider}
        if self.model:
            facts["gen_ai.request.model"] = self.model
        if self.address:
            facts["server.address"] = self.address
            if self.port is not None:
                facts["server.port"] = self.port
        return facts


class RunTracer:
    """Spans for runs, model requests, tool calls and boundary decisions, from events."""

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
        self._internal: SpanKind = trace.SpanKind.INTERNAL
        self._client: SpanKind = trace.SpanKind.CLIENT
        self._tracer = provider.get_tracer("membrane", __version__)
        self.arguments = arguments
        #: Set by the runtime: where a tool call's arguments and result are found, and what a
        #: model spec means under its settings.
        self.lookup: ArgumentsLookup | None = None
        self.results: ResultLookup | None = None
        self.resolve: SpecResolver | None = None
        self._runs: dict[str, Span] = {}
        self._models: dict[str, Span] = {}
        self._tools: dict[tuple[str, str], Span] = {}
        self._tool_names: dict[tuple[str, str], str] = {}
        self._facts: dict[str, _ModelFacts] = {}
        self._guarded: set[tuple[str, str]] = set()

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
            self._start_model(run_id, at, data.get("turn"))
        elif kind == "usage":
            self._end_model(run_id, data, at)
        elif kind == "tool_call":
            self._start_tool(run_id, data, at)
        elif kind == "tool_result":
            self._end_tool(run_id, data, at)
        elif kind == "vetoed_call":
            self._guardrail(run_id, data, at, decision="deny", reason=data.get("code"))
        elif kind == "hook" and data.get("decision") in _HOOK_DECISIONS:
            decision = _HOOK_DECISIONS[str(data["decision"])]
            self._guardrail(
                run_id, data, at, decision=decision, reason=data.get("reason"), hook=True
            )
        elif kind in ("completed", "error", "stopped"):
            self._end_run(run_id, at, kind, data)

    # -- runs ---------------------------------------------------------------------------------

    def _model_facts(self, spec: object, label: str | None = None) -> _ModelFacts:
        choice = None
        text = spec if isinstance(spec, str) and spec else label
        if text and self.resolve is not None:
            try:
                choice = self.resolve(text)
            except MembraneError:
                choice = None
        return _ModelFacts(label or (spec if isinstance(spec, str) else None), choice)

    def _start_run(self, event: LifecycleEvent, at: int) -> None:
        data = event.data
        spec = data.get("model")
        facts = self._model_facts(spec) if isinstance(spec, str) and spec else None
        if facts is not None:
            self._facts[event.run_id] = facts
        provider = str(data.get("provider", ""))
        attributes: dict[str, object] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": facts.provider if facts is not None else GUARDIAN,
            "gen_ai.agent.name": event.agent,
            "gen_ai.agent.id": event.run_id,
            "gen_ai.conversation.id": event.run_id,
            "membrane.run_id": event.run_id,
            "membrane.depth": int(data.get("depth", 0) or 0),
            "membrane.parent_id": event.parent_id or "",
            "membrane.provider": provider,
            "membrane.background": bool(data.get("background", False)),
        }
        if facts is not None and facts.model:
            attributes["gen_ai.request.model"] = facts.model
        if isinstance(data.get("role"), str):
            attributes["membrane.role"] = data["role"]
        parent = self._parent_span(event)
        kind = self._internal if provider.startswith("in-process") else self._client
        self._runs[event.run_id] = self._start(
            f"invoke_agent {event.agent}", parent, at, attributes, kind
        )

    def _parent_span(self, event: LifecycleEvent) -> Span | None:
        """The span a child hangs from: the parent's ``Task`` call that started it, else the
        parent's run span (a host's start), else none (a top-level run)."""
        parent_id = event.parent_id or ""
        calls = [
            (call_id, span)
            for (run_id, call_id), span in self._tools.items()
            if run_id == parent_id and self._tool_names.get((run_id, call_id)) == _STARTS_CHILD
        ]
        wanted = event.data.get("request_id")
        if wanted and self.lookup is not None and len(calls) > 1:
            for call_id, span in calls:
                arguments = self.lookup(parent_id, call_id)
                if arguments is not None and task_request_id(parent_id, arguments) == wanted:
                    return span
        if len(calls) == 1:
            return calls[0][1]
        return self._runs.get(parent_id)

    def _start(
        self,
        name: str,
        parent: Span | None,
        at: int,
        attributes: Mapping[str, object],
        kind: SpanKind | None = None,
    ) -> Span:
        context = None if parent is None else self._trace.set_span_in_context(parent)
        clean = {k: v for k, v in attributes.items() if isinstance(v, (str, int, float, bool))}
        return self._tracer.start_span(
            name,
            context=context,
            start_time=at,
            attributes=clean,
            kind=kind if kind is not None else self._internal,
        )

    # -- model requests -----------------------------------------------------------------------

    def _start_model(self, run_id: str, at: int, turn: object = None) -> None:
        facts = self._facts.get(run_id)
        attributes: dict[str, object] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": run_id,
            "membrane.turn": turn,
            **(facts.attributes() if facts is not None else {}),
        }
        model = facts.model if facts is not None else None
        local = facts is not None and facts.provider == _PROVIDERS["scripted"]
        kind = self._internal if local else self._client
        name = f"chat {model}" if model else "chat"
        self._models[run_id] = self._start(name, self._runs[run_id], at, attributes, kind)

    def _end_model(self, run_id: str, data: Mapping[str, object], at: int) -> None:
        span = self._models.pop(run_id, None)
        label = data.get("model")
        if span is None:  # a mention's delegation: usage with no request of its own
            self._start_model(run_id, at, data.get("turn"))
            span = self._models.pop(run_id)
        if run_id not in self._facts and isinstance(label, str) and label:
            # The run named no model (the host's default): the model that answered says.
            facts = self._model_facts(None, label)
            for key, value in facts.attributes().items():
                span.set_attribute(key, value)
            if facts.model:
                span.update_name(f"chat {facts.model}")
        for key, name in (
            ("input_tokens", "gen_ai.usage.input_tokens"),
            ("output_tokens", "gen_ai.usage.output_tokens"),
            ("cache_read_tokens", "gen_ai.usage.cache_read.input_tokens"),
            ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens"),
            ("response_id", "gen_ai.response.id"),
            ("response_model", "gen_ai.response.model"),
        ):
            said = data.get(key)
            if isinstance(said, (int, str)):
                span.set_attribute(name, said)
        reason = data.get("finish_reason")
        if isinstance(reason, str):
            span.set_attribute("gen_ai.response.finish_reasons", [reason])
        span.end(end_time=at)

    # -- tool calls and the boundary ----------------------------------------------------------

    def _start_tool(self, run_id: str, data: Mapping[str, object], at: int) -> None:
        name, call_id = str(data.get("name", "")), str(data.get("id", ""))
        attributes: dict[str, object] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if self.arguments and self.lookup is not None:
            arguments = self.lookup(run_id, call_id)
            if arguments is not None:
                text = json.dumps(arguments, ensure_ascii=False, default=str)
                attributes["gen_ai.tool.call.arguments"] = text
        key = (run_id, call_id)
        self._tools[key] = self._start(f"execute_tool {name}", self._runs[run_id], at, attributes)
        self._tool_names[key] = name

    def _end_tool(self, run_id: str, data: Mapping[str, object], at: int) -> None:
        key = (run_id, str(data.get("id", "")))
        span = self._tools.pop(key, None)
        self._tool_names.pop(key, None)
        guarded = key in self._guarded
        self._guarded.discard(key)
        if span is None:
            return
        if data.get("is_error"):
            code = str(data.get("code") or "_OTHER")
            family = error_class(code)
            refused = code == "tool-blocked" or (
                family is not None and issubclass(family, PermissionRefused)
            )
            if refused and not guarded:
                self._guardrail(run_id, data, at, decision="deny", reason=code, parent=span)
            span.set_attribute("membrane.outcome", code)
            span.set_attribute("error.type", code)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, code))
        else:
            span.set_attribute("membrane.outcome", "ok")
            result = self.results(*key) if self.arguments and self.results is not None else None
            if result is not None:
                span.set_attribute("gen_ai.tool.call.result", result)
        span.end(end_time=at)

    def _guardrail(
        self,
        run_id: str,
        data: Mapping[str, object],
        at: int,
        *,
        decision: str,
        reason: object,
        hook: bool = False,
        parent: Span | None = None,
    ) -> None:
        """An ``apply_guardrail`` span for one decision, below the call it concerns."""
        call_id = str(data.get("id", ""))
        key = (run_id, call_id)
        if parent is None:
            parent = self._tools.get(key) if call_id else None
        if parent is None:
            parent = self._runs[run_id]
        attributes: dict[str, object] = {
            "gen_ai.operation.name": "apply_guardrail",
            "gen_ai.guardian.name": GUARDIAN,
            "gen_ai.guardian.version": __version__,
            "gen_ai.security.decision.type": decision,
            "gen_ai.security.target.type": "tool_call",
            "gen_ai.agent.id": run_id,
            "gen_ai.conversation.id": run_id,
        }
        if call_id:
            attributes["gen_ai.security.target.id"] = call_id
        if decision != "allow" and isinstance(reason, str) and reason:
            attributes["gen_ai.security.decision.reason"] = reason
        if isinstance(data.get("rule"), str):
            attributes["gen_ai.security.policy.id"] = data["rule"]
        if hook:
            attributes["membrane.hook.event"] = str(data.get("event", ""))
            attributes["gen_ai.security.policy.name"] = str(data.get("command", ""))
        elif call_id:
            self._guarded.add(key)
        span = self._start(f"apply_guardrail {GUARDIAN}", parent, at, attributes)
        span.end(end_time=at)

    # -- ends ---------------------------------------------------------------------------------

    def _end_run(
        self, run_id: str, at: int | None, kind: str, data: Mapping[str, object] | None = None
    ) -> None:
        code = None
        if kind == "error":
            error = (data or {}).get("error")
            code = str(error.get("code") or kind) if isinstance(error, Mapping) else kind
        for key in [k for k in self._tools if k[0] == run_id]:
            self._tool_names.pop(key, None)
            self._tools.pop(key).end(end_time=at)
        self._guarded = {key for key in self._guarded if key[0] != run_id}
        model = self._models.pop(run_id, None)
        if model is not None:
            if code is not None:  # the request in flight is what failed
                model.set_attribute("error.type", code)
                model.set_status(self._trace.Status(self._trace.StatusCode.ERROR, code))
            model.end(end_time=at)
        self._facts.pop(run_id, None)
        span = self._runs.pop(run_id)
        span.set_attribute("membrane.outcome", kind)
        if code is not None:
            span.set_attribute("error.type", code)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, code))
        span.end(end_time=at)
