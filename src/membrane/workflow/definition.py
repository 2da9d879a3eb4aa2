"""A gated workflow's definition: its phases, the steps each takes, the tools each unlocks, and
the transitions between them (seed 002's planning gate is one, see ``planning``).

* A **phase** names the steps that may be recorded while it is current and the tools it
  unlocks. A tool that some phase unlocks is *gated*: it is visible and callable only while a
  phase that unlocks it is current. A tool no phase names is not the workflow's business.
* A **transition** moves from one of its ``sources`` to its ``target`` once every step it
  ``requires`` is satisfied. A step is satisfied when it was recorded, or, for a **round** (an
  optional deliberation step, named ``round:NAME``), when the round was auto-skipped by the
  system or waived by the user; the two are kept apart. A ``privileged`` transition is the
  host's alone (a callback or an RPC method), never a model's tool call; ``stamp`` names the
  state field that gets the transition's time in the same write (``approved_at``).
* ``branches`` are decisions a phase waits for from the host (the finishing decision), each
  with its allowed choices; a tool may be unlocked in a phase only under one choice
  (``unlocks_when``).

Definitions are checked when built (``WorkflowInvalid``): every name known, phases reachable
from ``initial``, no transition leaving a terminal phase.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from membrane.errors import WorkflowInvalid

__all__ = ["Phase", "Transition", "WorkflowDefinition", "round_step"]

#: The prefix of a round's step name.
ROUND_PREFIX = "round:"


def round_step(name: str) -> str:
    """The step name of round ``name`` (``round:ui``)."""
    return ROUND_PREFIX + name


@dataclass(frozen=True, slots=True)
class Phase:
    """One phase: the steps recordable in it, the tools it unlocks (``unlocks_when`` maps a
    tool to the ``(decision, choice)`` under which alone this phase unlocks it)."""

    name: str
    steps: tuple[str, ...] = ()
    unlocks: tuple[str, ...] = ()
    unlocks_when: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    terminal: bool = False


@dataclass(frozen=True, slots=True)
class Transition:
    name: str
    sources: tuple[str, ...]
    target: str
    requires: tuple[str, ...] = ()
    privileged: bool = False
    stamp: str | None = None
    #: Host decisions that must have been taken (``finishing``).
    decided: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkflowDefinition:
    name: str
    initial: str
    phases: tuple[Phase, ...]
    transitions: tuple[Transition, ...]
    rounds: tuple[str, ...] = ()
    #: Host decisions: name -> allowed choices.
    decisions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    description: str = ""
    #: The kinds of evidence asset a run may register (``WorkflowEngine.add_evidence``).
    evidence: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check(self)

    def phase(self, name: str) -> Phase:
        for phase in self.phases:
            if phase.name == name:
                return phase
        raise WorkflowInvalid(
            f"workflow {self.name!r} has no phase {name!r}", workflow=self.name, phase=name
        )

    def transition(self, name: str) -> Transition:
        for transition in self.transitions:
            if transition.name == name:
                return transition
        raise WorkflowInvalid(
            f"workflow {self.name!r} has no transition {name!r}",
            workflow=self.name,
            transition=name,
        )

    @property
    def gated(self) -> frozenset[str]:
        """Every tool some phase unlocks: locked wherever no current phase unlocks it."""
        return frozenset(
            tool for phase in self.phases for tool in (*phase.unlocks, *phase.unlocks_when)
        )

    def order(self, phase: str) -> int:
        return [p.name for p in self.phases].index(phase)

    def unlocking(self, tool: str) -> list[str]:
        """The phases in which ``tool`` is unlocked (all of them when it is not gated)."""
        return [p.name for p in self.phases if tool in p.unlocks or tool in p.unlocks_when] or (
            [p.name for p in self.phases] if tool not in self.gated else []
        )

    def explain(self, callable_tools: Sequence[str]) -> dict[str, object]:
        """What ``explain`` shows of a run under this workflow: the phase it starts in, the
        tools that phase unlocks, each gated tool of ``callable_tools`` with the phases that
        unlock it, and the whole definition."""
        initial = self.phase(self.initial)
        return {
            "name": self.name,
            "phase": self.initial,
            "unlocked": sorted({*initial.unlocks, *initial.unlocks_when}),
            "locked": {
                tool: self.unlocking(tool)
                for tool in callable_tools
                if tool in self.gated and tool not in initial.unlocks
            },
            **self.to_dict(),
        }

    def to_dict(self) -> dict[str, object]:
        """The definition as ``explain`` shows it."""
        return {
            "name": self.name,
            "initial": self.initial,
            "phases": [
                {
                    "name": p.name,
                    "steps": list(p.steps),
                    "unlocks": [*p.unlocks, *p.unlocks_when],
                    **(
                        {"unlocks_when": {t: list(c) for t, c in p.unlocks_when.items()}}
                        if p.unlocks_when
                        else {}
                    ),
                }
                for p in self.phases
            ],
            "transitions": [
                {
                    "name": t.name,
                    "from": list(t.sources),
                    "to": t.target,
                    "requires": list(t.requires),
                    "privileged": t.privileged,
                }
                for t in self.transitions
            ],
        }


def _check(definition: WorkflowDefinition) -> None:
    names = [p.name for p in definition.phases]

    def fail(problem: str) -> None:
        raise WorkflowInvalid(f"workflow {definition.name!r}: {problem}", workflow=definition.name)

    if len(set(names)) != len(names):
        fail("two phases share a name")
    if definition.initial not in names:
        fail(f"the initial phase {definition.initial!r} is not one of its phases")
    steps = {s for p in definition.phases for s in p.steps}
    steps |= {round_step(r) for r in definition.rounds}
    for phase in definition.phases:
        for tool, (decision, choice) in phase.unlocks_when.items():
            if choice not in definition.decisions.get(decision, ()):
                fail(f"phase {phase.name!r} unlocks {tool!r} under an unknown decision")
    seen = {t.name for t in definition.transitions}
    if len(seen) != len(definition.transitions):
        fail("two transitions share a name")
    for transition in definition.transitions:
        for named in (*transition.sources, transition.target):
            if named not in names:
                fail(f"transition {transition.name!r} names the unknown phase {named!r}")
        for source in transition.sources:
            if definition.phase(source).terminal:
                fail(f"transition {transition.name!r} leaves the terminal phase {source!r}")
        for step in transition.requires:
            if step not in steps:
                fail(f"transition {transition.name!r} requires the unknown step {step!r}")
        for decision in transition.decided:
            if decision not in definition.decisions:
                fail(f"transition {transition.name!r} waits for the unknown decision {decision!r}")
    reachable = {definition.initial}
    grew = True
    while grew:
        grew = False
        for transition in definition.transitions:
            if reachable & set(transition.sources) and transition.target not in reachable:
                reachable.add(transition.target)
                grew = True
    unreachable = [n for n in names if n not in reachable]
    if unreachable:
        fail(f"phases {unreachable} cannot be reached from {definition.initial!r}")
