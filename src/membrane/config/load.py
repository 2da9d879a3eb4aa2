"""Deployment settings: ``<home>/config.toml`` < ``<project>/.membrane/config.toml``.

Each file is validated on its own (so an error names the file that holds it), then the project
file overrides the global one key by key; ``roles``, ``rate_limits`` and ``mcp_servers`` merge
entry by entry, a project entry replacing the global entry of the same name whole. Unknown keys
are errors: a misspelt ``default-tools`` would otherwise leave the default silently in place.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from membrane.config.budget import Budget
from membrane.config.values import (
    BUILTIN_ROLES,
    DEFAULT_ROLE,
    McpServerSpec,
    ModelEntry,
    OmittedTools,
    RateLimit,
    RoleSpec,
    Settings,
)
from membrane.errors import InvalidRequest, SettingsError
from membrane.limits import MAX_SAFE_INT, PROVIDER_MANAGED, depth_problem
from membrane.vocabulary import ASSIGNABLE_TOOLS, canonical_builtin_name

__all__ = [
    "CONFIG_KEYS",
    "CONFIG_NAME",
    "global_config_path",
    "load_settings",
    "mcp_server_spec",
    "membrane_home",
    "project_config_path",
]

CONFIG_NAME = "config.toml"


def membrane_home() -> Path:
    """``$MEMBRANE_HOME`` when set (``~`` expanded), else ``~/.membrane``."""
    value = os.environ.get("MEMBRANE_HOME", "").strip()
    return Path(value).expanduser() if value else Path.home() / ".membrane"


def global_config_path(home: Path | None = None) -> Path:
    return (home if home is not None else membrane_home()) / CONFIG_NAME


def project_config_path(project: Path) -> Path:
    return project / ".membrane" / CONFIG_NAME


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Role(_Strict):
    allow: list[str] | None = None
    deny: list[str] | None = None
    permissions: list[Annotated[str, Field(min_length=1)]] | None = None


class _RateLimit(_Strict):
    max_calls: int = Field(ge=1, le=MAX_SAFE_INT)
    window_seconds: float = Field(gt=0, allow_inf_nan=False)

    @field_validator("window_seconds", mode="before")
    @classmethod
    def _int_seconds(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class _McpServer(_Strict):
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = Field(default=None, min_length=1)
    url: str | None = Field(default=None, min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    startup_timeout: float = Field(default=30.0, gt=0, allow_inf_nan=False)

    @field_validator("timeout", "startup_timeout", mode="before")
    @classmethod
    def _int_seconds(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


#: A server name becomes the middle of ``mcp__NAME__TOOL``: no ``__`` inside, no edge ``_``.
_MCP_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*(?<!_)")


def mcp_server_spec(name: str, raw: object, *, path: str, key: str) -> McpServerSpec:
    """``raw`` (one ``[mcp_servers.NAME]`` table, or a definition's inline entry) checked;
    ``SettingsError`` naming ``path`` and ``key`` otherwise."""

    def bad(problem: str, hint: str) -> SettingsError:
        return SettingsError(f"{path}: `{key}` {problem}", path=path, key=key, hint=hint)

    if not isinstance(name, str) or _MCP_NAME.fullmatch(name) is None:
        raise bad(
            f"names the MCP server {name!r}, which is not a usable name",
            "use letters, digits, '-' and single '_' (its tools are named mcp__NAME__TOOL)",
        )
    try:
        server = _McpServer.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        what = str(error["msg"]).removeprefix("Value error, ")
        raise bad(
            f"{('at ' + where + ': ') if where else ''}{what}",
            "an MCP server has `command` (with `args`, `env`, `cwd`) or `url`, and optional "
            "`headers`, `timeout`, `startup_timeout`",
        ) from exc
    if (server.command is None) == (server.url is None):
        raise bad(
            "needs exactly one of `command` (a stdio server) or `url` (streamable HTTP)",
            'write command = "..." with args = [...], or url = "http://127.0.0.1:PORT/mcp"',
        )
    if server.url is not None and not server.url.startswith(("http://", "https://")):
        raise bad(f"has url {server.url!r}, which is not http(s)", "use an http:// or https:// url")
    if server.url is None and server.headers:
        raise bad("sets `headers` on a stdio server", "headers apply to a `url` server only")
    return McpServerSpec(
        name=name,
        command=server.command,
        args=tuple(server.args),
        env=MappingProxyType(dict(server.env)),
        cwd=server.cwd,
        url=server.url,
        headers=MappingProxyType(dict(server.headers)),
        timeout=server.timeout,
        startup_timeout=server.startup_timeout,
    )


class _Model(_Strict):
    provider: Literal["openai", "anthropic", "scripted"]
    model: str = Field(min_length=1)
    base_url: str | None = Field(default=None, min_length=1)
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    stream: bool = True
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_SAFE_INT)
    reasoning: bool | None = None

    @field_validator("timeout", mode="before")
    @classmethod
    def _int_timeout(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class _File(_Strict):
    """One config file. ``None`` means the file leaves the key to the lower file or the default."""

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
    # Checked by ``mcp_server_spec`` so that an error names the server's own table.
    mcp_servers: dict[str, dict[str, Any]] | None = None
    sandbox: Literal["auto", "bubblewrap", "landlock", "guard"] | None = None
    sandbox_network: bool | None = None
    claude_code_agents: bool | None = None
    opencode_agents: bool | None = None
    pi_agents: bool | None = None
    claude_code_omitted_tools: OmittedTools | None = None
    opencode_omitted_tools: OmittedTools | None = None
    pi_omitted_tools: OmittedTools | None = None
    model_aliases: dict[str, str] | None = None
    models: dict[str, _Model] | None = None
    default_model: str | None = Field(default=None, min_length=1)
    # Checked by ``Budget.parse`` so that an error names the kind.
    budget: dict[str, Any] | None = None
    receipt_ttl_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    outbox_max_attempts: int | None = Field(default=None, ge=1, le=MAX_SAFE_INT)
    lease_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    sweep_interval_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    @field_validator(
        "receipt_ttl_seconds", "lease_seconds", "sweep_interval_seconds", mode="before"
    )
    @classmethod
    def _whole_seconds(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value

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


def _default_tools(tokens: list[str], path: Path) -> tuple[str, ...]:
    """``default_tools`` canonicalised: assignable built-in names, ``*``/``all``, or nothing.

    ``inherit``, selectors (``ext:``, ``mcp__``), argument patterns and unknown names are
    refused: the default applies to every definition that leaves ``tools`` out, and seed 000
    keeps those documents read-only unless a definition itself opts into ``inherit``.
    """
    out: list[str] = []
    words = [token.strip() for token in tokens]
    for token in words:
        low = token.lower()
        if low in ("", "none"):
            if any(w.lower() not in ("", "none") for w in words):
                raise _bad_default(path, "mixes `none` with tool names", "write `[]` or the names")
            continue
        if low in ("*", "all"):
            out.extend(ASSIGNABLE_TOOLS)
            continue
        name = canonical_builtin_name(token)
        if name is not None and name in ASSIGNABLE_TOOLS:
            out.append(name)
            continue
        raise _bad_default(path, *_default_tool_problem(token))
    return tuple(dict.fromkeys(out))


def _bad_default(path: Path, problem: str, hint: str) -> SettingsError:
    return SettingsError(
        f"{path}: `default_tools` {problem}", path=str(path), key="default_tools", hint=hint
    )


def _default_tool_problem(token: str) -> tuple[str, str]:
    low = token.lower()
    if low == "inherit":
        return (
            "cannot hold `inherit`: definitions that leave `tools` out stay bounded",
            "write `tools: inherit` in the definitions that should inherit",
        )
    if low.startswith("ext:") or token.startswith("mcp__"):
        return (
            f"cannot hold the selector `{token}`",
            "list it in the `tools` of the definitions that need it",
        )
    if "(" in token:
        base = canonical_builtin_name(token.partition("(")[0]) or "the tool name"
        return (
            f"holds the argument pattern `{token}`, which Membrane cannot enforce",
            f"write `{base}` alone to grant all of it, or leave it out",
        )
    choices = [*ASSIGNABLE_TOOLS, "*", "none"]
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(low, list(by_lower), n=1, cutoff=0.6)
    known = f"use {', '.join(choices)}"
    return (
        f"holds `{token}`, which is not a built-in tool a subagent can be given",
        f"did you mean `{by_lower[close[0]]}`? ({known})" if close else known,
    )


CONFIG_KEYS = tuple(_File.model_fields)


def _read(path: Path) -> _File | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(
            f"{path}: cannot read the settings file: {exc}",
            path=str(path),
            key=None,
            hint="check that it is a readable UTF-8 file",
        ) from exc
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(
            f"{path}: invalid TOML: {exc}",
            path=str(path),
            key=None,
            hint="fix the TOML syntax at the line named",
        ) from exc
    try:
        parsed = _File.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = _key_path(raw, error["loc"])
        if error["type"] == "extra_forbidden" and error["loc"][-1] == "api_key":
            hint = "never write the key in a file: name its variable in `api_key_env`"
            message = f"{path}: unknown setting `{key}`"
        elif error["type"] == "extra_forbidden" and error["loc"][0] == "models":
            hint = f"a model entry takes {', '.join(_Model.model_fields)}"
            message = f"{path}: unknown setting `{key}`"
        elif error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(error["loc"][-1]), CONFIG_KEYS, n=1)
            hint = (
                f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(CONFIG_KEYS)}"
            )
            message = f"{path}: unknown setting `{key}`"
        else:
            hint = "see the settings reference for the expected type"
            what = str(error["msg"]).removeprefix("Value error, ")
            message = f"{path}: `{key}`: {what} (got {error.get('input')!r})"
        raise SettingsError(message, path=str(path), key=key, hint=hint) from exc
    if parsed.default_tools is None:
        return parsed
    tools = _default_tools(parsed.default_tools, path)
    return parsed.model_copy(update={"default_tools": list(tools)})


def _key_path(raw: object, loc: tuple[int | str, ...]) -> str:
    """The dotted key of an error, without pydantic's union-member tags (``int``, ``str`` ...)."""
    parts: list[str] = []
    for part in loc:
        if not isinstance(raw, dict):
            break  # past the value: what follows names a type, not a key
        parts.append(str(part))
        if part not in raw:
            break  # a missing key
        raw = raw[part]
    return ".".join(parts)


def _role(name: str, role: _Role, path: Path) -> RoleSpec:
    if role.allow is None and role.deny is None and role.permissions is None:
        raise SettingsError(
            f"{path}: role `{name}` gives none of `allow`, `deny` and `permissions`",
            path=str(path),
            key=f"roles.{name}",
            hint="list the tools the role may use in `allow`, or deny some in `deny`",
        )
    return RoleSpec(
        allow=None if role.allow is None else tuple(role.allow),
        deny=None if role.deny is None else tuple(role.deny),
        permissions=tuple(role.permissions or ()),
    )


def load_settings(*, project: Path | None, home: Path | None = None) -> Settings:
    """Read and merge both files (a missing one adds nothing); ``SettingsError`` otherwise."""
    paths = [global_config_path(home)]
    if project is not None:
        paths.append(project_config_path(project))
    merged: dict[str, Any] = {}
    roles: dict[str, RoleSpec] = dict(BUILTIN_ROLES)
    limits: dict[str, RateLimit] = {}
    servers: dict[str, McpServerSpec] = {}
    models: dict[str, ModelEntry] = {}
    aliases: dict[str, str] = {}
    budget: dict[str, Any] = {}
    for path in paths:
        parsed = _read(path)
        if parsed is None:
            continue
        for name, entry in (parsed.models or {}).items():
            models[name] = ModelEntry(**entry.model_dump())
        aliases.update(parsed.model_aliases or {})
        budget.update(_budget(parsed.budget, path))
        own = {"roles", "rate_limits", "mcp_servers", "models", "model_aliases", "budget"}
        for key, value in parsed.model_dump(exclude_none=True, exclude=own).items():
            merged[key] = tuple(value) if key == "default_tools" else value
        for name, role in (parsed.roles or {}).items():
            roles[name] = _role(name, role, path)
        for tool, limit in (parsed.rate_limits or {}).items():
            limits[tool] = RateLimit(max_calls=limit.max_calls, window_seconds=limit.window_seconds)
        for name, raw in (parsed.mcp_servers or {}).items():
            servers[name] = mcp_server_spec(name, raw, path=str(path), key=f"mcp_servers.{name}")
    default_role = merged.get("default_role", DEFAULT_ROLE)
    if default_role not in roles:
        raise SettingsError(
            f"`default_role` names {default_role!r}, which is not a role",
            path=None,
            key="default_role",
            hint=f"name one of: {', '.join(sorted(roles))}, or add it under [roles]",
        )
    return Settings(
        **merged,
        roles=MappingProxyType(roles),
        rate_limits=MappingProxyType(limits),
        mcp_servers=MappingProxyType(servers),
        models=MappingProxyType(models),
        model_aliases=MappingProxyType(aliases),
        budget=Budget(**budget) if budget else None,
    )


def _budget(raw: dict[str, Any] | None, path: Path) -> dict[str, Any]:
    """A file's ``[budget]`` table, checked; a project file's kinds replace the global's."""
    if raw is None:
        return {}
    try:
        return Budget.parse(raw, where="[budget]").to_dict()
    except InvalidRequest as exc:
        raise SettingsError(
            f"{path}: {exc.message}",
            path=str(path),
            key=str(exc.data.get("field") or "budget"),
            hint="write for example: [budget] tokens = 200000, children = 20, seconds = 900",
        ) from None
