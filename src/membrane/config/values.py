"""Deployment settings: ``~/.membrane/config.toml`` < ``<project>/.membrane/config.toml``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DEFAULT_TOOLS", "RateLimit", "RoleSpec", "Settings"]

#: Seed 000, decision 5: documents that omit ``tools`` stay read-only.
DEFAULT_TOOLS: tuple[str, ...] = ("Read", "Glob", "Grep")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A sliding window: at most ``max_calls`` in ``window_seconds``."""

    max_calls: int
    window_seconds: float


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """What callers in one trusted role may see: a restriction over global tools/actions."""

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved deployment settings. Every field has the documented default."""

    default_tools: tuple[str, ...] = DEFAULT_TOOLS
    #: ``None``: unset (fall back to ``general-purpose`` with a note); ``"none"``: fail closed.
    fallback_subagent: str | None = None
    max_depth: int | Literal["provider-managed"] = 3
    #: Seed 001: the delegation tools stay visible at the depth cap (a start is then rejected);
    #: ``True`` is the static visibility policy that leaves them out of children at the cap.
    hide_delegation_at_cap: bool = False
    #: The deployment persona (``deployment:persona`` prompt section); ``None`` means no section.
    persona: str | None = None
    #: The parent session's permission mode that ``permission: inherit`` follows.
    permission_mode: str = "default"
    worktrees_enabled: bool = True
    max_concurrency: int = 10
    grace_turns: int = 5
    default_max_turns: int | None = None
    roles: Mapping[str, RoleSpec] = field(default_factory=dict)
    rate_limits: Mapping[str, RateLimit] = field(default_factory=dict)
