"""Execution transports for children: in this process, or as an external command."""

from __future__ import annotations

from membrane.runtime.providers.command import CommandProvider
from membrane.runtime.providers.in_process import InProcessProvider

__all__ = ["CommandProvider", "InProcessProvider"]
