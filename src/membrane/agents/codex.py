"""The Codex dialect: custom agents in ``<project>/.codex/agents/*.toml`` and
``$CODEX_HOME/agents/*.toml`` (default ``~/.codex/agents``).

A Codex custom agent is one TOML file, not Markdown: ``name``, ``description`` and
``developer_instructions`` (the agent's instructions: the body), then optional keys of Codex's
configuration for that agent. Each key with its meaning:

* ``model``: the model, resolved as any file's (``gpt-5-codex`` through the deployment's
  providers, else the default model with a warning); ``model_reasoning_effort``: ``thinking``
  (``none`` is ``off``).
* ``sandbox_mode``: what the agent's commands may touch, which decides its tools here:
  ``read-only`` is ``Read``, ``Glob``, ``Grep`` (Codex's shell in a read-only sandbox has no
  Membrane equivalent, so no ``Bash``); ``workspace-write`` adds ``Edit``, ``Write`` and ``Bash``
  (writes inside the checkout, as Codex's workspace); ``danger-full-access`` is the same inside
  Membrane's sandbox (a warning says the sandbox stays). Left out, Codex gives the parent
  session's sandbox: Membrane's read-only default with ``dialect-default-differs``, unless
  ``codex_omitted_tools`` says otherwise.
* ``approval_policy``: ``untrusted``, ``on-request`` and ``on-failure`` ask before each
  ``Bash`` and ``Edit``/``Write`` call (an ``ask`` rule the permission mode then decides), as
  Codex asks; ``never`` asks nothing.
* ``mcp_servers``: ``[mcp_servers.NAME]`` tables, Membrane's inline ``mcp_servers`` entries
  (``startup_timeout_sec`` is ``startup_timeout``, ``tool_timeout_sec`` is ``timeout``).
* ``nickname_candidates``: display names, kept in ``extra``. ``web_search``, ``skills``:
  not honoured (``dialect-unsupported``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from membrane.agents.translation import Translation
from membrane.tools.permissions import PermissionRule

__all__ = ["translate_codex"]

_SANDBOX: Final[Mapping[str, tuple[str, ...]]] = {
    "read-only": ("Read", "Glob", "Grep"),
    "workspace-write": ("Read", "Glob", "Grep", "Edit", "Write", "Bash"),
    "danger-full-access": ("Read", "Glob", "Grep", "Edit", "Write", "Bash"),
}
_EFFORT: Final[Mapping[str, str]] = {
    "none": "off",
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
}
_ASKING: Final = frozenset({"untrusted", "on-request", "on-failure"})
_SERVER_KEYS: Final[Mapping[str, str]] = {
    "command": "command",
    "args": "args",
    "env": "env",
    "cwd": "cwd",
    "url": "url",
    "http_headers": "headers",
    "startup_timeout_sec": "startup_timeout",
    "tool_timeout_sec": "timeout",
}
_IGNORED: Final[Mapping[str, str]] = {
    "web_search": "turns on Codex's web search tool, which Membrane does not have",
    "skills": "configures Codex's skills; Membrane reads skills from its skill roots",
}


def translate_codex(out: Translation, key: str, value: Any) -> bool:
    """Handle ``key`` if it is a Codex key; ``False`` leaves it to the Membrane fields."""
    if key == "sandbox_mode":
        tools = _SANDBOX.get(value) if isinstance(value, str) else None
        if tools is None:
            out.reader.fail(
                key,
                f"is {value!r}, not one of {', '.join(_SANDBOX)}",
                'write `sandbox_mode = "read-only"` or `"workspace-write"`',
            )
        if value == "danger-full-access":
            out.reader.warn(
                key,
                "dialect-unsupported",
                "`sandbox_mode = danger-full-access` runs Codex without a sandbox; Membrane "
                "keeps its own (writes inside the checkout, network as the deployment says)",
            )
        out.add(key, "tools", list(tools or ()))
        return True
    if key == "model_reasoning_effort":
        level = _EFFORT.get(value.strip().lower()) if isinstance(value, str) else None
        if level is None:
            out.ignore(key, value, f"is not one of {', '.join(_EFFORT)}")
        else:
            out.add(key, "thinking", level)
        return True
    if key == "approval_policy":
        if value in _ASKING:
            for tool in ("Bash", "Edit"):  # an Edit rule governs Write too
                rule = PermissionRule(
                    tool, None, "ask", f"approval_policy {value}: ask", "dialect:codex", False
                )
                out.reader.rules.append(rule)
        elif value != "never":
            out.reader.fail(
                key,
                f"is {value!r}, not one of untrusted, on-request, on-failure, never",
                'write `approval_policy = "on-request"`',
            )
        return True
    if key == "mcp_servers" and isinstance(value, Mapping):
        out.add(
            key, "mcp_servers", {name: _server(out, name, spec) for name, spec in value.items()}
        )
        return True
    if key == "nickname_candidates":
        out.add(key, None, value, quiet=True)
        return True
    if key in _IGNORED:
        out.ignore(key, value, _IGNORED[key])
        return True
    return False


def _server(out: Translation, name: str, spec: Any) -> Any:
    """A Codex ``[mcp_servers.NAME]`` table as Membrane's inline entry."""
    if not isinstance(spec, Mapping):
        return spec  # the field rules refuse it, with their own message
    entry = {_SERVER_KEYS[k]: v for k, v in spec.items() if k in _SERVER_KEYS}
    dropped = sorted(k for k in spec if k not in _SERVER_KEYS and k != "enabled")
    if dropped:
        out.reader.warn(
            "mcp_servers",
            "dialect-unsupported",
            f"`mcp_servers.{name}` sets {', '.join(dropped)}, which Membrane does not use",
        )
    return entry
