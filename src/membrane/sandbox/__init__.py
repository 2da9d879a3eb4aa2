"""The OS boundary a child's commands run in (DESIGN rule 10).

Backends, strongest first: ``bubblewrap`` (``bwrap`` on ``PATH``: read-only carve-outs, private
``/tmp``, PID and network namespaces), ``landlock`` (the kernel LSM, through a small helper:
write rights granted beneath folders, with an honest list of what it cannot carve out), and
``guard``, the shell guard alone, which reads command text and is no boundary. The ``sandbox``
setting chooses one (``auto``: the strongest available).
"""

from __future__ import annotations

from membrane.sandbox.boundary import WRITING_TOOLS, Boundary, plan_boundary
from membrane.sandbox.machine import Backend, MachineSupport, choose_backend, machine_support
from membrane.sandbox.paths import CATALOG_ROOTS, protected_part
from membrane.sandbox.process import ProcessOutcome
from membrane.sandbox.runner import Sandbox, SandboxPolicy, boundary_summary

__all__ = [
    "CATALOG_ROOTS",
    "WRITING_TOOLS",
    "Backend",
    "Boundary",
    "MachineSupport",
    "ProcessOutcome",
    "Sandbox",
    "SandboxPolicy",
    "boundary_summary",
    "choose_backend",
    "machine_support",
    "plan_boundary",
    "protected_part",
]
