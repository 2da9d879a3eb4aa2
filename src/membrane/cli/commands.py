"""Imports every command module so that each registers itself on ``app``."""

from __future__ import annotations

from membrane.cli import (
    actions,  # noqa: F401
    agents,  # noqa: F401
    doctor,  # noqa: F401
    explain,  # noqa: F401
    init,  # noqa: F401
    lineage,  # noqa: F401
    mcp,  # noqa: F401
    outbox,  # noqa: F401
    run,  # noqa: F401
    runs,  # noqa: F401
    schedule,  # noqa: F401
    serve,  # noqa: F401
    skills,  # noqa: F401
)
