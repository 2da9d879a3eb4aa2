"""Deployment settings: ``<home>/config.toml`` < ``<project>/.membrane/config.toml``.

Each file is checked on its own against ``membrane.config.schema`` (pydantic), so an error
names the file that holds it; then the project file overrides the global one key by key;
``roles``, ``rate_limits`` and ``mcp_servers`` merge entry by entry, a project entry replacing
the global entry of the same name whole. Unknown keys are errors: a misspelt ``default-tools``
would otherwise leave the default silently in place. A file's checked values are kept by the
digest of its text (``membrane.config.toml_cache``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from membrane.config.budget import Budget
from membrane.config.product_settings import ProductSettings
from membrane.config.toml_cache import SETTINGS_CACHE_FILE, TomlCache, digest_of
from membrane.config.values import (
    BUILTIN_ROLES,
    McpServerSpec,
    ModelEntry,
    ModelPrice,
    RateLimit,
    Retention,
    RoleSpec,
    Settings,
)
from membrane.errors import InvalidRequest, SettingsError
from membrane.vocabulary import ASSIGNABLE_TOOLS, FINISHED_STATES, canonical_builtin_name

__all__ = [
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


#: The schema's source: kept values are keyed by it, so a changed schema checks files again.
_SCHEMA = Path(__file__).with_name("schema.py")


def _read(path: Path, cache: TomlCache) -> dict[str, Any] | None:
    """One file's checked values (``None``: no such file), from ``cache`` when neither the
    file's text nor the schema changed since they were kept."""
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
        digest: str | None = digest_of(_SCHEMA.read_text(encoding="utf-8"), content)
    except OSError:  # the schema's source is not on disk (a zipped install): nothing is kept
        digest = None
    kept = cache.get(path, digest) if digest is not None else None
    if kept is not None:
        return _values(kept, path)
    checked = _check(path, content)
    if digest is not None:
        cache.put(path, digest, checked)
    return _values(checked, path)


def _check(path: Path, content: str) -> dict[str, Any]:
    """``content`` parsed and checked against ``SettingsFile``: its values as plain data."""
    import tomllib

    from pydantic import ValidationError  # a file to check: the model layer is needed now

    from membrane.config.schema import CONFIG_KEYS, ModelTable, SettingsFile, first_problem

    try:
        raw = tomllib.loads(content)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(
            f"{path}: invalid TOML: {exc}",
            path=str(path),
            key=None,
            hint="fix the TOML syntax at the line named",
        ) from exc
    try:
        return SettingsFile.model_validate(raw).model_dump()
    except ValidationError as exc:
        problem = first_problem(exc)
    key = _key_path(raw, problem.loc)
    if problem.kind == "extra_forbidden" and problem.loc[-1] == "api_key":
        hint = "never write the key in a file: name its variable in `api_key_env`"
        message = f"{path}: unknown setting `{key}`"
    elif problem.kind == "extra_forbidden" and problem.loc[0] == "models":
        hint = f"a model entry takes {', '.join(ModelTable.model_fields)}"
        message = f"{path}: unknown setting `{key}`"
    elif problem.kind == "extra_forbidden":
        import difflib

        close = difflib.get_close_matches(str(problem.loc[-1]), CONFIG_KEYS, n=1)
        hint = f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(CONFIG_KEYS)}"
        message = f"{path}: unknown setting `{key}`"
    else:
        hint = "see the settings reference for the expected type"
        message = f"{path}: `{key}`: {problem.message} (got {problem.value!r})"
    raise SettingsError(message, path=str(path), key=key, hint=hint)


def _model_entry(table: dict[str, Any]) -> ModelEntry:
    price = table.get("price")
    return ModelEntry(**{**table, "price": None if price is None else ModelPrice(**price)})


def _values(checked: dict[str, Any], path: Path) -> dict[str, Any]:
    """A file's checked values with its entries as their dataclasses and ``default_tools``
    canonicalised."""
    parsed = dict(checked)
    models: dict[str, Any] | None = parsed["models"]
    if models is not None:
        parsed["models"] = {name: _model_entry(entry) for name, entry in models.items()}
    limits: dict[str, Any] | None = parsed["rate_limits"]
    if limits is not None:
        parsed["rate_limits"] = {name: RateLimit(**limit) for name, limit in limits.items()}
    if parsed["default_tools"] is not None:
        parsed["default_tools"] = _default_tools(parsed["default_tools"], path)
    peers: dict[str, str] | None = parsed["peer_roles"]
    if peers is not None:
        parsed["peer_roles"] = MappingProxyType({int(uid): role for uid, role in peers.items()})
    retention: dict[str, Any] | None = parsed["retention"]
    if retention is not None:
        days = retention["runs_days"]
        if not isinstance(days, dict):
            days = {} if days is None else dict.fromkeys(sorted(FINISHED_STATES), days)
        parsed["retention"] = Retention(**{**retention, "runs_days": MappingProxyType(days)})
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


def _role(name: str, role: Mapping[str, Any], path: Path) -> RoleSpec:
    allow, deny, permissions = role["allow"], role["deny"], role["permissions"]
    if allow is None and deny is None and permissions is None:
        raise SettingsError(
            f"{path}: role `{name}` gives none of `allow`, `deny` and `permissions`",
            path=str(path),
            key=f"roles.{name}",
            hint="list the tools the role may use in `allow`, or deny some in `deny`",
        )
    return RoleSpec(
        allow=None if allow is None else tuple(allow),
        deny=None if deny is None else tuple(deny),
        permissions=tuple(permissions or ()),
    )


def load_settings(*, project: Path | None, home: Path | None = None) -> Settings:
    """Read and merge both files (a missing one adds nothing); ``SettingsError`` otherwise.

    Beneath them lie the other products' settings files (``membrane.config.product_settings``):
    a field Membrane's files leave unset takes the value of the highest product file that sets
    it; their read roots and permission rules add up. ``Settings.sources`` names the file each
    field came from."""
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
    alias_fallbacks: dict[str, tuple[str, ...]] = {}
    budget: dict[str, Any] = {}
    rules: list[str] = []
    sources: dict[str, str] = {}
    for path in paths:
        parsed = _read(path, cache)
        if parsed is None:
            continue
        label = _label(path, project)
        sources.update((key, label) for key, value in parsed.items() if value is not None)
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
        for alias, value in (parsed["model_aliases"] or {}).items():
            chain = [value] if isinstance(value, str) else value
            aliases[alias] = chain[0]
            if len(chain) > 1:
                alias_fallbacks[alias] = tuple(chain[1:])
            else:
                alias_fallbacks.pop(alias, None)
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
    products = _products(merged, sources, project=project, models=models, aliases=aliases)
    named_roles = [(key, merged.get(key)) for key in ("default_role", "console_role")]
    for uid, role in (merged.get("peer_roles") or {}).items():
        named_roles.append((f"peer_roles.{uid}", role))
    for key, named in named_roles:
        if named is not None and named not in roles:
            raise SettingsError(
                f"`{key}` names {named!r}, which is not a role",
                path=None,
                key=key,
                hint=f"name one of: {', '.join(sorted(roles))}, or add it under [roles]",
            )
    return Settings(
        **merged,
        roles=MappingProxyType(roles),
        rate_limits=MappingProxyType(limits),
        mcp_servers=MappingProxyType(servers),
        models=MappingProxyType(models),
        model_aliases=MappingProxyType(aliases),
        alias_fallbacks=MappingProxyType(alias_fallbacks),
        budget=Budget(**budget) if budget else None,
        rules=tuple(rules),
        product_rules=products.rules,
        product_hooks=products.hooks,
        no_bypass=products.no_bypass,
        sources=MappingProxyType(sources),
        read_path_sources=MappingProxyType(dict(products.read_paths)),
        warnings=products.warnings,
    )


def _label(path: Path, project: Path | None) -> str:
    if project is not None and path.is_relative_to(project):
        return path.relative_to(project).as_posix()
    return str(path)


def _products(
    merged: dict[str, Any],
    sources: dict[str, str],
    *,
    project: Path | None,
    models: dict[str, ModelEntry],
    aliases: dict[str, str],
) -> ProductSettings:
    """The products' settings files, folded under ``merged`` (Membrane's own files win)."""
    from membrane.config.model_names import resolve_spec
    from membrane.config.product_settings import (
        claude_config_home,
        opencode_config_home,
        read_product_settings,
    )
    from membrane.errors import UnknownModel

    products = read_product_settings(
        project=project,
        claude_home=claude_config_home(),
        opencode_home=opencode_config_home(),
        claude=merged.get("claude_code_settings", True),
        opencode=merged.get("opencode_settings", True),
    )
    warnings = list(products.warnings)
    for key, (value, source) in products.values.items():
        if key in merged:
            warnings.append(f"{source} sets {key} = {value!r}; {sources[key]} sets it too and wins")
            continue
        if key == "default_model":
            try:
                resolve_spec(value, models=models, aliases=aliases)
            except UnknownModel as exc:
                warnings.append(f"{source}: `model` {value!r} is not used: {exc.message}")
                continue
        merged[key] = value
        sources[key] = source
    if products.hooks:
        sources["product_hooks"] = products.hooks[-1][0]
    if products.read_paths:
        merged["read_paths"] = [
            *merged.get("read_paths", ()),
            *(path for path, _ in products.read_paths),
        ]
        sources.setdefault("read_paths", products.read_paths[0][1])
    return replace(products, warnings=tuple(warnings))


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
