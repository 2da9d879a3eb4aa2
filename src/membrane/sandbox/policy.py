"""``SandboxPolicy``, the deployment's sandbox choice, and the boundary it gives one child,
planned without running anything: what ``explain`` shows and a run's ``published`` event
records. Running a command under that boundary is :class:`membrane.sandbox.runner.Sandbox`,
imported by what runs one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from membrane.config.values import SandboxChoice, Settings
from membrane.errors import SandboxUnavailable
from membrane.json_types import JSONDict
from membrane.sandbox.boundary import Boundary, plan_boundary
from membrane.sandbox.machine import MachineSupport, choose_backend, machine_support

__all__ = ["SandboxPolicy", "boundary_summary", "plan_for"]


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """The deployment's choice: ``choice`` (the ``sandbox`` setting), ``network``, and
    ``read_paths``, the read roots a child may read besides its checkout and the system's
    (the ``read_paths`` setting: :mod:`membrane.sandbox.reads`)."""

    choice: SandboxChoice = "auto"
    network: bool = False
    read_paths: Sequence[Path] = ()

    def __post_init__(self) -> None:
        # Read roots as given (``~/...``, relative to the working folder) made absolute.
        roots = tuple(Path(p).expanduser().absolute() for p in self.read_paths)
        object.__setattr__(self, "read_paths", roots)

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxPolicy:
        return cls(
            choice=settings.sandbox,
            network=settings.sandbox_network,
            read_paths=tuple(Path(p) for p in settings.read_paths),
        )

    def for_agent(self, *, network: bool | None, read_paths: Sequence[Path] = ()) -> SandboxPolicy:
        """This policy for one agent: its network as its run's authority decided it
        (``EffectiveAuthority.network``: its definition's ``network: true`` opens it, an
        ancestor's ``network: false`` closes it whatever the deployment says; ``None``: no run
        decided, the policy's own stands), and the read roots ``read_paths`` added (its
        definition's own, already held under its ceiling)."""
        added = tuple(p for p in read_paths if Path(p) not in self.read_paths)
        opened = self.network if network is None else network
        if opened == self.network and not added:
            return self
        return replace(self, network=opened, read_paths=(*self.read_paths, *added))


def plan_for(
    policy: SandboxPolicy,
    checkout: Path,
    *,
    support: MachineSupport,
    agent: str | None = None,
    writes: bool = True,
    reachable: Sequence[Path] = (),
) -> Boundary:
    """The boundary of a child in ``checkout`` under ``policy`` on a machine that offers
    ``support``; :class:`SandboxUnavailable` when the policy names a backend it lacks.
    ``reachable``: see ``plan_boundary``."""
    return plan_boundary(
        choose_backend(policy.choice, support),
        checkout,
        agent=agent,
        writes=writes,
        network=policy.network,
        reachable=reachable,
        read_paths=policy.read_paths,
    )


def boundary_summary(
    policy: SandboxPolicy, checkout: Path, *, agent: str | None = None, writes: bool = True
) -> JSONDict:
    """The boundary a child in ``checkout`` runs under, as JSON (for ``explain`` and events);
    a policy the machine cannot meet is reported with its ``error`` instead of raised."""
    try:
        boundary = plan_for(policy, checkout, support=machine_support(), agent=agent, writes=writes)
    except SandboxUnavailable as exc:
        return {"backend": None, "requested": policy.choice, "error": str(exc)}
    summary = boundary.to_json()
    summary["requested"] = policy.choice
    return summary
