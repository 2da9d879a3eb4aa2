"""What a runtime installs for a definition that opts into a workflow (``workflow: NAME``).

The runtime knows workflows only through this protocol (``membrane.workflow`` sits above the
runtime and implements it): ``RuntimeOptions.workflows`` maps a name to a binding, and
``WorkflowBinder`` binds one to each run whose definition names it, with the runtime's store
and its event hub's commit. A definition naming a workflow the runtime was not given fails
closed with ``unknown-workflow`` before anything is built. A bound workflow gives the run's
tools (scope-local), the gate installed on its one view over global and local tools alike
(``Scope.gate``), and a prompt section. A child of a run under a workflow may get tools of
its own from it (``worker_tools``: seed 002's finishing worker registers evidence assets).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from membrane.agents.definition import AgentDefinition
from membrane.errors import UnknownWorkflow
from membrane.store.base import Store
from membrane.tools.restriction import ToolPredicate
from membrane.tools.spec import Tool

__all__ = ["BoundWorkflow", "WorkflowBinder", "WorkflowBinding"]

Commit = Callable[[Callable[[], Any]], Any]


class BoundWorkflow(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def tools(self) -> Sequence[Tool]: ...

    @property
    def gate(self) -> ToolPredicate: ...

    @property
    def prompt(self) -> str: ...


class WorkflowBinding(Protocol):
    def bind(self, run_id: str, store: Store, commit: Commit | None = None) -> BoundWorkflow: ...

    def worker_tools(
        self, parent_id: str, run_id: str, store: Store, commit: Commit | None = None
    ) -> Sequence[Tool]:
        """The scope-local tools of ``run_id``, a child of ``parent_id`` (a run under this
        workflow), given the parent's state now (a finishing worker's ``registerEvidence``)."""
        ...


class WorkflowBinder:
    """Binds the workflow a definition names to one run (``None`` when it names none)."""

    def __init__(
        self, workflows: Mapping[str, WorkflowBinding] | None, store: Store, commit: Commit
    ) -> None:
        self.workflows = dict(workflows or {})
        self._store = store
        self._commit = commit

    def __call__(self, run_id: str, definition: AgentDefinition) -> BoundWorkflow | None:
        name = definition.workflow
        if not isinstance(name, str):
            return None
        binding = self.workflows.get(name)
        if binding is None:
            known = sorted(self.workflows)
            raise UnknownWorkflow(
                f"agent {definition.name!r} runs under the workflow {name!r}, which this "
                f"runtime was not given (it has {known or 'none'}); pass it in "
                "RuntimeOptions.workflows (membrane.workflow.builtin_workflows())",
                workflow=name,
                agent=definition.name,
                known=known,
            )
        return binding.bind(run_id, self._store, self._commit)

    def worker_tools(self, parent_id: str | None, run_id: str) -> list[Tool]:
        """What a child of ``parent_id`` gets from the workflow its parent runs under (none
        when the parent runs under no workflow this runtime was given)."""
        if parent_id is None:
            return []
        record = self._store.get_workflow(parent_id)
        binding = None if record is None else self.workflows.get(record.workflow)
        # A binding written before ``worker_tools`` existed gives its children nothing.
        tools = getattr(binding, "worker_tools", None)
        if tools is None:
            return []
        return list(tools(parent_id, run_id, self._store, self._commit))
