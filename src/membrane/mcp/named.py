"""Which MCP servers (and extensions) a definition asks for, read from the definition alone.

Kept apart from ``membrane.mcp.mount`` so that a pure read (``membrane explain``) can tell
whether any server would be mounted without importing the mounting machinery.
"""

from __future__ import annotations

from collections.abc import Mapping

from membrane.agents.definition import AgentDefinition
from membrane.config.values import McpServerSpec
from membrane.resolve.tools import Selector

__all__ = ["mounts_servers", "servers_named"]


def servers_named(definition: AgentDefinition) -> frozenset[str]:
    """Server (extension) names a definition asks for by name: its ``mcp__``/``ext:``
    selectors in ``tools``, its ``extensions`` list and its ``mcp_servers``. ``isolated: true``
    asks for none."""
    if definition.isolated is True:
        return frozenset()
    names: set[str] = set()
    tools = definition.tools if isinstance(definition.tools, tuple) else ()
    for token in tools:
        selector = Selector.parse(token)
        if selector is not None:
            names.add(selector.extension)
    if isinstance(definition.extensions, tuple):
        names.update(definition.extensions)
    if isinstance(definition.mcp_servers, Mapping):
        names.update(definition.mcp_servers)
    if isinstance(definition.exclude_extensions, tuple):
        names.difference_update(definition.exclude_extensions)
    return frozenset(names)


def mounts_servers(definition: AgentDefinition, configured: Mapping[str, McpServerSpec]) -> bool:
    """Whether mounting the ``configured`` servers for ``definition`` (``McpServers``' enter and
    ``prepare``) would mount any server at all: the definition names a server or extension and
    there is a configured server or an inline one. When it is false, mounting changes nothing."""
    if not servers_named(definition):
        return False
    if configured:
        return True
    inline = definition.mcp_servers
    return isinstance(inline, Mapping) and any(spec is not None for spec in inline.values())
