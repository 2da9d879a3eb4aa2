"""The OS boundary a child's commands run in (DESIGN rule 10).

Backends, strongest first: ``bubblewrap`` (``bwrap`` on ``PATH``: read-only carve-outs, private
``/tmp``, PID and network namespaces), ``landlock`` (the kernel LSM, through a small helper:
write rights granted beneath folders, with an honest list of what it cannot carve out), and
``guard``, the shell guard alone, which reads command text and is no boundary. The ``sandbox``
setting chooses one (``auto``: the strongest available).
"""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from membrane.sandbox.boundary import WRITING_TOOLS, Boundary, plan_boundary
    from membrane.sandbox.machine import Backend, MachineSupport, choose_backend, machine_support
    from membrane.sandbox.paths import CATALOG_ROOTS, protected_part
    from membrane.sandbox.policy import SandboxPolicy, boundary_summary
    from membrane.sandbox.process import ProcessOutcome
    from membrane.sandbox.runner import Sandbox

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

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "WRITING_TOOLS": "membrane.sandbox.boundary",
        "Boundary": "membrane.sandbox.boundary",
        "plan_boundary": "membrane.sandbox.boundary",
        "Backend": "membrane.sandbox.machine",
        "MachineSupport": "membrane.sandbox.machine",
        "choose_backend": "membrane.sandbox.machine",
        "machine_support": "membrane.sandbox.machine",
        "CATALOG_ROOTS": "membrane.sandbox.paths",
        "protected_part": "membrane.sandbox.paths",
        "ProcessOutcome": "membrane.sandbox.process",
        "Sandbox": "membrane.sandbox.runner",
        "SandboxPolicy": "membrane.sandbox.policy",
        "boundary_summary": "membrane.sandbox.policy",
    },
    globals(),
)
