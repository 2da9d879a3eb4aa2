"""Imports every command module so that each registers itself on ``app``."""

from __future__ import annotations
