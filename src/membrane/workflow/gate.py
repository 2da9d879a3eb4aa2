"""``WorkflowGate``: the predicate a workflow installs on its run's one view.

A tool that some phase of the workflow unlocks (``WorkflowDefinition.gated``) is admitted only
while the run's current phase unlocks it; every other tool is not the gate's business. The run's
``Scope`` applies a gate to its local tools as well as its global ones (``Scope.gate``), so a
locked delegation tool is neither in the schemas the model gets nor callable through any path
(the agent loop checks the view again at each call, and Code Mode's SDK is built from it).

``stamp`` is the run's stored workflow version, read from the store at each resolution: a phase
another process moved (the host approving through ``membrane serve``) is seen at the next turn.
A state that cannot be read locks every gated tool (fail closed).
"""

from __future__ import annotations

from collections.abc import Hashable

from membrane.errors import StoreError
from membrane.tools.spec import Tool
from membrane.workflow.engine import WorkflowEngine, WorkflowState

__all__ = ["WorkflowGate"]


class WorkflowGate:
    """Admits a gated tool only in a phase that unlocks it (``Scope.gate`` installs it)."""

    __slots__ = ("_engine", "_gated", "_open", "_run_id", "_version", "label")

    def __init__(self, engine: WorkflowEngine, run_id: str) -> None:
        self._engine = engine
        self._run_id = run_id
        self._gated = engine.definition.gated
        self._version: int | None = None
        self._open: frozenset[str] = frozenset()
        self.label = f"workflow:{engine.definition.name}"

    def stamp(self) -> Hashable:
        record = self._engine.store.get_workflow(self._run_id)
        version = 0 if record is None else record.version
        if version != self._version:
            try:
                state: WorkflowState | None = self._engine.state(self._run_id)
            except StoreError:
                state = None
            self._open = frozenset() if state is None else self._engine.unlocked(state)
            self._version = version if state is not None else -1
        return self._version

    def admits(self, tool: Tool) -> bool:
        if tool.name not in self._gated:
            return True
        if self._version is None:
            self.stamp()
        return tool.name in self._open
