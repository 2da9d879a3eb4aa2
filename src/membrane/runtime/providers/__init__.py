"""Execution transports for children: in this process, as an external command, or as an ACP
agent."""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from membrane.runtime.providers.acp import AcpProvider
    from membrane.runtime.providers.command import CommandProvider
    from membrane.runtime.providers.in_process import InProcessProvider

__all__ = ["AcpProvider", "CommandProvider", "InProcessProvider"]

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "AcpProvider": "membrane.runtime.providers.acp",
        "CommandProvider": "membrane.runtime.providers.command",
        "InProcessProvider": "membrane.runtime.providers.in_process",
    },
    globals(),
)
