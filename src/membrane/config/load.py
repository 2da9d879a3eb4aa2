"""Deployment settings: ``<home>/config.toml`` < ``<project>/.membrane/config.toml``.

Each file is validated on its own (so an error names the file that holds it), then the project
file overrides the global one key by key; ``roles``, ``rate_limits`` and ``mcp_servers`` merge
entry by entry, a project entry replacing the global entry of the same name whole. Unknown keys
are errors: a misspelt ``default-tools`` would otherwise leave the default silently in place.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlsplit

from membrane.config.budget import Budget
from membrane.config.shape import (
    REQUIRED,
    Field,
    Invalid,
    boolean,
    choice,
    integer,
    list_of,
    mapping_of,
    number,
    optional,
    table,
    text,
)
from membrane.config.toml_cache import SETTINGS_CACHE_FILE, TomlCache
from membrane.config.values import (
    BUILTIN_ROLES,
    SANDBOX_CHOICES,
    McpServerSpec,
    ModelEntry,
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
    "membrane_home",
    "project_config_path",
]

CONFIG_NAME = "config.toml"


def __getattr__(name: str) -> object:
    # ``mcp_server_spec`` lives in ``membrane.config.mcp_servers`` (imported by what reads an
    # MCP server's table); its old address keeps working.
    if name == "mcp_server_spec":
        from membrane.config.mcp_servers import mcp_server_spec

        return mcp_server_spec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def membrane_home() -> Path:
    """``$MEMBRANE_HOME`` when set (``~`` expanded), else ``~/.membrane``."""
    value = os.environ.get("MEMBRANE_HOME", "").strip()
    return Path(value).expanduser() if value else Path.home() / ".membrane"


def global_config_path(home: Path | None = None) -> Path:
    return (home if home is not None else membrane_home()) / CONFIG_NAME


def project_config_path(project: Path) -> Path:
    return project / ".membrane" / CONFIG_NAME


def _seconds(default: object = None) -> Field:
    """A finite number of seconds above 0 (a whole number is read as a float)."""
    return Field(number(gt=0), default=default)


def _count(minimum: int, default: object = None) -> Field:
    return Field(integer(ge=minimum, le=MAX_SAFE_INT), default=default)


_NAME = text(min_length=1)
#: What a model entry's ``base_url`` must be (the SDKs would take "localhost:8080/v1" as a
#: relative path and fail only at the first request, far from the setting).
URL_PROBLEM = "must be an http:// or https:// URL with a host, such as http://127.0.0.1:8080/v1"


def _url(value: object) -> object:
    value = _NAME(value)
    assert isinstance(value, str)
    try:
        parts = urlsplit(value)
        host = parts.hostname
        parts.port  # noqa: B018  (raises for a port that is not a number)
    except ValueError:
        host = None
    if parts.scheme not in ("http", "https") or not host:
        raise Invalid("value_error", URL_PROBLEM, value)
    return value


_NAMES = list_of(text())
_STRINGS = mapping_of(text())


@dataclass(frozen=True, slots=True)
class _Role:
    allow: list[str] | None
    deny: list[str] | None
    permissions: list[str] | None


_ROLE = table(
    "_Role",
    {
        "allow": Field(optional(_NAMES)),
        "deny": Field(optional(_NAMES)),
        "permissions": Field(optional(list_of(_NAME))),
    },
    _Role,
)
_RATE_LIMIT = table(
    "_RateLimit",
    {"max_calls": _count(1, REQUIRED), "window_seconds": _seconds(REQUIRED)},
    RateLimit,
)


_MODEL_FIELDS: Final = {
    "provider": Field(choice("openai", "anthropic", "scripted"), default=REQUIRED),
    "model": Field(_NAME, default=REQUIRED),
    "base_url": Field(optional(_url)),
    "api_key_env": Field(optional(text(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"))),
    "stream": Field(boolean, default=True),
    "timeout": Field(optional(number(gt=0))),
    "max_tokens": _count(1),
    "reasoning": Field(optional(boolean)),
    "strict_tools": Field(boolean, default=False),
}


def _tool_string(value: object) -> object:
    # A comma string, as in a definition's `tools:` ("Read, Grep", "*").
    return _NAMES(value.split(",") if isinstance(value, str) else value)


def _depth(value: object) -> object:
    if value == PROVIDER_MANAGED or depth_problem(value, exact=True) is None:
        return value
    raise Invalid(
        "value_error",
        f'must be a whole number from 0 to {MAX_SAFE_INT}, or "provider-managed"',
        value,
    )


def _any_table(value: object) -> object:
    if not isinstance(value, dict):
        raise Invalid("dict_type", "Input should be a valid dictionary", value)
    return value


#: A read root: an absolute path, or one under the home folder (``~/...``).
_READ_PATH = text(pattern=r"^(/|~$|~/)")


_FLAG = Field(optional(boolean))
_OMITTED = Field(optional(choice("default", "inherit", "all")))
#: One config file. ``None`` means the file leaves the key to the lower file or the default.
_FILE_FIELDS: Final = {
    "default_tools": Field(optional(_tool_string)),
    "fallback_subagent": Field(optional(_NAME)),
    "max_depth": Field(optional(_depth)),
    "hide_delegation_at_cap": _FLAG,
    "persona": Field(optional(text())),
    "permission_mode": Field(optional(_NAME)),
    "worktrees_enabled": _FLAG,
    "trace_tool_arguments": _FLAG,
    "max_concurrency": _count(1),
    "grace_turns": _count(0),
    "default_max_turns": _count(1),
    "default_role": Field(optional(_NAME)),
    "roles": Field(optional(mapping_of(_ROLE))),
    "rate_limits": Field(optional(mapping_of(_RATE_LIMIT))),
    "state_synchronous": Field(optional(choice("full", "normal"))),
    # Checked by ``mcp_server_spec`` so that an error names the server's own table.
    "mcp_servers": Field(optional(mapping_of(_any_table))),
    "sandbox": Field(optional(choice(*SANDBOX_CHOICES))),
    "sandbox_network": _FLAG,
    "read_paths": Field(optional(list_of(_READ_PATH))),
    "log_requests": _FLAG,
    "claude_code_agents": _FLAG,
    "opencode_agents": _FLAG,
    "pi_agents": _FLAG,
    "claude_code_omitted_tools": _OMITTED,
    "opencode_omitted_tools": _OMITTED,
    "pi_omitted_tools": _OMITTED,
    "model_aliases": Field(optional(_STRINGS)),
    "models": Field(optional(mapping_of(table("_Model", _MODEL_FIELDS, ModelEntry)))),
    "default_model": Field(optional(_NAME)),
    "unknown_model": Field(optional(choice("fallback", "error"))),
    # Checked by ``Budget.parse`` so that an error names the kind.
    "budget": Field(optional(_any_table)),
    # Checked by ``membrane.tools.argument_rules`` when an agent is resolved.
    "rules": Field(optional(list_of(_any_table))),
    "receipt_ttl_seconds": _seconds(),
    "outbox_max_attempts": _count(1),
    "lease_seconds": _seconds(),
    "sweep_interval_seconds": _seconds(),
}


def _file(**values: Any) -> dict[str, Any]:
    return values


_FILE = table("_File", _FILE_FIELDS, _file)


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
    import difflib  # error paths only: a start that reads good settings never needs it

    close = difflib.get_close_matches(low, list(by_lower), n=1, cutoff=0.6)
    known = f"use {', '.join(choices)}"
    return (
        f"holds `{token}`, which is not a built-in tool a subagent can be given",
        f"did you mean `{by_lower[close[0]]}`? ({known})" if close else known,
    )


CONFIG_KEYS = tuple(_FILE_FIELDS)


def _read(path: Path, cache: TomlCache) -> dict[str, Any] | None:
    try:
        content = path.read_text(encoding="utf-8")
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
        raw = cache.loads(path, content)
    except ValueError as exc:  # tomllib.TOMLDecodeError
        raise SettingsError(
            f"{path}: invalid TOML: {exc}",
            path=str(path),
            key=None,
            hint="fix the TOML syntax at the line named",
        ) from exc
    try:
        parsed = _FILE(raw)
    except Invalid as exc:
        key = _key_path(raw, exc.loc)
        if exc.kind == "extra_forbidden" and exc.loc[-1] == "api_key":
            hint = "never write the key in a file: name its variable in `api_key_env`"
            message = f"{path}: unknown setting `{key}`"
        elif exc.kind == "extra_forbidden" and exc.loc[0] == "models":
            hint = f"a model entry takes {', '.join(_MODEL_FIELDS)}"
            message = f"{path}: unknown setting `{key}`"
        elif exc.kind == "extra_forbidden":
            import difflib

            close = difflib.get_close_matches(str(exc.loc[-1]), CONFIG_KEYS, n=1)
            hint = (
                f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(CONFIG_KEYS)}"
            )
            message = f"{path}: unknown setting `{key}`"
        else:
            hint = "see the settings reference for the expected type"
            message = f"{path}: `{key}`: {exc.message} (got {exc.value!r})"
        raise SettingsError(message, path=str(path), key=key, hint=hint) from None
    if parsed["default_tools"] is not None:
        parsed["default_tools"] = _default_tools(parsed["default_tools"], path)
    return parsed


def _key_path(raw: object, loc: tuple[int | str, ...]) -> str:
    """The dotted key of an error: its table keys, up to a missing key or a list's index."""
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
    home = home if home is not None else membrane_home()
    cache = TomlCache(home / "cache" / SETTINGS_CACHE_FILE)
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
    rules: list[str] = []
    for path in paths:
        parsed = _read(path, cache)
        if parsed is None:
            continue
        for name, entry in (parsed["models"] or {}).items():
            if entry.strict_tools and entry.provider != "openai":
                raise SettingsError(
                    f"{path}: models.{name}: strict_tools is OpenAI's strict mode, and this "
                    f"entry's provider is {entry.provider}",
                    path=str(path),
                    key=f"models.{name}.strict_tools",
                    hint="remove strict_tools, or use it on an openai entry",
                )
            models[name] = entry
        aliases.update(parsed["model_aliases"] or {})
        budget.update(_budget(parsed["budget"], path))
        rules += (json.dumps(rule, sort_keys=True, default=str) for rule in parsed["rules"] or ())
        own = {"roles", "rate_limits", "mcp_servers", "models", "model_aliases", "budget", "rules"}
        merged.update(
            (key, value) for key, value in parsed.items() if value is not None and key not in own
        )
        for name, role in (parsed["roles"] or {}).items():
            roles[name] = _role(name, role, path)
        limits.update(parsed["rate_limits"] or {})
        for name, raw in (parsed["mcp_servers"] or {}).items():
            from membrane.config.mcp_servers import mcp_server_spec  # only for [mcp_servers]

            servers[name] = mcp_server_spec(name, raw, path=str(path), key=f"mcp_servers.{name}")
    cache.save()
    default_role = merged.get("default_role")
    if default_role is not None and default_role not in roles:
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
        rules=tuple(rules),
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
