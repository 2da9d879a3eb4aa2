"""The pydantic models of untrusted tables: a ``config.toml`` file, its ``[models.NAME]``,
``[roles.NAME]`` and ``[rate_limits.TOOL]`` entries, and an MCP server's table (from the
settings or a definition's inline entry).

Each model is strict (a string is never read as a number, nor a number as a string) and refuses
unknown keys; a whole number of seconds is read as a float. ``first_problem`` turns pydantic's
``ValidationError`` into the one shape every reader of untrusted input reports (where, what kind,
in words, the value at fault), which the loader turns into a ``SettingsError``. The values are
converted into the dataclasses of ``membrane.config.values`` at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from membrane.config.values import OmittedTools, SandboxChoice
from membrane.limits import MAX_SAFE_INT, PROVIDER_MANAGED, depth_problem
from membrane.vocabulary import FINISHED_STATES

__all__ = [
    "CONFIG_KEYS",
    "URL_PROBLEM",
    "McpServerTable",
    "ModelTable",
    "Problem",
    "RateLimitTable",
    "RetentionTable",
    "RoleTable",
    "SettingsFile",
    "first_problem",
]

#: What a model entry's ``base_url`` must be (the SDKs would take "localhost:8080/v1" as a
#: relative path and fail only at the first request, far from the setting).
URL_PROBLEM = "must be an http:// or https:// URL with a host, such as http://127.0.0.1:8080/v1"

_Name = Annotated[str, Field(min_length=1)]
_Count = Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
_Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


@dataclass(frozen=True, slots=True)
class Problem:
    """The first problem of an untrusted table: where (``loc``, keys and list indexes from the
    outside in), what kind (pydantic's error type), a sentence, and the value at fault."""

    loc: tuple[str | int, ...]
    kind: str
    message: str
    value: object


def first_problem(exc: ValidationError) -> Problem:
    """The first of ``exc``'s errors, in the order the model declares its fields (a key it does
    not know comes after them)."""
    error = exc.errors()[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "model_type":  # pydantic names the model class, which a user never wrote
        message = "Input should be a valid dictionary"
    return Problem(
        loc=tuple(error["loc"]), kind=error["type"], message=message, value=error.get("input")
    )


def _float(value: Any) -> Any:
    """A whole number of seconds read as a float (pydantic's strict mode refuses it as is)."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise ValueError("Input should be a finite number") from None
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class RoleTable(_Strict):
    """``[roles.NAME]``."""

    allow: list[str] | None = None
    deny: list[str] | None = None
    permissions: list[_Name] | None = None


class RateLimitTable(_Strict):
    """``[rate_limits.TOOL]``."""

    max_calls: _Count
    window_seconds: _Seconds

    _seconds = field_validator("window_seconds", mode="before")(_float)


class McpServerTable(_Strict):
    """``[mcp_servers.NAME]``, or a definition's inline entry (``mcp_server_spec`` checks what
    spans keys: exactly one of ``command`` and ``url``, ``headers`` only with ``url``)."""

    command: _Name | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: _Name | None = None
    url: _Name | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: _Seconds = 60.0
    startup_timeout: _Seconds = 30.0

    _seconds = field_validator("timeout", "startup_timeout", mode="before")(_float)


_Dollars = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class PriceTable(_Strict):
    """``[models.NAME] price = {input = ..., output = ...}``: US dollars per million tokens."""

    input: _Dollars
    output: _Dollars
    cache_read: _Dollars | None = None
    cache_write: _Dollars | None = None


class ModelTable(_Strict):
    """``[models.NAME]``."""

    provider: Literal["openai", "anthropic", "scripted"]
    model: _Name
    base_url: _Name | None = None
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    stream: bool = True
    timeout: _Seconds | None = None
    max_tokens: _Count | None = None
    max_response_bytes: _Count | None = None
    stall_timeout: _Seconds | None = None
    reasoning: bool | None = None
    strict_tools: bool = False
    requests_per_minute: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    tokens_per_minute: _Count | None = None
    max_concurrent_requests: _Count | None = None
    price: PriceTable | None = None

    _seconds = field_validator("timeout", "stall_timeout", "requests_per_minute", mode="before")(
        _float
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            parts = urlsplit(value)
            host = parts.hostname
            parts.port  # noqa: B018  (raises for a port that is not a number)
        except ValueError:
            host = None
        if parts.scheme not in ("http", "https") or not host:
            raise ValueError(URL_PROBLEM)
        return value


_Days = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class RetentionTable(_Strict):
    """``[retention]``: ``runs_days`` is a number of days for every finished status, or a
    table of days by status (``completed``, ``wrapped_up``, ``stopped``, ``aborted``, ``error``,
    ``interrupted``)."""

    runs_days: _Days | dict[str, _Days] | None = None
    keep_runs: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)] | None = None
    dead_letters_days: _Days | None = None
    lineage: Literal["delete", "summary"] = "delete"
    interval_seconds: _Seconds = 3600.0

    _numbers = field_validator("runs_days", "dead_letters_days", "interval_seconds", mode="before")(
        _float
    )

    @field_validator("runs_days", mode="before")
    @classmethod
    def _statuses(cls, value: object) -> object:
        if isinstance(value, dict):
            unknown = sorted(set(value) - FINISHED_STATES)
            if unknown:
                raise ValueError(
                    f"names no finished status: {', '.join(unknown)} "
                    f"(statuses: {', '.join(sorted(FINISHED_STATES))})"
                )
            return {key: _float(days) for key, days in value.items()}
        return value


class SettingsFile(_Strict):
    """One ``config.toml``. ``None`` means the file leaves the key to the lower file or the
    default. ``mcp_servers``, ``budget`` and ``rules`` hold tables checked by their own readers,
    so that an error names the server, the kind or the rule."""

    default_tools: list[str] | None = None
    fallback_subagent: _Name | None = None
    max_depth: int | Literal["provider-managed"] | None = None
    hide_delegation_at_cap: bool | None = None
    persona: str | None = None
    permission_mode: _Name | None = None
    worktrees_enabled: bool | None = None
    trace_tool_arguments: bool | None = None
    max_concurrency: _Count | None = None
    max_foreground_children: _Count | None = None
    grace_turns: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)] | None = None
    default_max_turns: _Count | None = None
    default_role: _Name | None = None
    console_role: _Name | None = None
    #: ``[peer_roles]``: a uid (its decimal digits) to the role its tokenless callers get.
    peer_roles: dict[Annotated[str, Field(pattern=r"^[0-9]{1,10}$")], _Name] | None = None
    roles: dict[str, RoleTable] | None = None
    rate_limits: dict[str, RateLimitTable] | None = None
    state_synchronous: Literal["full", "normal"] | None = None
    state_url: str | None = None
    mcp_servers: dict[str, dict[str, Any]] | None = None
    sandbox: SandboxChoice | None = None
    sandbox_network: bool | None = None
    #: A read root: an absolute path, or one under the home folder (``~/...``).
    read_paths: list[Annotated[str, Field(pattern=r"^(/|~$|~/)")]] | None = None
    read_outside: Literal["refuse", "ask"] | None = None
    log_requests: bool | None = None
    claude_code_agents: bool | None = None
    opencode_agents: bool | None = None
    pi_agents: bool | None = None
    codex_agents: bool | None = None
    copilot_agents: bool | None = None
    claude_code_settings: bool | None = None
    opencode_settings: bool | None = None
    claude_code_omitted_tools: OmittedTools | None = None
    opencode_omitted_tools: OmittedTools | None = None
    pi_omitted_tools: OmittedTools | None = None
    codex_omitted_tools: OmittedTools | None = None
    copilot_omitted_tools: OmittedTools | None = None
    #: An alias's value: one spec, or a list (the first, then its fallbacks in order).
    model_aliases: dict[str, _Name | Annotated[list[_Name], Field(min_length=1)]] | None = None
    allowed_models: list[_Name] | None = None
    models: dict[str, ModelTable] | None = None
    default_model: _Name | None = None
    unknown_model: Literal["fallback", "error"] | None = None
    budget: dict[str, Any] | None = None
    rules: list[dict[str, Any]] | None = None
    receipt_ttl_seconds: _Seconds | None = None
    outbox_max_attempts: _Count | None = None
    lease_seconds: _Seconds | None = None
    sweep_interval_seconds: _Seconds | None = None
    provider: Literal["in-process", "dbos"] | None = None
    queue_name: _Name | None = None
    queue_concurrency: _Count | None = None
    queue_rate_limit: _Count | None = None
    queue_rate_period: _Seconds | None = None
    server_max_connections: _Count | None = None
    server_max_connections_per_peer: _Count | None = None
    server_max_waits_per_connection: _Count | None = None
    server_reply_cache_bytes: _Count | None = None
    server_max_buffered_bytes: _Count | None = None
    rate_limit_sessions: _Count | None = None
    retention: RetentionTable | None = None

    _seconds = field_validator(
        "receipt_ttl_seconds",
        "lease_seconds",
        "sweep_interval_seconds",
        "queue_rate_period",
        mode="before",
    )(_float)

    @field_validator("default_tools", mode="before")
    @classmethod
    def _tool_string(cls, value: object) -> object:
        # A comma string, as in a definition's `tools:` ("Read, Grep", "*").
        return value.split(",") if isinstance(value, str) else value

    @field_validator("max_depth", mode="before")
    @classmethod
    def _depth(cls, value: object) -> object:
        if value == PROVIDER_MANAGED or depth_problem(value, exact=True) is None:
            return value
        raise ValueError(f'must be a whole number from 0 to {MAX_SAFE_INT}, or "provider-managed"')


#: The keys a settings file may hold (each is a field of ``Settings``).
CONFIG_KEYS: tuple[str, ...] = tuple(SettingsFile.model_fields)
