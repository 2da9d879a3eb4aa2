"""``membrane workflow``: a run's planning-gate state, and the host's privileged answers.

``show RUN_ID [--json]`` prints the run's phase, its steps, auto-skipped and waived rounds,
decisions, approval time and the evidence assets its finishing worker registered.
``approve``, ``accept-light``, ``decline-light``, ``waive ROUND`` and ``decide CHOICE`` are the
user's answers (seed 002: they come from the host, never from the model's own tool call); each
writes the state and a ``workflow`` event in one transaction, and a lead running in another
process sees the change at its next turn. A step the phase does not allow is
``workflow-refused`` (exit 3) and changes nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from typer import Argument, Option

from membrane.cli.app import app, group
from membrane.cli.helptext import HelpCommand
from membrane.cli.options import STATE_OPTION
from membrane.cli.runs import existing_state, state_exists
from membrane.cli.screen import Screen
from membrane.errors import StoreError, UnknownRun

if TYPE_CHECKING:  # for annotations; the commands import what they run
    from membrane.store.base import Store
    from membrane.workflow.engine import WorkflowState
    from membrane.workflow.planning import PlanningControl

__all__ = ["workflow_app"]

workflow_app = group("workflow", help="A run's planning gate: its state, and the host's answers.")
app.add_typer(workflow_app, name="workflow")

_PROJECT = Option(help="The project folder.")
_JSON = Option("--json", help="Print the planning state as one JSON object.")


def _control(project: Path, state_file: str | None, run_id: str) -> tuple[Store, PlanningControl]:
    from membrane.store.select import open_writer, shown
    from membrane.workflow.planning import PlanningControl

    state = existing_state(project, state_file)
    if not state_exists(state):
        raise StoreError(f"no run {run_id!r}: {state} does not exist", path=str(state))
    store = open_writer(state)
    if store.get_header(run_id) is None:
        store.close()
        raise UnknownRun(f"no run {run_id!r} in {shown(state)}", run_id=run_id)
    return store, PlanningControl(store)


def _print(state: WorkflowState, *, as_json: bool) -> None:
    data = state.to_dict()
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
        return
    lines = [
        f"workflow {state.workflow}: phase {state.phase} (version {state.version})",
        f"steps: {', '.join(sorted(state.steps)) or '-'}",
        f"auto-skipped rounds: {', '.join(state.auto_skipped_rounds) or '-'}",
        f"waived rounds: {', '.join(state.waived_rounds) or '-'}",
        f"decisions: {', '.join(f'{k}={v}' for k, v in state.decisions.items()) or '-'}",
        f"approved at: {state.stamps.get('approved_at', '-')}",
        f"evidence: {'-' if not state.evidence else ''}",
        *(f"  {a['kind']}: {a['url']} (run {a.get('run_id', '-')})" for a in state.evidence),
    ]
    Screen().line("\n".join(lines))


def _answer(
    project: Path, state_file: str | None, run_id: str, act: str, *args: str, as_json: bool
) -> None:
    store, control = _control(project, state_file, run_id)
    try:
        methods: dict[str, Callable[..., WorkflowState]] = {
            "approve": control.approve,
            "accept-light": control.accept_light_plan,
            "decline-light": control.decline_light_plan,
            "waive": control.waive,
            "decide": control.decide_finishing,
        }
        method = methods[act]
        state = method(run_id, *args)
    finally:
        store.close()
    _print(state, as_json=as_json)


@workflow_app.command("show", cls=HelpCommand)
def show(
    run_id: Annotated[str, Argument(help="The run.")],
    project: Annotated[Path, _PROJECT] = Path("."),
    as_json: Annotated[bool, _JSON] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
) -> None:
    """Print RUN_ID's planning state. Nothing is changed."""
    store, control = _control(project, state_file, run_id)
    try:
        state = control.state(run_id)
    finally:
        store.close()
    _print(state, as_json=as_json)


@workflow_app.command("approve", cls=HelpCommand)
def approve(
    run_id: Annotated[str, Argument(help="The run whose plan is ready.")],
    project: Annotated[Path, _PROJECT] = Path("."),
    as_json: Annotated[bool, _JSON] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
) -> None:
    """Approve RUN_ID's plan: ready -> developing, stamped with the approval time."""
    _answer(project, state_file, run_id, "approve", as_json=as_json)


@workflow_app.command("accept-light", cls=HelpCommand)
def accept_light(
    run_id: Annotated[str, Argument(help="The run whose intake is recorded.")],
    project: Annotated[Path, _PROJECT] = Path("."),
    as_json: Annotated[bool, _JSON] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
) -> None:
    """Accept the light plan offered for RUN_ID: light_offer -> light_plan (the approval gate
    stays)."""
    _answer(project, state_file, run_id, "accept-light", as_json=as_json)


@workflow_app.command("decline-light", cls=HelpCommand)
def decline_light(
    run_id: Annotated[str, Argument(help="The run whose light plan is offered.")],
    project: Annotated[Path, _PROJECT] = Path("."),
    as_json: Annotated[bool, _JSON] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
) -> None:
    """Decline the light plan offered for RUN_ID: light_offer -> planning (every round)."""
    _answer(project, state_file, run_id, "decline-light", as_json=as_json)


@workflow_app.command("waive", cls=HelpCommand)
def waive(
    run_id: Annotated[str, Argument(help="The run.")],
    round_name: Annotated[str, Argument(metavar="ROUND", help="functional, ui or extras")],
    project: Annotated[Path, _PROJECT] = Path("."),
    as_json: Annotated[bool, _JSON] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
) -> None:
    """Waive a planning round of RUN_ID (kept apart from a round the system auto-skipped)."""
    _answer(project, state_file, run_id, "waive", round_name, as_json=as_json)


@workflow_app.command("decide", cls=HelpCommand)
def decide(
    run_id: Annotated[str, Argument(help="The run.")],
    choice: Annotated[str, Argument(help="stop or finishing_worker")],
    project: Annotated[Path, _PROJECT] = Path("."),
    as_json: Annotated[bool, _JSON] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
) -> None:
    """Take RUN_ID's finishing decision: stop at validated code, or a finishing worker."""
    _answer(project, state_file, run_id, "decide", choice, as_json=as_json)
