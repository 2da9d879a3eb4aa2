"""The ``membrane`` command. Only this package prints.

The root command group is ``membrane.cli.app.app``, built on first use, so that
``membrane --version`` and a command's start import only what they need.
"""

from __future__ import annotations

from membrane.cli.app import main

__all__ = ["main"]
