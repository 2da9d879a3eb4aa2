"""Deployment settings: ``~/.membrane/config.toml`` < ``<project>/.membrane/config.toml``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from membrane.config.budget import Budget
from membrane.limits import check_count, check_depth_cap
from membrane.vocabulary import READ_ONLY_TOOLS

__all__ = [
    "BUILTIN_ROLES",
    "DEFAULT_ROLE",
    "DEFAULT_TOOLS",
    "SANDBOX_CHOICES",
    "McpServerSpec",
    "ModelEntry",
    "OmittedTools",
    "ProductRule",
    "RateLimit",
    "Retention",
    "RoleSpec",
    "SandboxChoice",
    "Settings",
    "Verdict",
]

OmittedTools = Literal["default", "inherit", "all"]
#: What a permission rule says about the calls it matches.
Verdict = Literal["allow", "ask", "deny"]

#: Seed 000, decision 5: documents that omit ``tools`` stay read-only.
DEFAULT_TOOLS: tuple[str, ...] = READ_ONLY_TOOLS

#: The ``sandbox`` setting: ``auto`` is the strongest backend this machine offers; ``guard`` is
#: the shell guard alone (no OS boundary).
SandboxChoice = Literal["auto", "bubblewrap", "landlock", "guard"]
SANDBOX_CHOICES: tuple[SandboxChoice, ...] = ("auto", "bubblewrap", "landlock", "guard")


@dataclass(frozen=True, slots=True)
class Retention:
    """What finished runs the store keeps (``[retention]`` in the settings).

    A finished run (``FINISHED_STATES``) is deleted with its events, transcript, delivered
    notices, completed receipts and lineage once it ended more than ``runs_days[status]`` days
    ago (a status not named is kept), or once ``keep_runs`` finished runs ended after it.
    ``lineage = "summary"`` keeps its header and lineage edge (who started it, how it ended)
    instead of deleting them. Dead letters go after ``dead_letters_days``. ``membrane serve``
    prunes every ``interval_seconds``; ``membrane runs prune`` prunes once.
    """

    runs_days: Mapping[str, float] = field(default_factory=dict)
    keep_runs: int | None = None
    dead_letters_days: float | None = None
    lineage: str = "delete"
    interval_seconds: float = 3600.0

    @property
    def enabled(self) -> bool:
        """Whether anything is ever deleted."""
        return (
            bool(self.runs_days)
            or self.keep_runs is not None
            or (self.dead_letters_days is not None)
        )


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A sliding window: at most ``max_calls`` in ``window_seconds``."""

    max_calls: int
    window_seconds: float


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """What callers in one trusted role may see: a restriction over global tools/actions.

    ``allow``/``deny`` hold tool names and ``ext:``/``mcp__`` selectors; ``permissions`` the
    requirements (``Tool.requires``) its callers may use."""

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] | None = None
    permissions: tuple[str, ...] = ()


#: The role of a caller with no trusted role (DESIGN rule 11): the least privileged one.
DEFAULT_ROLE = "external"
#: Roles every deployment has; a settings entry of the same name replaces one whole.
BUILTIN_ROLES: Mapping[str, RoleSpec] = MappingProxyType(
    {DEFAULT_ROLE: RoleSpec(allow=DEFAULT_TOOLS)}
)


@dataclass(frozen=True, slots=True)
class McpServerSpec:
    """One MCP server (``[mcp_servers.NAME]``): a command to run over stdio, or a ``url`` for
    streamable HTTP. Its tools become ``mcp__NAME__TOOL`` (origin ``mcp:NAME``).

    ``timeout`` bounds each tool call and ``startup_timeout`` the start and handshake, in
    seconds; past either the server counts as unavailable.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 60.0
    startup_timeout: float = 30.0

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """A ``[models.NAME]`` entry's ``price``: US dollars per million tokens of each kind
    (``cache_read`` and ``cache_write``: the ``input`` price when not given)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """A ``[models.NAME]`` entry: a named model a spec can point at.

    ``provider`` is ``openai`` (OpenAI or any OpenAI-compatible server), ``anthropic`` or
    ``scripted`` (then ``model`` is the script's path). ``api_key_env`` names the variable that
    holds the key; the key itself never sits in a settings file.
    """

    provider: Literal["openai", "anthropic", "scripted"]
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    stream: bool = True
    timeout: float | None = None
    max_tokens: int | None = None
    #: What one streamed reply may carry (text and tool-call arguments, in bytes) before it
    #: is cut off with ``model-response-too-large`` (default 16 MiB).
    max_response_bytes: int | None = None
    #: The longest silence between two events of a streamed reply (seconds; default 120).
    stall_timeout: float | None = None
    reasoning: bool | None = None
    #: ``openai`` only: tools are sent in OpenAI's strict mode (``strict: true``).
    strict_tools: bool = False
    #: What the model costs, replacing the price table's (``membrane.models.prices``).
    price: ModelPrice | None = None
    #: The deployment's limits on this endpoint, shared by every run that uses it
    #: (``membrane.models.limiter``): request pace, tokens per minute, requests in flight.
    requests_per_minute: float | None = None
    tokens_per_minute: int | None = None
    max_concurrent_requests: int | None = None


#: The metadata of a ``Settings`` field no config key sets: the loader derives it from the files.
_DERIVED: Mapping[str, bool] = MappingProxyType({"derived": True})


@dataclass(frozen=True, slots=True)
class ProductRule:
    """One permission rule another product's settings file holds, in Claude Code's syntax
    (``Tool`` or ``Tool(specifier)``; OpenCode's are written in it too); ``source`` is the
    file's label (``.claude/settings.json``)."""

    verdict: Verdict
    rule: str
    source: str


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved deployment settings. Every field has the documented default.

    The numbers are checked where they enter, here (``membrane.limits``): ``max_depth`` is a
    depth or ``"provider-managed"`` (else ``InvalidDepth``), the counts are whole numbers in
    range (else ``InvalidRequest``).
    """

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
    #: A ``RunTracer`` records each tool call's arguments on its span (they can hold secrets).
    trace_tool_arguments: bool = False
    max_concurrency: int = 10
    #: How many foreground children (``Task`` calls' children) run at once; ``None``: no cap.
    max_foreground_children: int | None = None
    grace_turns: int = 5
    default_max_turns: int | None = None
    roles: Mapping[str, RoleSpec] = field(default_factory=lambda: BUILTIN_ROLES)
    #: The role of the owner's runtime-backed commands that name none (``None``: the owner's
    #: own authority, as a headless command). Callers that cannot prove they are the owner
    #: and bring no run token get ``external`` whatever this says (DESIGN rule 11).
    default_role: str | None = None
    #: The role ``membrane console`` acts under (``None``: ``default_role``, else the owner's own
    #: authority). Its view decides what the console may do: saving a definition and answering
    #: an approval need ``Write`` in it.
    console_role: str | None = None
    #: ``membrane serve``: the role of a tokenless caller whose peer uid is named here (global
    #: settings). The socket is opened to exactly these uids (a POSIX ACL); the server's own
    #: uid may not be named: its tokenless callers stay ``external`` (DESIGN rule 11).
    peer_roles: Mapping[int, str] = field(default_factory=dict)
    rate_limits: Mapping[str, RateLimit] = field(default_factory=dict)
    #: Sessions whose rate-limit windows are held per tool; past it the owner's new sessions
    #: share one window and any other new one waits (a live window is never evicted).
    rate_limit_sessions: int = 10_000
    #: ``[models.NAME]`` entries: named models a spec (``--model local``) can point at.
    models: Mapping[str, ModelEntry] = field(default_factory=dict)
    #: The spec a run uses when neither the host, the definition nor the call names one.
    default_model: str | None = None
    #: A definition file's model no provider here serves: ``fallback`` runs the agent on the
    #: run's default model (a ``model-fallback`` warning); ``error`` keeps it, so the start
    #: fails with ``unknown-model``. A model the call names is never replaced.
    unknown_model: Literal["fallback", "error"] = "fallback"
    #: ``[budget]``: what every top-level run and its subtree may spend (DESIGN rule 12).
    budget: Budget | None = None
    #: ``[[rules]]``: argument rules over every agent's tool calls, each as its JSON text (read
    #: into rules by ``membrane.tools.argument_rules.settings_rules``); both files' add up.
    rules: tuple[str, ...] = ()
    #: SQLite's ``synchronous`` for the state file: ``full`` syncs every commit (it survives
    #: power loss), ``normal`` syncs at checkpoints (it survives the process being killed, but
    #: a power cut may lose the last commits). See docs/performance.md.
    state_synchronous: Literal["full", "normal"] = "full"
    #: A ``postgresql://`` URL: the state lives in that database instead of the project's
    #: SQLite file (``--state`` and ``MEMBRANE_STATE_URL`` come first). See docs/durability.md.
    state_url: str | None = None
    mcp_servers: Mapping[str, McpServerSpec] = field(default_factory=dict)
    #: The OS boundary Bash runs in (DESIGN rule 10).
    sandbox: SandboxChoice = "auto"
    #: Whether sandboxed commands may use the network.
    sandbox_network: bool = False
    #: Read roots every child may read besides its checkout and the system's folders
    #: (DESIGN rule 14): absolute paths or ``~/...``.
    read_paths: Sequence[str] = ()
    #: A built-in read (``Read``, ``Glob``, ``Grep``) outside the checkout, the read roots and
    #: the system's folders: ``refuse`` (``path-outside-checkout``) or ``ask`` the host, as an
    #: ``ask`` rule does (a secret place only when a rule names that exact path).
    read_outside: Literal["refuse", "ask"] = "refuse"
    #: Whether each model request and response is logged beside the run's state (as
    #: ``membrane run --log-requests`` does; ``membrane show RUN_ID --requests`` prints them).
    log_requests: bool = False
    #: Other products' definition roots (dialects); each can be turned off.
    claude_code_agents: bool = True
    opencode_agents: bool = True
    pi_agents: bool = True
    codex_agents: bool = True
    copilot_agents: bool = True
    #: What a dialect file that leaves ``tools`` out gets: ``default`` (Membrane's read-only
    #: ``default_tools``, with a ``dialect-default-differs`` warning), ``inherit`` or ``all``.
    claude_code_omitted_tools: OmittedTools = "default"
    opencode_omitted_tools: OmittedTools = "default"
    pi_omitted_tools: OmittedTools = "default"
    codex_omitted_tools: OmittedTools = "default"
    copilot_omitted_tools: OmittedTools = "default"
    #: ``[model_aliases]``: a short model name (``sonnet``) -> the model it stands for.
    model_aliases: Mapping[str, str] = field(default_factory=dict)
    #: An alias written as a list (``fast = ["local", "openai:gpt-4.1-mini"]``): the alias ->
    #: its fallbacks, tried in order after the first (which ``model_aliases`` holds).
    alias_fallbacks: Mapping[str, tuple[str, ...]] = field(default_factory=dict, metadata=_DERIVED)
    #: ``allowed_models``: the only models any agent may run on (``None``: any). An entry is a
    #: ``provider:model`` spec, a ``[models]`` entry or an alias; a spec is allowed when it is
    #: listed as written or names the same ``provider:model`` as a listed one.
    allowed_models: tuple[str, ...] | None = None
    #: Whether the Claude Code settings files (``~/.claude/settings.json``,
    #: ``.claude/settings.json``, ``.claude/settings.local.json``) and the OpenCode config
    #: (``opencode.json``) are read (``membrane.config.product_settings``).
    claude_code_settings: bool = True
    opencode_settings: bool = True
    #: Their permission rules, applied to every agent of the tree in this order (the last
    #: matching rule wins; ``membrane.resolve.product_rules``).
    product_rules: tuple[ProductRule, ...] = field(default=(), metadata=_DERIVED)
    #: Their ``hooks``: ``(file, JSON text of the hooks table)``, lowest file first; every
    #: file's hooks run (``membrane.agents.settings_hooks``).
    product_hooks: tuple[tuple[str, str], ...] = field(default=(), metadata=_DERIVED)
    #: The file that says ``disableBypassPermissionsMode: "disable"`` (no agent bypasses
    #: permissions), or ``None``.
    no_bypass: str | None = field(default=None, metadata=_DERIVED)
    #: Where each field a file set comes from: the file's label (``.membrane/config.toml``,
    #: ``.claude/settings.json``); a field no file set is absent (its default).
    sources: Mapping[str, str] = field(default_factory=dict, metadata=_DERIVED)
    #: Each read root of ``read_paths`` a product's file named -> that file's label (the
    #: others come from Membrane's own files).
    read_path_sources: Mapping[str, str] = field(default_factory=dict, metadata=_DERIVED)
    #: What the settings files hold that Membrane does not apply (never fatal).
    warnings: tuple[str, ...] = field(default=(), metadata=_DERIVED)
    #: DESIGN rule 8: a pending receipt older than this is reaped by the sweeper (15 minutes).
    receipt_ttl_seconds: float = 900.0
    #: Delivery attempts of an outbox item before it is dead-lettered.
    outbox_max_attempts: int = 10
    #: How long a run's lease lasts unless renewed (renewed at a third of it while it runs).
    lease_seconds: float = 30.0
    #: How often the sweeper runs (besides once when a runtime opens).
    sweep_interval_seconds: float = 60.0
    #: Where the children of ``start()`` run: ``in-process`` (here) or ``dbos`` (on the queue
    #: ``queue_name``, driven by ``membrane worker`` on any node; docs/scale.md).
    provider: Literal["in-process", "dbos"] = "in-process"
    queue_name: str = "membrane"
    #: The fleet-wide cap on children running at once on the queue (``None``: none).
    queue_concurrency: int | None = None
    #: At most ``queue_rate_limit`` children start per ``queue_rate_period`` seconds, fleet-wide.
    queue_rate_limit: int | None = None
    queue_rate_period: float = 1.0
    #: ``membrane serve``: connections open at once in all, and from one peer process; a
    #: connection past either is refused with ``too-many-connections``.
    server_max_connections: int = 512
    server_max_connections_per_peer: int = 256
    #: ``membrane serve``: ``runs/wait`` calls in flight on one connection (``too-many-waits``).
    server_max_waits_per_connection: int = 64
    #: ``membrane serve``: bytes of ``actions/call`` replies kept for their ``requestId``s.
    server_reply_cache_bytes: int = 64 * 1024 * 1024
    #: ``membrane serve``: bytes of partial request lines held for all connections together;
    #: the connection whose line would pass it is answered ``too-many-buffered-bytes`` and closed.
    server_max_buffered_bytes: int = 64 * 1024 * 1024
    #: What finished runs the store keeps (``[retention]``); by default all of them.
    retention: Retention = field(default_factory=Retention)

    def __post_init__(self) -> None:
        cap = check_depth_cap(self.max_depth, what="settings.max_depth")
        if cap is not None:
            object.__setattr__(self, "max_depth", cap)
        check_count(self.max_concurrency, what="settings.max_concurrency", minimum=1)
        check_count(
            self.max_foreground_children,
            what="settings.max_foreground_children",
            minimum=1,
            optional=True,
        )
        if self.allowed_models is not None:
            object.__setattr__(self, "allowed_models", tuple(self.allowed_models))
        check_count(self.grace_turns, what="settings.grace_turns", minimum=0)
        check_count(
            self.default_max_turns, what="settings.default_max_turns", minimum=1, optional=True
        )

    def model_alias(self, name: str) -> str | None:
        """What ``name`` stands for under ``[model_aliases]`` (exact name first, then any
        case), or ``None``: the one place a model alias is looked up."""
        alias = self.alias_name(name)
        return None if alias is None else self.model_aliases[alias]

    def alias_name(self, name: str) -> str | None:
        """The ``[model_aliases]`` alias ``name`` means (exact name first, then any case)."""
        if name in self.model_aliases:
            return name
        folded = name.casefold()
        return next((a for a in self.model_aliases if a.casefold() == folded), None)

    def source_of(self, name: str) -> str:
        """Where the field ``name`` comes from: the label of the file that set it, else
        ``default``."""
        return self.sources.get(name, "default")

    def sourced(self) -> dict[str, dict[str, object]]:
        """Each field a settings file set: its value (a table as its names) and the file's
        label, as ``explain --json`` shows them under ``settings``."""
        out: dict[str, dict[str, object]] = {}
        for name, source in sorted(self.sources.items()):
            value = getattr(self, name, None)
            if name == "product_hooks":
                value = [{"file": f, "hooks": json.loads(t)} for f, t in self.product_hooks]
            elif isinstance(value, Mapping):
                value = sorted(value)
            elif isinstance(value, tuple | list):
                value = [v if isinstance(v, str | int | float | bool) else str(v) for v in value]
            elif not isinstance(value, str | int | float | bool | None):
                value = str(value)
            out[name] = {"value": value, "source": source}
        return out
