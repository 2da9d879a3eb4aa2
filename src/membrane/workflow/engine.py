"""A run's workflow state and the privileged methods that alone change it.

``WorkflowEngine`` reads a run's state from the store (the workflow's initial phase when none
is stored yet) and changes it only through its methods, each one store transaction that writes
the new state (guarded by the version it read, so a concurrent writer is noticed, never
overwritten) and a ``workflow`` event on the run. The model reaches ``record`` and ``advance``
through the tools its current phase unlocks; ``host_advance``, ``waive`` and ``decide`` are the
host's (a callback it registered, or an RPC method), and ``advance`` refuses a privileged
transition whoever calls it.

Loading normalizes a stored state (drops unknown rounds and decisions, keeps a round waived
rather than also auto-skipped) and never advances a phase: a stored phase this workflow does
not know, or one past a stamped transition without its stamp, is refused (``store-error``),
so the gate fails closed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from membrane.errors import StoreError, WorkflowRefused
from membrane.json_types import JSONObject
from membrane.store.base import Store, WorkflowRecord
from membrane.workflow.definition import ROUND_PREFIX, WorkflowDefinition, round_step

__all__ = ["WorkflowEngine", "WorkflowState"]

T = TypeVar("T")
Commit = Callable[[Callable[[], Any]], Any]
#: How often a write is tried again when another writer moved the version in between.
_RETRIES = 3


@dataclass(frozen=True, slots=True)
class WorkflowState:
    """One run's place in its workflow. ``version`` is the stored version (0: nothing stored)."""

    workflow: str
    phase: str
    steps: Mapping[str, JSONObject] = field(default_factory=dict)
    auto_skipped_rounds: tuple[str, ...] = ()
    waived_rounds: tuple[str, ...] = ()
    decisions: Mapping[str, str] = field(default_factory=dict)
    stamps: Mapping[str, float] = field(default_factory=dict)
    #: Assets registered for the run (seed 002's evidence: ``kind``, ``url``, ``title``,
    #: ``run_id`` of the run that registered it), in the order they came.
    evidence: tuple[Mapping[str, str], ...] = ()
    version: int = 0

    def satisfied(self, step: str) -> bool:
        if step in self.steps:
            return True
        if step.startswith(ROUND_PREFIX):
            name = step[len(ROUND_PREFIX) :]
            return name in self.auto_skipped_rounds or name in self.waived_rounds
        return False

    def to_dict(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "phase": self.phase,
            "steps": {k: dict(v) for k, v in self.steps.items()},
            "auto_skipped_rounds": list(self.auto_skipped_rounds),
            "waived_rounds": list(self.waived_rounds),
            "decisions": dict(self.decisions),
            **{k: v for k, v in self.stamps.items()},
            "evidence": [dict(asset) for asset in self.evidence],
            "version": self.version,
        }


class WorkflowEngine:
    """The privileged methods over the workflow state of ``definition``'s runs in ``store``.

    ``commit(work)`` runs ``work`` in one store transaction (default: ``store.transaction()``;
    a runtime passes its event hub's, so queued events are written with it)."""

    def __init__(
        self,
        store: Store,
        definition: WorkflowDefinition,
        *,
        commit: Commit | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.definition = definition
        self._commit = commit or self._transaction
        self._clock = clock

    # -- reading --------------------------------------------------------------------------------

    def state(self, run_id: str) -> WorkflowState:
        return self._load(self.store.get_workflow(run_id))

    def unlocked(self, state: WorkflowState) -> frozenset[str]:
        """The gated tools ``state``'s phase unlocks (under the decisions taken)."""
        phase = self.definition.phase(state.phase)
        when = {t for t, (d, c) in phase.unlocks_when.items() if state.decisions.get(d) == c}
        return frozenset(phase.unlocks) | when

    def missing(self, state: WorkflowState, transition: str) -> list[str]:
        """What ``transition`` still waits for in ``state`` (steps, then decisions)."""
        found = self.definition.transition(transition)
        steps = [s for s in found.requires if not state.satisfied(s)]
        return steps + [f"decision:{d}" for d in found.decided if d not in state.decisions]

    # -- the model's side, through the tools its phase unlocks ----------------------------------

    def record(
        self,
        run_id: str,
        steps: Mapping[str, JSONObject],
        *,
        auto_skip: Iterable[str] = (),
        then: str | None = None,
    ) -> WorkflowState:
        """Record ``steps`` (each one the current phase takes), auto-skip rounds, and take the
        non-privileged transition ``then`` when given, all in one write."""
        skip = tuple(auto_skip)

        def change(state: WorkflowState) -> WorkflowState:
            phase = self.definition.phase(state.phase)
            for step in steps:
                if step not in phase.steps:
                    raise self._refused(state, f"the step {step!r} is not taken in this phase")
                if step.startswith(ROUND_PREFIX) and state.satisfied(step):
                    name = step[len(ROUND_PREFIX) :]
                    if name in state.auto_skipped_rounds or name in state.waived_rounds:
                        kind = "auto-skipped" if name in state.auto_skipped_rounds else "waived"
                        raise self._refused(state, f"the {name} round was {kind}")
            for name in skip:
                if name not in self.definition.rounds:
                    raise self._refused(state, f"{name!r} is not a round of this workflow")
            merged = {**state.steps, **{k: dict(v) for k, v in steps.items()}}
            skipped = tuple(
                dict.fromkeys(
                    [*state.auto_skipped_rounds]
                    + [
                        r
                        for r in skip
                        if r not in state.waived_rounds and round_step(r) not in merged
                    ]
                )
            )
            changed = replace(state, steps=merged, auto_skipped_rounds=skipped)
            return self._moved(changed, then, privileged=False) if then else changed

        return self._write(run_id, "record", change, detail={"steps": sorted(steps), "then": then})

    def advance(self, run_id: str, transition: str) -> WorkflowState:
        """Take a non-privileged transition."""
        return self._write(
            run_id,
            "advance",
            lambda s: self._moved(s, transition, privileged=False),
            detail={"transition": transition},
        )

    # -- the host's side ------------------------------------------------------------------------

    def host_advance(self, run_id: str, transition: str) -> WorkflowState:
        """Take any transition, privileged ones included: the host's alone."""
        return self._write(
            run_id,
            "host_advance",
            lambda s: self._moved(s, transition, privileged=True),
            detail={"transition": transition},
        )

    def waive(self, run_id: str, round_name: str) -> WorkflowState:
        """The user waives a round that is neither done nor auto-skipped."""

        def change(state: WorkflowState) -> WorkflowState:
            if round_name not in self.definition.rounds:
                raise self._refused(state, f"{round_name!r} is not a round of this workflow")
            if state.satisfied(round_step(round_name)):
                raise self._refused(state, f"the {round_name} round is already settled")
            if round_step(round_name) not in self.definition.phase(state.phase).steps:
                raise self._refused(state, f"the {round_name} round is not open in this phase")
            return replace(state, waived_rounds=(*state.waived_rounds, round_name))

        return self._write(run_id, "waive", change, detail={"round": round_name})

    def decide(self, run_id: str, decision: str, choice: str) -> WorkflowState:
        """Take a host decision (once: a taken decision is not changed afterwards)."""

        def change(state: WorkflowState) -> WorkflowState:
            choices = self.definition.decisions.get(decision)
            if choices is None or choice not in choices:
                raise self._refused(
                    state, f"{decision!r} takes one of {list(choices or ())}, not {choice!r}"
                )
            if decision in state.decisions:
                raise self._refused(state, f"the {decision} decision is already taken")
            if self.definition.phase(state.phase).terminal:
                raise self._refused(state, "the workflow has ended")
            return replace(state, decisions={**state.decisions, decision: choice})

        return self._write(run_id, "decide", change, detail={decision: choice})

    def add_evidence(
        self, run_id: str, asset: Mapping[str, str], *, when: Callable[[WorkflowState], str | None]
    ) -> WorkflowState:
        """Append ``asset`` (its ``kind`` one of the definition's ``evidence``) to the run's
        evidence, once ``when(state)`` names no reason to refuse."""

        def change(state: WorkflowState) -> WorkflowState:
            kinds = self.definition.evidence
            if asset.get("kind") not in kinds:
                raise self._refused(state, f"evidence is one of {list(kinds)}")
            problem = when(state)
            if problem is not None:
                raise self._refused(state, problem)
            return replace(state, evidence=(*state.evidence, dict(asset)))

        detail: JSONObject = {"evidence": asset.get("kind", "")}
        return self._write(run_id, "evidence", change, detail=detail)

    # -- internals ------------------------------------------------------------------------------

    def _moved(self, state: WorkflowState, name: str, *, privileged: bool) -> WorkflowState:
        transition = self.definition.transition(name)
        if transition.privileged and not privileged:
            raise self._refused(state, f"{name!r} is the host's to take, not a tool's")
        if state.phase not in transition.sources:
            raise self._refused(state, f"{name!r} does not leave the {state.phase} phase")
        missing = self.missing(state, name)
        if missing:
            raise self._refused(state, f"{name!r} waits for {', '.join(missing)}", missing)
        stamps = dict(state.stamps)
        if transition.stamp is not None:
            stamps[transition.stamp] = self._clock()
        return replace(state, phase=transition.target, stamps=stamps)

    def _write(
        self,
        run_id: str,
        action: str,
        change: Callable[[WorkflowState], WorkflowState],
        *,
        detail: JSONObject,
    ) -> WorkflowState:
        for attempt in range(_RETRIES):
            state = self.state(run_id)
            new = change(state)
            encoded = new.to_dict()
            del encoded["version"]

            def work(
                state: WorkflowState = state,
                new: WorkflowState = new,
                encoded: dict[str, Any] = encoded,
            ) -> WorkflowRecord:
                record = self.store.put_workflow(
                    run_id,
                    workflow=self.definition.name,
                    state=encoded,
                    expected_version=state.version,
                )
                self.store.append_event(
                    run_id,
                    "workflow",
                    {
                        "workflow": self.definition.name,
                        "action": action,
                        "from": state.phase,
                        "phase": new.phase,
                        "version": record.version,
                        **detail,
                    },
                )
                return record

            try:
                record = self._commit(work)
            except StoreError:
                if attempt + 1 < _RETRIES and self._moved_on(run_id, state.version):
                    continue  # another writer came first: read again and re-check
                raise
            return replace(new, version=record.version)
        raise AssertionError("unreachable")

    def _moved_on(self, run_id: str, version: int) -> bool:
        record = self.store.get_workflow(run_id)
        return (0 if record is None else record.version) != version

    def _transaction(self, work: Callable[[], T]) -> T:
        with self.store.transaction():
            return work()

    def _refused(
        self, state: WorkflowState, problem: str, missing: list[str] | None = None
    ) -> WorkflowRefused:
        return WorkflowRefused(
            f"workflow {self.definition.name!r}, phase {state.phase!r}: {problem}",
            workflow=self.definition.name,
            phase=state.phase,
            missing=missing or [],
        )

    def _load(self, record: WorkflowRecord | None) -> WorkflowState:
        definition = self.definition
        if record is None:
            return WorkflowState(definition.name, definition.initial)
        data = record.state
        phase = data.get("phase")
        known = [p.name for p in definition.phases]
        if record.workflow != definition.name or phase not in known:
            raise StoreError(
                f"the workflow state of {record.run_id!r} names {record.workflow!r} phase "
                f"{phase!r}, which workflow {definition.name!r} does not know; it is not "
                "guessed at",
                run_id=record.run_id,
            )
        assert isinstance(phase, str)
        stamps = {
            k: float(v)
            for k in {t.stamp for t in definition.transitions if t.stamp}
            if isinstance(v := data.get(k), int | float) and not isinstance(v, bool)
        }
        for transition in definition.transitions:
            stamp = transition.stamp
            if stamp and stamp not in stamps and self._beyond(phase, transition.target):
                raise StoreError(
                    f"the workflow state of {record.run_id!r} is in phase {phase!r} without "
                    f"{stamp}: it cannot have got there through {transition.name!r}",
                    run_id=record.run_id,
                )
        rounds = definition.rounds
        waived = _names(data.get("waived_rounds"), rounds)
        skipped = tuple(
            r for r in _names(data.get("auto_skipped_rounds"), rounds) if r not in waived
        )
        steps_in = data.get("steps")
        steps = (
            {str(k): dict(v) for k, v in steps_in.items() if isinstance(v, Mapping)}
            if isinstance(steps_in, Mapping)
            else {}
        )
        decisions_in = data.get("decisions")
        decisions = {
            str(k): v
            for k, v in (decisions_in.items() if isinstance(decisions_in, Mapping) else ())
            if isinstance(v, str) and v in definition.decisions.get(str(k), ())
        }
        return WorkflowState(
            definition.name,
            phase,
            steps,
            skipped,
            waived,
            decisions,
            stamps,
            _assets(data.get("evidence"), definition.evidence),
            record.version,
        )

    def _beyond(self, phase: str, target: str) -> bool:
        """Whether ``phase`` lies at or after ``target`` in the definition's phase order."""
        return self.definition.order(phase) >= self.definition.order(target)


def _names(value: object, allowed: tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        return ()
    return tuple(dict.fromkeys(v for v in value if isinstance(v, str) and v in allowed))


def _assets(value: object, kinds: tuple[str, ...]) -> tuple[Mapping[str, str], ...]:
    """The stored evidence that is well formed (text fields, a known kind); the rest dropped."""
    if not isinstance(value, list | tuple):
        return ()
    return tuple(
        {str(k): v for k, v in item.items() if isinstance(v, str)}
        for item in value
        if isinstance(item, Mapping) and item.get("kind") in kinds
    )
