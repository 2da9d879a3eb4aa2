"""Frontmatter fields: from the parsed YAML mapping to an ``AgentDefinition``.

Every field is validated by hand rather than through a model, because each one needs its own
answer to a bad value. The rule that decides is *never silently change authority*:

* a malformed **authority** field (``tools``, ``disallowed_tools``, ``extensions``,
  ``exclude_extensions``, ``mcp_servers``, ``skills``, ``allowed_subagents``, ``isolated``,
  ``isolation``, ``network``, ``read_paths``, ``memory``, ``permission``, ``enabled``,
  ``inherit_context``, ``budget``, ``workflow``, ``hooks``) makes the file unusable: reading it
  any other way could grant or hide something its author did not write (or drop a guard it wrote);
* a malformed **cosmetic or invocation** field (``description``, ``model``, ``thinking``,
  ``tool_choice``, ``max_turns``, ``prompt_mode``, ``run_in_background``, ``display_name``,
  ``color``) is a warning and stays ``UNSET``, so the call or the default decides, as when it
  is left out.

Unknown keys are kept in ``extra`` and warned about; keys that look like an authority field
(``allowed-tools``, ``allowedTools``, ``tool``, ``disallowed-tools`` ...) get the distinct code
``authority-near-miss``, because such a key silently grants or denies nothing.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from membrane.agents.definition import FIELDS, UNSET, AgentDefinition, DefinitionWarning
from membrane.agents.dialects import MEMBRANE, Dialect, translate
from membrane.agents.hook_reading import read_hooks
from membrane.agents.values import (
    AUTHORITY_FIELDS,
    CHOICES,
    NAME_LIST_FIELDS,
    ValueReader,
    check_names,
    definition_name,
)
from membrane.tools.argument_rules import read_argument_rules
from membrane.tools.permissions import PermissionRule

__all__ = [
    "ALIASES",
    "AUTHORITY_FIELDS",
    "FIELDS",
    "KNOWN_KEYS",
    "MAX_VALUES",
    "build_definition",
    "plain",
]

ALIASES: Mapping[str, str] = {
    "disallowedTools": "disallowed_tools",
    "mcpServers": "mcp_servers",
    "askTools": "ask_tools",
    "toolChoice": "tool_choice",
    "mayAskParent": "may_ask_parent",
    "requestsPerMinute": "requests_per_minute",
    "maxConcurrentRequests": "max_concurrent_requests",
}
_NEAR_MISSES: Mapping[str, str] = {
    "tool": "tools",
    "allowedtools": "tools",
    "allowedtool": "tools",
    "alloweddtools": "tools",
    "toolsallowed": "tools",
    "disallowedtool": "disallowed_tools",
    "deniedtools": "disallowed_tools",
    "denytools": "disallowed_tools",
    "excludetools": "disallowed_tools",
    "excludedtools": "disallowed_tools",
    "blockedtools": "disallowed_tools",
    "extension": "extensions",
    "excludeextension": "exclude_extensions",
    "excludedextensions": "exclude_extensions",
    "skill": "skills",
    "subagents": "allowed_subagents",
    "allowedagents": "allowed_subagents",
    "allowedsubagent": "allowed_subagents",
    "isolate": "isolated",
    "maxturn": "max_turns",
    "maxsteps": "max_turns",
    "permissions": "permission",
}
#: Keys other products write; known so that the ``description`` repair never swallows them.
_FOREIGN_KEYS = frozenset(
    {
        "mode",
        "temperature",
        "top_p",
        "steps",
        "hidden",
        "version",
        "author",
        "tags",
        "category",
        "argument-hint",
        "hooks",
        "permissionMode",
        "effort",
    }
)


def _norm(key: str) -> str:
    return re.sub(r"[-_\s]", "", key).lower()


_BY_NORM = {_norm(name): name for name in FIELDS}
KNOWN_KEYS = (
    frozenset(FIELDS)
    | frozenset(ALIASES)
    | _FOREIGN_KEYS
    | frozenset(
        key
        for key in ("allowed-tools", "allowedTools", "allowed_tools", "tool", "disallowed-tools")
    )
)
_THINKING = {"off", "minimal", "low", "medium", "high", "xhigh"}


#: Aliases let a small file describe a huge value ("billion laughs"); no definition needs more.
MAX_VALUES = 10_000


class _TooLarge(Exception):
    pass


def plain(value: Any, _budget: list[int] | None = None) -> Any:
    """ruamel's round-trip types as plain Python values (``str``, ``int``, ``list``, ``dict``).

    Raises ``_TooLarge`` past ``MAX_VALUES`` nodes, counting every alias expansion.
    """
    budget = _budget if _budget is not None else [MAX_VALUES]
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooLarge
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v, budget) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, budget) for v in value]
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return str(getattr(value, "value", value))


def suggest_field(key: str) -> str | None:
    """The field a misspelt key most likely meant, or ``None``."""
    norm = _norm(key)
    if norm in _NEAR_MISSES:
        return _NEAR_MISSES[norm]
    if norm in _BY_NORM:
        return _BY_NORM[norm]
    import difflib  # only for a key that is not a known one

    close = difflib.get_close_matches(norm, list(_BY_NORM), n=1, cutoff=0.85)
    return _BY_NORM[close[0]] if close else None


def build_definition(
    data: Mapping[str, Any],
    *,
    lines: Mapping[str, int],
    body: str,
    stem: str,
    path: str,
    root: str,
    warnings: Sequence[DefinitionWarning] = (),
    dialect: Dialect = MEMBRANE,
) -> AgentDefinition:
    """Validate the parsed mapping into a definition; ``DefinitionError`` when unusable.

    ``dialect`` says how the file's keys map onto fields (see ``membrane.agents.dialects``)."""
    builder = ValueReader(path=path, lines=lines)
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    field_lines: dict[str, int] = {}
    keys: dict[str, str] = {}
    budget = [MAX_VALUES]
    items: list[tuple[str, Any]] = []
    foreign = dialect.name != MEMBRANE.name  # .agents/agents keeps Membrane's fields
    for key, raw in data.items():
        field = _native(key)
        if field in NAME_LIST_FIELDS or (foreign and key in _DIALECT_LISTS):
            check_names(builder, key, raw)
        try:
            items.append((key, plain(raw, budget)))
        except _TooLarge:
            builder.fail(key, f"holds more than {MAX_VALUES} values", "remove the YAML aliases")
    given: dict[str, str] = {}  # field -> the key that set it
    for entry in translate(items, builder, dialect=dialect, native=_native):
        key, field, value = entry.key, entry.field, entry.value
        if key in lines:
            field_lines.setdefault(field or key, lines[key])
        if field is None and key == "rules" and not foreign:
            # Argument rules over any tool's arguments; they narrow, never grant.
            builder.rules += read_argument_rules(
                value, source="rules", fail=partial(builder.fail, key)
            )
            continue
        if field is None:
            extra[key] = value
            if not entry.quiet:
                _unknown(builder, key, value)
            continue
        if field in given:
            builder.fail(
                key,
                f"is given twice (as `{given[field]}` and `{key}`)"
                if given[field] != key
                else f"sets `{field}` twice",
                "keep one of the two",
            )
        given[field] = key
        if field == "permission" and isinstance(value, dict):
            extra[key] = value
            builder.warn(
                key,
                "authority-key-ignored",
                "`permission` is a per-tool map here (another product's format); Membrane "
                "reads `permission` as a permission mode, so this map is ignored and "
                "grants or denies nothing: express it with `tools` and `disallowed_tools`",
            )
            continue
        if field == "model" and isinstance(value, list) and value:
            # ``model: [primary, fallback...]``: each entry a spec, tried in order.
            rest = tuple(builder.text(key, field, item) for item in value[1:])
            values["fallback_models"] = tuple(item for item in rest if isinstance(item, str))
            value = value[0]
        values[field] = _field(builder, key, field, value)
        if key != field:
            keys[field] = key
    return AgentDefinition(
        name=definition_name(builder, values.pop("name", UNSET), stem),
        body=body,
        root=root,
        path=path,
        dialect=dialect.name,
        keys=keys,
        lines=field_lines,
        extra=extra,
        rules=_ordered(builder.rules),
        warnings=(*warnings, *builder.warnings),
        **{k: v for k, v in values.items() if v is not UNSET},
    )


def _ordered(rules: Sequence[PermissionRule]) -> tuple[PermissionRule, ...]:
    """A dialect's own rule maps (OpenCode's ``permission``) and its product's default asks
    (Claude Code's ``Bash``/``Edit``) first, in file order; then the
    rules of the tool lists ordered ``allow``, ``ask``, ``deny`` whatever the key order, so the
    last matching rule gives ``deny`` precedence over ``ask`` over ``allow`` (Claude Code's)."""
    rank = {"allow": 0, "ask": 1, "deny": 2}
    first = ("permission", "dialect:")  # a dialect's own maps and its product's defaults
    return tuple(
        sorted(rules, key=lambda r: (0, 0) if r.source.startswith(first) else (1, rank[r.verdict]))
    )


#: Keys of other dialects whose values are name lists, checked like Membrane's.
_DIALECT_LISTS = frozenset({"disallowedTools", "tools", "mcpServers"})


def _native(key: str) -> str | None:
    return ALIASES.get(key, key if key in FIELDS else None)


def _unknown(builder: ValueReader, key: str, value: Any) -> None:
    guess = suggest_field(key)
    if guess in AUTHORITY_FIELDS:
        builder.warn(
            key,
            "authority-near-miss",
            f"`{key}` is not a Membrane field, so it grants and denies nothing: did you mean "
            f"`{guess}`? (kept in `extra`, ignored)",
        )
    elif guess is not None:
        builder.warn(
            key,
            "unknown-key",
            f"`{key}` is not a Membrane field: did you mean `{guess}`? (kept in `extra`, ignored)",
        )
    else:
        builder.warn(
            key, "unknown-key", f"`{key}` is not a Membrane field (kept in `extra`, ignored)"
        )


_TOKEN_FIELDS = frozenset(
    {"tools", "disallowed_tools", "ask_tools", "exclude_extensions", "allowed_subagents"}
)


def _field(builder: ValueReader, key: str, field: str, value: Any) -> Any:
    if field in (
        "tools",
        "disallowed_tools",
        "ask_tools",
        "exclude_extensions",
        "allowed_subagents",
    ):
        return builder.tokens(key, field, value, flags=False)
    if field in ("extensions", "skills"):
        return builder.tokens(key, field, value, flags=True)
    if field == "mcp_servers":
        return builder.mcp_servers(key, value)
    if field == "read_paths":
        return _read_paths(builder, key, value)
    if field == "hooks":
        return read_hooks(
            value,
            fail=lambda problem, hint: builder.fail(key, problem, hint),
            warn=lambda code, message: builder.warn(key, code, message),
        )
    if field in (
        "inherit_context",
        "run_in_background",
        "isolated",
        "enabled",
        "hidden",
        "network",
        "may_ask_parent",
    ):
        return builder.flag(key, field, value)
    if field in CHOICES:
        return builder.choice(key, field, value)
    if field == "max_turns":
        return builder.turns(key, value)
    if field in ("requests_per_minute", "max_concurrent_requests"):
        return builder.count(key, field, value)
    if field == "budget":
        return builder.budget(key, value)
    if field == "name" and (value is None or (isinstance(value, str) and not value.strip())):
        return UNSET
    result = builder.text(key, field, value)
    if field == "schedule" and isinstance(result, str) and not _valid_cron(result):
        builder.warn(
            key,
            "unknown-value",
            f"`schedule: {result}` is not a cron expression (five fields: minute hour day month "
            "weekday); no run is scheduled",
        )
        return UNSET
    if field == "thinking" and isinstance(result, str) and result.lower() not in _THINKING:
        builder.warn(
            key,
            "unknown-value",
            f"`thinking: {result}` is not one of "
            f"{', '.join(sorted(_THINKING))}; passed on as written",
        )
    return result


def _read_paths(builder: ValueReader, key: str, value: Any) -> tuple[str, ...]:
    """Folders as a YAML list or one string: each absolute or ``~``-prefixed."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        builder.fail(
            key,
            "must be a list of folders",
            f"write `{key}: [/srv/data, ~/notes]` (absolute or ~/ paths)",
        )
    folders: list[str] = []
    for item in items:
        text = item.strip()
        home_relative = text.startswith("~") and text[1:2] in ("", "/")
        if not (text.startswith("/") or home_relative):
            builder.fail(
                key,
                f"names {item!r}, which is not an absolute path",
                "write each folder as an absolute path (`/srv/data`) or one under your home "
                "folder (`~/data`); a relative path would be read against no known folder",
            )
        folders.append(text)
    return tuple(dict.fromkeys(folders))


def _valid_cron(expression: str) -> bool:
    from croniter import croniter

    return bool(croniter.is_valid(expression)) and len(expression.split()) == 5
