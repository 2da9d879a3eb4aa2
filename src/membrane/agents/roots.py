"""Where definitions come from: a ``Root`` (a directory, or one config file holding several
definitions) with the dialect its files are read in, the other products' roots
(``dialect_roots``: Claude Code, OpenCode, Codex, GitHub Copilot) that sit below Membrane's
own, and pi's ``.pi/agents`` (``pi_root``), which seed 003 ranks above the global folder and
``<workspace>/.agents/agents``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from membrane.agents.dialect import MEMBRANE, Dialect
from membrane.config.product_settings import claude_config_home
from membrane.config.values import Settings

__all__ = [
    "OPENCODE_CONFIG_NAMES",
    "Root",
    "claude_config_home",
    "codex_home",
    "dialect_roots",
    "pi_root",
]

#: The OpenCode config files of a project, read for their ``agent`` entries.
OPENCODE_CONFIG_NAMES = ("opencode.json", "opencode.jsonc")


@dataclass(frozen=True, slots=True)
class Root:
    """One place definitions come from. ``label`` is ``global``, ``workspace`` or ``project``
    for Membrane's own roots, else the dialect's root (``claude-code-project`` ...). A ``config``
    root is one file holding several definitions (``opencode.json``), not a directory."""

    label: str
    directory: Path
    dialect: Dialect = MEMBRANE
    kind: Literal["dir", "config"] = "dir"

    @property
    def suffix(self) -> str:
        """The ending of the files that hold definitions here (Codex's are TOML)."""
        return ".toml" if self.dialect.name == "codex" else ".md"

    @property
    def cache_key(self) -> str:
        """What the parse of a file here depends on besides its content."""
        if self.dialect is MEMBRANE or self.dialect == MEMBRANE:
            return self.label
        d = self.dialect
        return f"{self.label}|{d.name}|{d.omitted_tools}|{','.join(d.default_tools)}"


def codex_home() -> Path:
    """Codex's folder: ``$CODEX_HOME`` when set, else ``~/.codex``."""
    value = os.environ.get("CODEX_HOME", "").strip()
    return Path(value).expanduser() if value else Path.home() / ".codex"


def dialect_roots(settings: Settings, *, project: Path | None, claude_home: Path) -> list[Root]:
    """Other products' roots, lowest first; each one below all of Membrane's own roots.

    ``~/.codex/agents`` < ``~/.copilot/agents`` < ``~/.claude/agents`` < ``.codex/agents`` <
    ``.github/chatmodes`` < ``.github/agents`` < ``opencode.jsonc`` < ``opencode.json`` <
    ``.opencode/agent`` < ``.opencode/agents`` < ``.claude/agents``; a setting turns each
    product off. pi's ``.pi/agents`` is not among them: it ranks with Membrane's own
    (``pi_root``).
    """
    claude = Dialect("claude-code", settings.claude_code_omitted_tools, settings.default_tools)
    opencode = Dialect("opencode", settings.opencode_omitted_tools, settings.default_tools)
    codex = Dialect("codex", settings.codex_omitted_tools, settings.default_tools)
    copilot = Dialect("copilot", settings.copilot_omitted_tools, settings.default_tools)
    roots: list[Root] = []
    if settings.codex_agents:
        roots.append(Root("codex-global", codex_home() / "agents", codex))
    if settings.copilot_agents:
        roots.append(Root("copilot-global", Path.home() / ".copilot" / "agents", copilot))
    if settings.claude_code_agents:
        roots.append(Root("claude-code-global", claude_home / "agents", claude))
    if project is None:
        return roots
    if settings.codex_agents:
        roots.append(Root("codex-project", project / ".codex" / "agents", codex))
    if settings.copilot_agents:
        roots += [
            Root("copilot-project", project / ".github" / name, copilot)
            for name in ("chatmodes", "agents")
        ]
    if settings.opencode_agents:
        roots += [
            Root("opencode-project", project / name, opencode, "config")
            for name in reversed(OPENCODE_CONFIG_NAMES)
        ]
        roots += [
            Root("opencode-project", project / ".opencode" / name, opencode)
            for name in ("agent", "agents")
        ]
    if settings.claude_code_agents:
        roots.append(Root("claude-code-project", project / ".claude" / "agents", claude))
    return roots


def pi_root(settings: Settings, *, project: Path | None) -> Root | None:
    """``<project>/.pi/agents`` in pi's dialect, which seed 003 ranks above the global folder
    and ``<workspace>/.agents/agents`` (pi wins a collision); ``None`` when there is no project
    or ``pi_agents = false``."""
    if project is None or not settings.pi_agents:
        return None
    pi = Dialect("pi", settings.pi_omitted_tools, settings.default_tools)
    return Root("pi-project", project / ".pi" / "agents", pi)
