"""Publication: the one step that makes a built child observable, new or resumed.

Each is a single store transaction, run in the same synchronous step as the re-check that the
runtime still accepts the child (``check_publishable``: it is not closing, the parent has not
ended and is not stopping) and as its registration, so nothing can change in between. Only once
the transaction commits does the child appear in listings and event streams.

A new child's header records, besides its identity, what a later resume needs to build it
again with nothing relaxed (``start_meta``):

* ``controls``: ``tool_filter`` (every name filter on its scope, folded into one
  ``{"allow", "deny"}``, or ``None``), ``persona`` (the request's template; ``None`` inherits
  the deployment's) and ``max_turns`` (the request's; ``None`` when it asked for none);
* ``task``: the first user message the child was given (the brief, after any inherited
  parent context), which a resume replays when the run stored no transcript;
* ``ceiling``: the ceiling it runs under, which a resume holds it to again, and
  ``ceiling_below``: the one it passes to its children, which a child started under it when
  it is not running in this process gets (DESIGN rule 13).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from membrane.config.budget import BUDGET_KINDS
from membrane.config.values import Settings
from membrane.durable.crashpoints import crash_point
from membrane.durable.lineage import record_edge, reopen_interrupted_edge
from membrane.durable.sweeper import Leases
from membrane.errors import InvalidRequest, UnknownModel
from membrane.json_types import JSONDict
from membrane.models.specs import resolve_spec
from membrane.resolve.authority import EffectiveAuthority
from membrane.resolve.digest import authority_digest
from membrane.resolve.warnings import warning_objects
from membrane.runtime.budget import BUDGET_KEY
from membrane.runtime.events import EventHub
from membrane.runtime.request import SubagentStartRequest
from membrane.runtime.runs import OWNER_KEY, LiveRuns, RunRecord
from membrane.sandbox import Boundary, SandboxPolicy, boundary_summary
from membrane.store.base import SessionHeader, Store
from membrane.tools.argument_rules import rule_mapping
from membrane.tools.restriction import Restriction
from membrane.tools.rules import PermissionRule
from membrane.tools.scope import Scope

__all__ = [
    "CEILING_BELOW_KEY",
    "CEILING_KEY",
    "CONTROLS_KEY",
    "TASK_KEY",
    "BoundaryCache",
    "Publisher",
    "routing_key",
    "start_controls",
    "start_meta",
]

#: The header ``meta`` key holding the start controls a resume installs again.
CONTROLS_KEY: Final = "controls"
#: The header ``meta`` key holding the child's first user message.
TASK_KEY: Final = "task"
#: The header ``meta`` keys of the ceiling a run runs under and the one it passes down.
CEILING_KEY: Final = "ceiling"
CEILING_BELOW_KEY: Final = "ceiling_below"


class BoundaryCache:
    """The ``sandbox`` summaries of published events, computed once per policy, checkout,
    agent and write access (resolving the checkout's real path and looking for its ``.git``
    costs more than the rest of a publication) and reused by every later start with the same
    four; each event gets its own copy. ``limit`` bounds the summaries kept (all are dropped
    past it)."""

    __slots__ = ("_known", "_limit")

    def __init__(self, *, limit: int = 256) -> None:
        #: key -> (the summary, the names of its list values: the parts a copy must copy)
        self._known: dict[
            tuple[SandboxPolicy, str, str | None, bool], tuple[dict[str, Any], tuple[str, ...]]
        ] = {}
        self._limit = limit

    def summary(
        self, policy: SandboxPolicy, checkout: str, *, agent: str | None, writes: bool
    ) -> dict[str, Any]:
        key = (policy, checkout, agent, writes)
        known = self._known.get(key)
        if known is None:
            if len(self._known) >= self._limit:
                self._known.clear()
            summary: dict[str, Any] = boundary_summary(
                policy, Path(checkout), agent=agent, writes=writes
            )
            lists = tuple(name for name, value in summary.items() if isinstance(value, list))
            known = self._known[key] = (summary, lists)
        summary, lists = known
        copy = summary.copy()
        for name in lists:
            copy[name] = list(summary[name])
        return copy


class Publisher:
    """Publishes the children of one runtime.

    ``gate(parent_id)`` refuses a publication the runtime's state no longer allows (closing,
    the parent ended or stopping); ``must_queue(record)`` says whether a new background child
    waits for a slot; ``runs`` lists a published child; ``hub`` commits the store writes with
    the queued events.
    """

    def __init__(
        self,
        store: Store,
        *,
        hub: EventHub,
        runs: LiveRuns,
        settings: Settings,
        gate: Callable[[str | None], None],
        must_queue: Callable[[RunRecord], bool],
        leases: Leases | None = None,
    ) -> None:
        self._store = store
        self._settings = settings
        self._hub = hub
        self._runs = runs
        self._gate = gate
        self._must_queue = must_queue
        self._leases = leases
        self._policy = SandboxPolicy.from_settings(settings)
        self._boundaries = BoundaryCache()

    def publish(
        self,
        record: RunRecord,
        *,
        authority: EffectiveAuthority,
        request: SubagentStartRequest,
        note: str | None,
        charge: Callable[[], None] | None = None,
    ) -> None:
        """Publish a new child: header, lineage edge, ``published`` event, ``charge()`` (its
        count on the ``children`` budgets it draws on) and the completion of its spawn receipt,
        in one transaction."""
        store = self._store
        self._gate(record.parent_id)
        record.status = "queued" if self._must_queue(record) else "running"
        header = SessionHeader(
            session_id=record.run_id,
            agent=record.agent,
            parent_id=record.parent_id,
            delegation_depth=record.depth,
            # A queued child waits for a worker, which marks it running when it takes it.
            status="queued" if record.queued else record.status,
            provider=record.provider,
            created_at=time.time(),
            request_id=request.request_id,
            meta={
                OWNER_KEY: self._runs.owner,
                "agent_type": record.agent_type,
                "background": record.background,
                "role": record.role,
                "cwd": record.cwd,
                "model": record.model,
                "capability_mode": record.capability_mode,
                **start_meta(record, request, task=authority.task_prefix + request.task),
                CEILING_KEY: authority.ceiling.to_json(),
                CEILING_BELOW_KEY: record.ceiling.to_json(),
                **own_budget(record),
            },
        )
        tools = record.child.scope.view().names
        data: dict[str, Any] = {
            "agent_type": record.agent_type,
            # The trusted role installed on its view (``None``: no role, the owner's or an
            # in-process host's own authority).
            "role": record.role,
            "model": record.model,
            "depth": record.depth,
            # What the start was keyed by: a trace hangs the child below the call that made it.
            "request_id": request.request_id,
            "background": record.background,
            "provider": record.provider,
            "capability_mode": record.capability_mode,
            "tools": list(tools),
            "checkout": authority.checkout.kind,
            "permission": {
                "value": authority.invocation["permission"].value,
                "source": authority.invocation["permission"].source,
            },
            "ceiling": authority.ceiling.to_json(),
            "network": {"value": authority.network.value, "source": authority.network.source},
            # The OS boundary its commands run under (DESIGN rule 10): a provider whose child
            # runs as one sandboxed process (``CommandProvider``) says which.
            "sandbox": _own_boundary(record.child)
            or self._boundaries.summary(
                self._policy.for_agent(
                    network=authority.network.value, read_paths=authority.own_read_roots
                ),
                record.cwd or os.getcwd(),
                agent=record.agent,
                writes=authority.writes,
            ),
        }
        if note:
            data["note"] = note
        fallback = model_fallback(authority)
        if fallback is not None:
            data["model_fallback"] = fallback
        if record.spending is not None:
            data["budget"] = record.spending.in_force()  # again once the start is counted
        # Proof that explain is what ran: the digest of what was installed (resolve.digest).
        data["authority_digest"] = authority_digest(
            authority,
            system=record.system,
            tools=tools,
            sandbox=data["sandbox"],
            budget=budget_limits(record),
        )
        if record.worktree is not None:
            data["worktree"] = str(record.worktree.cwd)

        def write() -> int:
            if charge is not None:
                charge()  # with the child or not at all: a retry after a crash charges once
            if record.spending is not None:
                data["budget"] = record.spending.in_force()  # what is left, this start counted
            store.create_session(header)
            if self._leases is not None and not record.queued:
                # Driven here from its first statement on; its writes are fenced by it.
                record.lease = self._leases.claim(record.run_id)
            if record.parent_id is not None:
                record.has_edge = record_edge(
                    store,
                    parent_id=record.parent_id,
                    child_id=record.run_id,
                    agent=record.agent,
                    task=request.task,
                    fingerprint=self._fingerprint(record, authority, request),
                )
            seq = store.append_event(record.run_id, "published", data)
            if request.request_id is not None:
                # The spawn receipt completes with the publication, or not at all.
                store.complete_receipt(request.request_id, {"run": record.info().to_stored()})
            crash_point("spawn.publish")
            return seq

        seq = self._hub.commit(write)
        crash_point("spawn.published")
        self._runs.register(record, seq=seq, data=data)

    def _fingerprint(
        self, record: RunRecord, authority: EffectiveAuthority, request: SubagentStartRequest
    ) -> dict[str, Any]:
        """The spawn fingerprint of a child's lineage edge (a child of the host has none)."""
        return {
            "provider": record.provider,
            "model": record.model,
            "thinking": authority.invocation["thinking"].value,
            "routing_key": routing_key(
                _written_model(authority, request) or record.model, self._settings
            ),
        }

    def republish(self, record: RunRecord, *, parent: RunRecord | None, messages: int) -> None:
        """Publish a resumed child again: status and a ``published`` event (marked
        ``resumed``, with how many ``messages`` it continues from) in one transaction, then the
        listing. A live parent that began to stop meanwhile refuses it, as it refuses a new
        child."""
        store = self._store
        self._gate(None if parent is None else parent.run_id)
        live = self._runs.live(record.run_id)
        if live is not None and not live.finished:
            raise InvalidRequest(
                f"run {record.run_id!r} was resumed by another call meanwhile; it is {live.status}",
                run_id=record.run_id,
            )
        record.status = "queued" if self._must_queue(record) else "running"
        data: dict[str, Any] = {
            "agent_type": record.agent_type,
            "depth": record.depth,
            "background": record.background,
            "provider": record.provider,
            "tools": list(record.child.scope.view().names),
            "resumed": True,
            "messages": messages,
        }
        if record.spending is not None:
            data["budget"] = record.spending.in_force()

        def write() -> int:
            store.set_status(record.run_id, record.status)
            store.update_meta(record.run_id, {OWNER_KEY: self._runs.owner})
            if reopen_interrupted_edge(store, parent_id=record.parent_id, child_id=record.run_id):
                record.has_edge = True
            return store.append_event(record.run_id, "published", data)

        self._runs.register(record, seq=self._hub.commit(write), data=data)


def model_fallback(authority: EffectiveAuthority) -> JSONDict | None:
    """The ``model-fallback`` warning of a child whose file's model no provider serves (it
    runs on the run's default model), as ``{code, message, file, line}``; else ``None``."""
    path = authority.definition.path
    found = warning_objects(authority.warnings, (), file=path)
    return next((w for w in found if w["code"] == "model-fallback"), None)


def routing_key(spec: str | None, settings: Settings) -> str:
    """How a child's model spec was routed, for its spawn fingerprint: ``default`` (the host's
    model), else ``VIA -> PROVIDER:MODEL`` where VIA is ``spec``, ``entry:NAME`` or
    ``alias:NAME`` (``unrouted`` for a spec the settings do not resolve, e.g. one a custom
    provider reads itself)."""
    if spec is None:
        return "default"
    try:
        choice = resolve_spec(spec, models=settings.models, aliases=settings.model_aliases)
    except UnknownModel:
        return "unrouted"
    return f"{choice.via} -> {choice.provider}:{choice.model}"


def _written_model(authority: EffectiveAuthority, request: SubagentStartRequest) -> str | None:
    """The model spec as the definition or the call wrote it, before any alias was read."""
    source = authority.invocation["model"].source
    written = request.call.model if source == "call" else authority.definition.model
    if source in ("default", "parent") or not isinstance(written, str):
        return None
    return written


def budget_limits(record: RunRecord) -> dict[str, float]:
    """The tightest limit of each kind among the ledgers the run draws on (its own and its
    ancestors'), as its authority digest covers them."""
    limits: dict[str, float] = {}
    for ledger in () if record.spending is None else record.spending.ledgers:
        for kind in BUDGET_KINDS:
            limit = ledger.limit.limit(kind)
            if limit is not None and (kind not in limits or limit < limits[kind]):
                limits[kind] = limit
    return limits


def own_budget(record: RunRecord) -> dict[str, Any]:
    """The header ``meta`` entry of the run's own budget ledger, when it has one."""
    ledgers = () if record.spending is None else record.spending.ledgers
    if ledgers and ledgers[-1].owner == record.run_id:
        return {BUDGET_KEY: ledgers[-1].to_meta()}
    return {}


def start_meta(record: RunRecord, request: SubagentStartRequest, *, task: str) -> dict[str, Any]:
    """The header ``meta`` entries a resume reads: ``controls`` and ``task``."""
    persona = request.persona
    max_turns = request.call.max_turns
    controls = start_controls(record.child.scope)
    controls["persona"] = persona if isinstance(persona, str) else None
    controls["max_turns"] = max_turns if isinstance(max_turns, int) else None
    rules = [rule_mapping(r) for r in request.rules or () if isinstance(r, PermissionRule)]
    if rules:
        controls["rules"] = rules
    return {CONTROLS_KEY: controls, TASK_KEY: task}


def start_controls(scope: Scope) -> dict[str, Any]:
    """The name filters installed on ``scope``, as ``{"tool_filter": ...}``.

    ``tool_filter`` is every name filter on the scope (the request's ``toolFilter``, the
    caller's role) folded into one: a tool passes them all exactly when it is in every
    ``allow`` and in no ``deny``. The definition's own restriction is not a name filter; a
    resume resolves it again.
    """
    allow: frozenset[str] | None = None
    deny: set[str] = set()
    for predicate in scope.restrictions:
        if isinstance(predicate, Restriction):
            if predicate.allow is not None:
                allow = predicate.allow if allow is None else allow & predicate.allow
            deny |= predicate.deny
    if allow is None and not deny:
        return {"tool_filter": None}
    return {
        "tool_filter": {"allow": None if allow is None else sorted(allow), "deny": sorted(deny)}
    }


def _own_boundary(child: object) -> dict[str, Any] | None:
    """The boundary a child's provider runs it under, when the child says (a ``boundary``)."""
    boundary = getattr(child, "boundary", None)
    return boundary.to_json() if isinstance(boundary, Boundary) else None
