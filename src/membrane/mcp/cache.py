"""``ToolListCache``: each MCP server's last ``tools/list``, kept so that its tool names are known
before the server first starts (``explain``, tool filters, roles, ``membrane mcp list``).

One JSON file per server under ``<home>/cache/mcp/``, named ``NAME-KEY.json`` where ``KEY`` is a
digest of everything that says which server it is (transport, command, args, env, cwd, url,
headers): an entry whose settings changed in any of these is never read. An entry is rewritten
each time the server lists its tools (at every start, and on ``tools/list_changed``), and the
server's own listing always replaces what the cache said. A file that cannot be read or parsed
counts as no entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membrane.config.values import McpServerSpec

__all__ = ["CachedTool", "ToolListCache", "spec_key"]


@dataclass(frozen=True, slots=True)
class CachedTool:
    """One tool as the server listed it (its own name, not ``mcp__SERVER__TOOL``)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool = False


def spec_key(spec: McpServerSpec) -> str:
    """A digest of what identifies the server ``spec`` reaches (not its timeouts)."""
    identity = {
        "name": spec.name,
        "command": spec.command,
        "args": list(spec.args),
        "env": dict(sorted(spec.env.items())),
        "cwd": spec.cwd,
        "url": spec.url,
        "headers": dict(sorted(spec.headers.items())),
    }
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


class ToolListCache:
    """The cached tool lists under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, spec: McpServerSpec) -> Path:
        return self.directory / f"{spec.name}-{spec_key(spec)}.json"

    def read(self, spec: McpServerSpec) -> tuple[CachedTool, ...] | None:
        """The tools last listed by the server ``spec`` reaches, or ``None``."""
        try:
            data = json.loads(self.path(spec).read_text(encoding="utf-8"))
            if data.get("key") != spec_key(spec):
                return None
            return tuple(
                CachedTool(
                    name=str(entry["name"]),
                    description=str(entry.get("description", "")),
                    input_schema=dict(entry["input_schema"]),
                    read_only=entry.get("read_only") is True,
                )
                for entry in data["tools"]
            )
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None

    def write(self, spec: McpServerSpec, tools: Sequence[CachedTool]) -> None:
        """Record ``tools`` as the list of the server ``spec`` reaches (atomically)."""
        data = {
            "server": spec.name,
            "key": spec_key(spec),
            "tools": [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": dict(tool.input_schema),
                    "read_only": tool.read_only,
                }
                for tool in tools
            ],
        }
        target = self.path(spec)
        with contextlib.suppress(OSError):
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            scratch = target.with_suffix(f".{os.getpid()}.tmp")
            scratch.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(scratch, target)

    def forget(self, spec: McpServerSpec) -> None:
        with contextlib.suppress(OSError):
            self.path(spec).unlink(missing_ok=True)
