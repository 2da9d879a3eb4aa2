"""The ``membrane`` command. Only this package prints."""

from __future__ import annotations

from membrane.cli.app import app, main

__all__ = ["app", "main"]
