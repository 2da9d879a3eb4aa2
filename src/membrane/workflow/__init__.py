"""Gated workflows (seed 002's planning gate): phases, the steps and tools each unlocks, and
the privileged transitions, with durable state changed only through ``WorkflowEngine``."""

from membrane.workflow.definition import Phase, Transition, WorkflowDefinition, round_step
from membrane.workflow.engine import WorkflowEngine, WorkflowState
from membrane.workflow.gate import WorkflowGate
from membrane.workflow.planning import (
    PLANNING,
    PlanningControl,
    PlanningHost,
    PlanningWorkflow,
    builtin_workflows,
)

__all__ = [
    "PLANNING",
    "Phase",
    "PlanningControl",
    "PlanningHost",
    "PlanningWorkflow",
    "Transition",
    "WorkflowDefinition",
    "WorkflowEngine",
    "WorkflowGate",
    "WorkflowState",
    "builtin_workflows",
    "round_step",
]
