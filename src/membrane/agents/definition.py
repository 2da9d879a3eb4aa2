"""``AgentDefinition``: one agent file (or builtin); ``UNSET`` for every field it leaves out."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal, TypeVar

from membrane.agents.command_hooks import CommandHook
from membrane.config.budget import Budget
from membrane.config.values import McpServerSpec
from membrane.tools.rules import PermissionRule

__all__ = [
    "FIELDS",
    "NAME_RE",
    "REPAIRED_NAME",
    "UNSET",
    "AgentDefinition",
    "DefinitionWarning",
    "Dispatch",
    "Unset",
    "is_set",
    "or_else",
]


class Unset(enum.Enum):
    """The type of ``UNSET``: a field left out, distinct from ``None``, ``False`` and ``[]``."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False

    # The one member equals only itself, so identity hashing is exact; Enum's own ``__hash__``
    # is a Python-level call that hashes the name, paid whenever a record holding ``UNSET`` is
    # hashed (as a cache key).
    __hash__ = object.__hash__


UNSET: Final = Unset.UNSET
#: A definition name: it keys the catalog and memory paths and appears in prompt tags, so it is
#: restricted to characters that are safe in all three.
NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
#: The warning code of a repaired name; the catalog refuses such a file when the slug collides.
REPAIRED_NAME: Final = "repaired-name"

T = TypeVar("T")
U = TypeVar("U")


def is_set(value: T | Unset) -> bool:
    """True when a field was given in the file (even as ``false`` or ``[]``)."""
    return value is not UNSET


def or_else(value: T | Unset, default: U) -> T | U:
    """Nullish coalescing over ``UNSET`` only: an explicit ``False`` or ``[]`` is kept."""
    return default if value is UNSET else value


@dataclass(frozen=True, slots=True)
class DefinitionWarning:
    """A repair or a suspicious key, reported as ``path:line: code: message``."""

    path: str
    line: int | None
    code: str
    message: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.code}: {self.message}"


PromptMode = Literal["replace", "append"]
AgentMode = Literal["subagent", "primary", "all"]
Isolation = Literal["off", "worktree"]
MemoryScope = Literal["project", "local", "user"]


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """One definition. Lists are normalised to tuples of tokens, in file order.

    ``tools`` keeps the selector tokens as written (``inherit``, ``*``, ``all``, ``ext:NAME``,
    ``mcp__SERVER__TOOL``, builtin names); ``tools: none`` and ``tools: []`` both become ``()``,
    which means *no tools* and is not the same as leaving ``tools`` out (``UNSET``).
    ``extensions`` and ``skills`` are ``True``/``False`` or a tuple of names (``*`` kept).
    """

    name: str
    body: str = ""
    description: str | Unset = UNSET
    model: str | Unset = UNSET
    #: ``model: [primary, fallback...]``: the models tried in order after ``model`` when it
    #: fails in a way another model can fix (``membrane.models.fallback``).
    fallback_models: tuple[str, ...] | Unset = UNSET
    thinking: str | Unset = UNSET
    #: ``auto``, ``required``, ``none`` or a tool's name: what the model is asked for on the
    #: agent's turns until its first tool call (``membrane.loop``), then the provider's default.
    tool_choice: str | Unset = UNSET
    max_turns: int | Unset = UNSET
    #: Limits on this agent's own model requests, across all its runs in the deployment, held
    #: inside the model endpoint's (``membrane.models.limiter``): they only ever tighten it.
    requests_per_minute: int | Unset = UNSET
    max_concurrent_requests: int | Unset = UNSET
    #: What a run of this agent and its subtree may spend (``membrane.config.budget``).
    budget: Budget | Unset = UNSET
    tools: tuple[str, ...] | Unset = UNSET
    disallowed_tools: tuple[str, ...] | Unset = UNSET
    #: Tools (or ``Tool(pattern)`` rules) whose calls need the host's approval.
    ask_tools: tuple[str, ...] | Unset = UNSET
    extensions: bool | tuple[str, ...] | Unset = UNSET
    exclude_extensions: tuple[str, ...] | Unset = UNSET
    #: MCP servers the definition asks for, by name: ``None`` names a server of the settings,
    #: a ``McpServerSpec`` is an inline entry (Claude Code's ``mcpServers``).
    mcp_servers: Mapping[str, McpServerSpec | None] | Unset = UNSET
    skills: bool | tuple[str, ...] | Unset = UNSET
    prompt_mode: PromptMode | Unset = UNSET
    inherit_context: bool | Unset = UNSET
    run_in_background: bool | Unset = UNSET
    isolated: bool | Unset = UNSET
    isolation: Isolation | Unset = UNSET
    #: ``true``: this agent's sandboxed commands (``Bash``, ``run_code``) may use the network,
    #: as the deployment's ``sandbox_network`` lets every agent's do.
    network: bool | Unset = UNSET
    #: Folders this agent may read besides its checkout, the settings' ``read_paths`` and the
    #: system's (absolute or ``~/...``, as written): ``Read``, ``Glob``, ``Grep`` and its
    #: sandboxed commands; held under its parent's (``membrane.resolve.ceiling``).
    read_paths: tuple[str, ...] | Unset = UNSET
    memory: MemoryScope | Unset = UNSET
    allowed_subagents: tuple[str, ...] | Unset = UNSET
    #: ``true``: a run of this agent gets the ``AskParent`` tool, to ask the run that started
    #: it a question and wait for its answer (``membrane.runtime.questions``).
    may_ask_parent: bool | Unset = UNSET
    enabled: bool | Unset = UNSET
    permission: str | Unset = UNSET
    display_name: str | Unset = UNSET
    color: str | Unset = UNSET
    #: ``subagent`` (only started by another agent), ``primary`` (only run at the top level, never
    #: dispatched for a ``Task`` call) or ``all`` (both; the default).
    mode: AgentMode | Unset = UNSET
    #: Left out of delegation catalogs that list every agent (``allowed_subagents: '*'``); still
    #: started when named.
    hidden: bool | Unset = UNSET
    #: A cron expression: a runtime that opts in (``membrane serve``) schedules a run of this
    #: agent on it (pi-subagents' ``schedule``), in the runtime host's time zone.
    schedule: str | Unset = UNSET
    #: A gated workflow the agent runs under (``planning``: seed 002's planning gate): its
    #: phases unlock its tools, delegation included; see ``membrane.workflow``.
    workflow: str | Unset = UNSET
    #: Command hooks (Claude Code's ``hooks``) run for this agent only, in its sandbox; see
    #: ``membrane.agents.command_hooks``.
    hooks: tuple[CommandHook, ...] | Unset = UNSET
    #: How the file's fields were read: ``membrane``, ``claude-code``, ``opencode`` or ``pi``.
    dialect: str = "membrane"
    #: The key a field was read from, where it is not the field's name (``maxTurns``).
    keys: Mapping[str, str] = field(default_factory=dict)
    #: Argument-level permission rules, in the order they apply (last match wins): the
    #: ``allow`` rules of ``tools``, then ``ask_tools``, then ``disallowed_tools``; a dialect's
    #: own rules (OpenCode's ``permission``) in its order.
    rules: tuple[PermissionRule, ...] = ()
    #: Where it came from: ``builtin``, ``global``, ``workspace`` or ``project``.
    root: str = "builtin"
    #: The file it was read from (for builtins, ``<builtin>/`` and the packaged file's name).
    path: str = "<builtin>"
    #: 1-based line of each frontmatter key in the file, for error messages.
    lines: Mapping[str, int] = field(default_factory=dict)
    #: Unknown keys, kept as parsed (each also produced a warning).
    extra: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[DefinitionWarning, ...] = ()

    @property
    def builtin(self) -> bool:
        return self.root == "builtin"

    @property
    def inherits_tools(self) -> bool:
        """``tools: inherit`` or ``tools: [inherit, ...]`` (seed 000, decision 1)."""
        return isinstance(self.tools, tuple) and any(t.lower() == "inherit" for t in self.tools)

    def source_of(self, name: str) -> str:
        """Who set field ``name``: ``frontmatter`` in a Membrane file, ``dialect:NAME`` in a file
        read by another product's dialect."""
        return "frontmatter" if self.dialect == "membrane" else f"dialect:{self.dialect}"

    @property
    def is_enabled(self) -> bool:
        return self.enabled is not False

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values; fields left ``UNSET`` are omitted, explicit ``false``/``[]`` kept."""
        out: dict[str, Any] = {
            "name": self.name,
            "root": self.root,
            "path": self.path,
            "dialect": self.dialect,
        }
        for f in fields(self):
            if f.name in _META:
                continue
            value = getattr(self, f.name)
            if f.name == "mcp_servers" and isinstance(value, Mapping):
                out[f.name] = {
                    name: None if spec is None else _spec_json(spec) for name, spec in value.items()
                }
            elif f.name == "hooks" and isinstance(value, tuple):
                out[f.name] = [hook.to_json() for hook in value]
            elif isinstance(value, Budget):
                out[f.name] = value.to_dict()
            elif value is not UNSET:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        out["body"] = self.body
        out["lines"] = dict(self.lines)
        out["keys"] = dict(self.keys)
        out["extra"] = dict(self.extra)
        out["rules"] = [rule.to_json() for rule in self.rules]
        out["warnings"] = [
            {"path": w.path, "line": w.line, "code": w.code, "message": w.message}
            for w in self.warnings
        ]
        return out


#: Attributes that are not frontmatter fields.
_META = frozenset(
    {"name", "root", "path", "body", "lines", "extra", "warnings", "dialect", "keys", "rules"}
    # Written as the rest of a ``model:`` list, never as a key of its own.
    | {"fallback_models"}
)


def _spec_json(spec: McpServerSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"transport": spec.transport}
    if spec.command is not None:
        out.update(command=spec.command, args=list(spec.args))
    if spec.url is not None:
        out["url"] = spec.url
    return out


#: Every frontmatter field, in the order ``AgentDefinition`` declares them.
FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(AgentDefinition) if f.name == "name" or f.name not in _META
)


@dataclass(frozen=True, slots=True)
class Dispatch:
    """The answer to an agent type: the definition to run and, when it is not an exact hit, why."""

    definition: AgentDefinition
    requested: str
    note: str | None = None
    #: True when the fallback policy chose ``definition``.
    fallback: bool = False
