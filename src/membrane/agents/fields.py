"""Frontmatter fields: from the parsed YAML mapping to an ``AgentDefinition``.

Every field is validated by hand rather than through a model, because each one needs its own
answer to a bad value. The rule that decides is *never silently change authority*:

* a malformed **authority** field (``tools``, ``disallowed_tools``, ``extensions``,
  ``exclude_extensions``, ``skills``, ``allowed_subagents``, ``isolated``, ``isolation``,
  ``memory``, ``permission``, ``enabled``, ``inherit_context``) makes the file unusable:
  reading it any other way could grant or hide something its author did not write;
* a malformed **cosmetic or invocation** field (``description``, ``model``, ``thinking``,
  ``max_turns``, ``prompt_mode``, ``run_in_background``, ``display_name``, ``color``) is a
  warning and stays ``UNSET``, so the call or the default decides, as when it is left out.

Unknown keys are kept in ``extra`` and warned about; keys that look like an authority field
(``allowed-tools``, ``allowedTools``, ``tool``, ``disallowed-tools`` ...) get the distinct code
``authority-near-miss``, because such a key silently grants or denies nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from membrane.agents.definition import UNSET, AgentDefinition, DefinitionWarning, Unset
from membrane.errors import DefinitionError

__all__ = [
    "ALIASES",
    "AUTHORITY_FIELDS",
    "FIELDS",
    "KNOWN_KEYS",
    "MAX_VALUES",
    "build_definition",
    "plain",
]

_NOT_FIELDS = {"body", "root", "path", "lines", "extra", "warnings"}
#: Every frontmatter field, in the order ``AgentDefinition`` declares them.
FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(AgentDefinition) if f.name not in _NOT_FIELDS
)
ALIASES: Mapping[str, str] = {"disallowedTools": "disallowed_tools"}
AUTHORITY_FIELDS = frozenset(
    {
        "tools",
        "disallowed_tools",
        "extensions",
        "exclude_extensions",
        "skills",
        "allowed_subagents",
        "isolated",
        "isolation",
        "memory",
        "permission",
        "enabled",
        "inherit_context",
    }
)
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
        "mcpServers",
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
_BOOL_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
_THINKING = {"off", "minimal", "low", "medium", "high", "xhigh"}
_CHOICES: Mapping[str, tuple[str, ...]] = {
    "prompt_mode": ("replace", "append"),
    "isolation": ("off", "worktree"),
    "memory": ("project", "local", "user"),
}


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
    close = difflib.get_close_matches(norm, list(_BY_NORM), n=1, cutoff=0.85)
    return _BY_NORM[close[0]] if close else None


class _Builder:
    def __init__(self, *, path: str, lines: Mapping[str, int]) -> None:
        self.path = path
        self.lines = lines
        self.warnings: list[DefinitionWarning] = []

    def warn(self, key: str, code: str, message: str) -> None:
        self.warnings.append(DefinitionWarning(self.path, self.lines.get(key), code, message))

    def fail(self, key: str, problem: str, hint: str) -> NoReturn:
        raise DefinitionError(
            f"`{key}` {problem}", path=self.path, line=self.lines.get(key), field=key, hint=hint
        )

    def bad(self, key: str, field: str, problem: str, hint: str) -> Unset:
        """Authority fields fail; the others warn and stay UNSET."""
        if field in AUTHORITY_FIELDS:
            self.fail(key, problem, hint)
        self.warn(key, "invalid-value", f"`{key}` {problem}; ignored ({hint})")
        return UNSET

    def text(self, key: str, field: str, value: Any) -> str | Unset:
        if isinstance(value, str):
            return (
                value.strip()
                if value.strip()
                else self.bad(key, field, "is empty", "give a value or remove the line")
            )
        if (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and (field not in AUTHORITY_FIELDS)
        ):
            self.warn(key, "coerced-value", f"read `{key}: {value}` as the text {str(value)!r}")
            return str(value)
        return self.bad(key, field, f"must be text, not {_kind(value)}", "write a plain string")

    def flag(self, key: str, field: str, value: Any) -> bool | Unset:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
            result = _BOOL_WORDS[value.strip().lower()]
            self.warn(key, "coerced-value", f"read `{key}: {value}` as `{str(result).lower()}`")
            return result
        return self.bad(
            key,
            field,
            f"must be true or false, not {_show(value)}",
            f"write `{key}: true` or `{key}: false`",
        )

    def choice(self, key: str, field: str, value: Any) -> str | Unset:
        options = _CHOICES[field]
        if isinstance(value, str) and value.strip().lower() in options:
            return value.strip().lower()
        return self.bad(
            key,
            field,
            f"must be one of {', '.join(options)}, not {_show(value)}",
            f"write `{key}: {options[0]}` or remove the line",
        )

    def turns(self, key: str, value: Any) -> int | Unset:
        if isinstance(value, str) and value.strip().isdigit():
            self.warn(
                key, "coerced-value", f"read `{key}: {value!r}` as the number {value.strip()}"
            )
            value = int(value.strip())
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        return self.bad(
            key,
            "max_turns",
            f"must be a whole number of at least 1, not {_show(value)}",
            "write for example `max_turns: 20`",
        )

    def tokens(self, key: str, field: str, value: Any, *, flags: bool) -> Any:
        """A comma string or a YAML list; ``none`` and ``[]`` are the empty tuple."""
        denylist = field in ("disallowed_tools", "exclude_extensions")
        if isinstance(value, bool):
            if flags or (field == "allowed_subagents" and value is False):
                return value if flags else ()
            self.fail(
                key,
                f"cannot be `{str(value).lower()}`",
                f"list names, e.g. `{key}: Read, Grep`, or write `{key}: none`",
            )
        if value is None or (isinstance(value, str) and not value.strip()):
            if denylist:
                self.warn(key, "empty-value", f"`{key}` is empty; nothing is excluded")
                return ()
            self.fail(
                key,
                "has no value",
                f"write `{key}: none` for nothing, or remove the line for the default",
            )
        if isinstance(value, str):
            items = _split_commas(value)
            if "" in items:
                self.warn(key, "repaired-list", f"ignored an empty entry in `{key}`")
                items = [item for item in items if item]
        elif isinstance(value, list):
            items = []
            for item in value:
                if not isinstance(item, str) or not item.strip():
                    self.fail(
                        key,
                        f"has the entry {_show(item)}, which is not a name",
                        "write each entry as a plain name",
                    )
                items.append(item.strip())
        else:
            self.fail(
                key,
                f"must be a list or a comma-separated string, not {_kind(value)}",
                f"write `{key}: a, b` or a YAML list",
            )
        lowered = [item.lower() for item in items]
        if "none" in lowered:
            if len(items) > 1:
                self.fail(
                    key,
                    "mixes `none` with names",
                    f"write `{key}: none` alone, or list the names without `none`",
                )
            return ()
        if field in ("tools", "disallowed_tools"):
            for item in items:
                if re.search(r"\s", re.sub(r"\(.*\)", "", item)):
                    self.fail(
                        key, f"`{item}` is not one tool name", "separate tool names with commas"
                    )
        return tuple(dict.fromkeys(items))


def _split_commas(text: str) -> list[str]:
    """Split on commas outside parentheses (``Bash(git log:*)`` stays one token)."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
            continue
        depth += char == "("
        depth -= char == ")" and depth > 0
        current.append(char)
    items.append("".join(current).strip())
    return items


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", bool: "a boolean", type(None): "empty"}.get(
        type(value), type(value).__name__
    )


def _show(value: Any) -> str:
    return f"`{value}`" if isinstance(value, (str, int, float)) else _kind(value)


def build_definition(
    data: Mapping[str, Any],
    *,
    lines: Mapping[str, int],
    body: str,
    stem: str,
    path: str,
    root: str,
    warnings: Sequence[DefinitionWarning] = (),
) -> AgentDefinition:
    """Validate the parsed mapping into a definition; ``DefinitionError`` when unusable."""
    builder = _Builder(path=path, lines=lines)
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    field_lines: dict[str, int] = {}
    budget = [MAX_VALUES]
    for key, raw in data.items():
        try:
            value = plain(raw, budget)
        except _TooLarge:
            builder.fail(key, f"holds more than {MAX_VALUES} values", "remove the YAML aliases")
        field = ALIASES.get(key, key if key in FIELDS else None)
        if key in lines:
            field_lines[field or key] = lines[key]
        if field is None:
            extra[key] = value
            _unknown(builder, key, value)
            continue
        if field in values:
            builder.fail(key, f"is given twice (as `{field}` and `{key}`)", "keep one of the two")
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
        values[field] = _field(builder, key, field, value)
    name = values.pop("name", UNSET)
    if not isinstance(name, str) or not name:
        name = stem
    if any(ord(c) < 0x20 for c in name):
        builder.fail("name", "contains a control character", "use a single-line name")
    return AgentDefinition(
        name=name,
        body=body,
        root=root,
        path=path,
        lines=field_lines,
        extra=extra,
        warnings=(*warnings, *builder.warnings),
        **{k: v for k, v in values.items() if v is not UNSET},
    )


def _unknown(builder: _Builder, key: str, value: Any) -> None:
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


def _field(builder: _Builder, key: str, field: str, value: Any) -> Any:
    if field in ("tools", "disallowed_tools", "exclude_extensions", "allowed_subagents"):
        return builder.tokens(key, field, value, flags=False)
    if field in ("extensions", "skills"):
        return builder.tokens(key, field, value, flags=True)
    if field in ("inherit_context", "run_in_background", "isolated", "enabled"):
        return builder.flag(key, field, value)
    if field in _CHOICES:
        return builder.choice(key, field, value)
    if field == "max_turns":
        return builder.turns(key, value)
    if field == "name" and (value is None or (isinstance(value, str) and not value.strip())):
        return UNSET
    result = builder.text(key, field, value)
    if field == "thinking" and isinstance(result, str) and result.lower() not in _THINKING:
        builder.warn(
            key,
            "unknown-value",
            f"`thinking: {result}` is not one of "
            f"{', '.join(sorted(_THINKING))}; passed on as written",
        )
    return result
