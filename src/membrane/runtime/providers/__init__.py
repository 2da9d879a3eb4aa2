"""Execution transports for children: in this process, as an external command, or as an ACP
agent."""

from __future__ import annotations

from membrane.runtime.providers.acp import AcpProvider
from membrane.runtime.providers.command import CommandProvider
from membrane.runtime.providers.in_process import InProcessProvider

__all__ = ["AcpProvider", "CommandProvider", "InProcessProvider"]
