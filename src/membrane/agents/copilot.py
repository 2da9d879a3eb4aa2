"""The GitHub Copilot dialect: custom agents in ``<project>/.github/agents/*.agent.md`` (and
``~/.copilot/agents``), and VS Code's older chat modes in ``.github/chatmodes/*.chatmode.md``.

A Copilot agent is Markdown with YAML frontmatter, like Membrane's; its name is ``name``, else
the file name without ``.agent.md`` (``.chatmode.md``). Its keys:

* ``tools``: a list (or a comma string) of Copilot's tool names, each read as the Membrane
  built-ins of the same authority: ``read`` is ``Read``; ``edit`` (``editFiles``, ``write``,
  ``multiedit``) is ``Edit`` and ``Write``; ``search`` (``codebase``, ``grep``, ``glob``) is
  ``Grep`` and ``Glob``; ``execute`` (``shell``, ``bash``, ``runCommands``, ``runInTerminal``)
  is ``Bash``; ``agent`` (``custom-agent``, ``task``) lets it start any agent
  (``allowed_subagents: '*'``); ``SERVER/TOOL`` and ``SERVER/*`` are MCP tools
  (``mcp__SERVER__TOOL``); ``*`` is every built-in. Others (``web``, ``fetch``, ``todo``)
  grant nothing (``unknown-tool``). Left out, Copilot gives every tool; Membrane its
  read-only default (``dialect-default-differs``) unless ``copilot_omitted_tools = "all"``.
* ``mcp-servers``: servers for this agent, Membrane's inline ``mcp_servers`` entries
  (``type`` is implied by ``command`` or ``url``). An entry whose ``tools`` lists only some of
  the server's tools is left out with a warning: Membrane's entry would select them all.
* Copilot asks before it runs a terminal command: ``Bash`` gets an ``ask`` rule (source
  ``dialect:copilot``) before the file's own rules, which the permission mode then decides.
* ``model``: the model, resolved as any file's. ``target``, ``infer``, ``argument-hint``,
  ``handoffs``, ``metadata``: for Copilot's own menus, kept in ``extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from membrane.agents.translation import Translation, tokens_of
from membrane.tools.permissions import PermissionRule

__all__ = ["copilot_tools", "finish_copilot", "translate_copilot"]

#: Copilot tool names (and their aliases, in lower case) -> the Membrane built-ins.
_TOOLS: Final[Mapping[str, tuple[str, ...]]] = {
    "read": ("Read",),
    "notebookread": ("Read",),
    "readfile": ("Read",),
    "edit": ("Edit", "Write"),
    "editfiles": ("Edit", "Write"),
    "write": ("Edit", "Write"),
    "multiedit": ("Edit", "Write"),
    "notebookedit": ("Edit", "Write"),
    "createfile": ("Write",),
    "search": ("Grep", "Glob"),
    "codebase": ("Grep", "Glob"),
    "grep": ("Grep",),
    "glob": ("Glob",),
    "execute": ("Bash",),
    "shell": ("Bash",),
    "bash": ("Bash",),
    "powershell": ("Bash",),
    "runcommands": ("Bash",),
    "runinterminal": ("Bash",),
    "terminal": ("Bash",),
}
_DELEGATION: Final = frozenset({"agent", "custom-agent", "task", "runsubagent"})
#: Namespaces of VS Code tool names (``edit/editFiles``) that are not MCP servers.
_NAMESPACES: Final = frozenset({"read", "edit", "search", "execute", "agent", "web", "todo"})
_QUIET: Final = frozenset({"target", "infer", "argument-hint", "handoffs", "metadata"})
_SERVER_KEYS: Final = ("command", "args", "env", "cwd", "url", "headers", "timeout")


def copilot_tools(tokens: list[str]) -> tuple[list[str], bool]:
    """Copilot ``tools`` tokens as Membrane tokens, and whether one is the ``agent`` tool."""
    tools: list[str] = []
    delegates = False
    for token in tokens:
        word = token.strip()
        head, slash, tail = word.partition("/")
        if slash and head.lower() not in _NAMESPACES:
            tools.append(f"mcp__{head}__{tail}")
            continue
        name = (tail if slash and tail != "*" else head).lower()
        if word == "*":
            tools.append("*")
        elif name in _DELEGATION or head.lower() == "agent":
            delegates = True
        elif name in _TOOLS:
            tools.extend(_TOOLS[name])
        elif slash and tail == "*" and head.lower() in _TOOLS:
            tools.extend(_TOOLS[head.lower()])
        else:
            tools.append(word)  # grants nothing; the field rules warn (unknown-tool)
    return list(dict.fromkeys(tools)), delegates


def translate_copilot(out: Translation, key: str, value: Any) -> bool:
    """Handle ``key`` if it is a Copilot key; ``False`` leaves it to the Membrane fields."""
    if key == "tools":
        tokens = tokens_of(value)
        if tokens is None:
            return False  # the field rules refuse the shape, with their own message
        tools, delegates = copilot_tools(tokens)
        out.add(key, "tools", tools or "none")
        if delegates:
            out.add(key, "allowed_subagents", "*")
        return True
    if key == "mcp-servers":
        if not isinstance(value, Mapping):
            out.add(key, "mcp_servers", value)  # the field rules refuse it
            return True
        servers = {}
        for name, spec in value.items():
            entry = _server(out, str(name), spec)
            if entry is not None:
                servers[str(name)] = entry
        out.add(key, "mcp_servers", servers)
        return True
    if key in _QUIET:
        out.add(key, None, value, quiet=True)
        return True
    return False


def _server(out: Translation, name: str, spec: Any) -> Any:
    if not isinstance(spec, Mapping):
        return spec
    listed = spec.get("tools", ["*"])
    if listed != ["*"] and listed != "*":
        out.reader.warn(
            "mcp-servers",
            "dialect-unsupported",
            f"`mcp-servers.{name}` lists only some of its tools; a definition's server selects "
            "all of them in Membrane, so it is left out: configure it in the settings' "
            f"[mcp_servers.{name}] and name its tools in `tools` ({name}/TOOL)",
        )
        return None
    return {k: v for k, v in spec.items() if k in _SERVER_KEYS}


def finish_copilot(out: Translation, dialect: object) -> None:
    """Copilot asks before each terminal command: an ``ask`` rule on ``Bash``."""
    rule = PermissionRule("Bash", None, "ask", "Bash: ask (Copilot asks)", "dialect:copilot")
    out.reader.rules.append(rule)
