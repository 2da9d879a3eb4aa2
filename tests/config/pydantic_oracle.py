"""The settings schema as it was written with pydantic, kept only as the oracle that the plain
validator is compared against: same accepted tables, same values, same first error."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from membrane.config.load import URL_PROBLEM
from membrane.limits import MAX_SAFE_INT, PROVIDER_MANAGED, depth_problem

__all__ = ["McpServer", "SettingsFile", "first_error", "mcp_error"]

OmittedTools = Literal["default", "inherit", "all"]


def _float(value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Role(_Strict):
    allow: list[str] | None = None
    deny: list[str] | None = None
    permissions: list[Annotated[str, Field(min_length=1)]] | None = None


class _RateLimit(_Strict):
    max_calls: int = Field(ge=1, le=MAX_SAFE_INT)
    window_seconds: float = Field(gt=0, allow_inf_nan=False)

    _seconds = field_validator("window_seconds", mode="before")(_float)


class _McpServer(_Strict):
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = Field(default=None, min_length=1)
    url: str | None = Field(default=None, min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    startup_timeout: float = Field(default=30.0, gt=0, allow_inf_nan=False)

    _seconds = field_validator("timeout", "startup_timeout", mode="before")(_float)


#: The name pydantic puts in the message for an entry that is not a table.
McpServer = _McpServer


class _Model(_Strict):
    provider: Literal["openai", "anthropic", "scripted"]
    model: str = Field(min_length=1)
    base_url: str | None = Field(default=None, min_length=1)
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    stream: bool = True
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_SAFE_INT)
    reasoning: bool | None = None
    strict_tools: bool = False

    _seconds = field_validator("timeout", mode="before")(_float)

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

    @model_validator(mode="after")
    def _strict_tools(self) -> _Model:
        if self.strict_tools and self.provider != "openai":
            raise ValueError("strict_tools is for openai entries")
        return self


class _File(_Strict):
    default_tools: list[str] | None = None
    fallback_subagent: str | None = Field(default=None, min_length=1)
    max_depth: int | Literal["provider-managed"] | None = None
    hide_delegation_at_cap: bool | None = None
    persona: str | None = None
    permission_mode: str | None = Field(default=None, min_length=1)
    worktrees_enabled: bool | None = None
    trace_tool_arguments: bool | None = None
    max_concurrency: int | None = Field(default=None, ge=1, le=MAX_SAFE_INT)
    grace_turns: int | None = Field(default=None, ge=0, le=MAX_SAFE_INT)
    default_max_turns: int | None = Field(default=None, ge=1, le=MAX_SAFE_INT)
    default_role: str | None = Field(default=None, min_length=1)
    roles: dict[str, _Role] | None = None
    rate_limits: dict[str, _RateLimit] | None = None
    state_synchronous: Literal["full", "normal"] | None = None
    mcp_servers: dict[str, dict[str, Any]] | None = None
    sandbox: Literal["auto", "bubblewrap", "landlock", "guard"] | None = None
    sandbox_network: bool | None = None
    read_paths: list[Annotated[str, Field(pattern=r"^(/|~$|~/)")]] | None = None
    log_requests: bool | None = None
    claude_code_agents: bool | None = None
    opencode_agents: bool | None = None
    pi_agents: bool | None = None
    claude_code_omitted_tools: OmittedTools | None = None
    opencode_omitted_tools: OmittedTools | None = None
    pi_omitted_tools: OmittedTools | None = None
    model_aliases: dict[str, str] | None = None
    models: dict[str, _Model] | None = None
    default_model: str | None = Field(default=None, min_length=1)
    unknown_model: Literal["fallback", "error"] | None = None
    budget: dict[str, Any] | None = None
    rules: list[dict[str, Any]] | None = None
    receipt_ttl_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    outbox_max_attempts: int | None = Field(default=None, ge=1, le=MAX_SAFE_INT)
    lease_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    sweep_interval_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    _seconds = field_validator(
        "receipt_ttl_seconds", "lease_seconds", "sweep_interval_seconds", mode="before"
    )(_float)

    @field_validator("default_tools", mode="before")
    @classmethod
    def _tool_string(cls, value: object) -> object:
        return value.split(",") if isinstance(value, str) else value

    @field_validator("max_depth", mode="before")
    @classmethod
    def _depth(cls, value: object) -> object:
        if value == PROVIDER_MANAGED or depth_problem(value, exact=True) is None:
            return value
        raise ValueError(f'must be a whole number from 0 to {MAX_SAFE_INT}, or "provider-managed"')


SettingsFile = _File


def _key_path(raw: object, loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for part in loc:
        if not isinstance(raw, dict):
            break
        parts.append(str(part))
        if part not in raw:
            break
        raw = raw[part]
    return ".".join(parts)


def first_error(raw: dict[str, Any], path: Path) -> tuple[str, str, str] | None:
    """The (message, key, hint) the pydantic loader gave for ``raw``, or ``None``."""
    keys = tuple(_File.model_fields)
    try:
        _File.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = _key_path(raw, error["loc"])
        if error["type"] == "extra_forbidden" and error["loc"][-1] == "api_key":
            hint = "never write the key in a file: name its variable in `api_key_env`"
            return f"{path}: unknown setting `{key}`", key, hint
        if error["type"] == "extra_forbidden" and error["loc"][0] == "models":
            hint = f"a model entry takes {', '.join(_Model.model_fields)}"
            return f"{path}: unknown setting `{key}`", key, hint
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(error["loc"][-1]), keys, n=1)
            hint = f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(keys)}"
            return f"{path}: unknown setting `{key}`", key, hint
        what = str(error["msg"]).removeprefix("Value error, ")
        message = f"{path}: `{key}`: {what} (got {error.get('input')!r})"
        return message, key, "see the settings reference for the expected type"
    return None


def mcp_error(raw: object) -> str | None:
    """The problem the pydantic loader found in one MCP server entry, or ``None``."""
    try:
        _McpServer.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return f"{('at ' + where + ': ') if where else ''}{error['msg']}"
    return None
