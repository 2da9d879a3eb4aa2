"""Reading one field's value: text, flags, choices, turn counts, name lists and the name.

``ValueReader`` applies the rule of ``membrane.agents.fields``: a malformed authority field is
a ``DefinitionError``; any other malformed field is an ``invalid-value`` warning and stays
``UNSET``. Name lists never widen authority: an argument pattern Membrane enforces
(``Bash(git log:*)``, ``Edit(src/**)``) becomes a permission rule checked on every call; any other
(``WebFetch(domain:x)``) is dropped from ``tools`` and read as the whole tool in
``disallowed_tools``; and a value YAML typed as something other than text (a date, binary data, a
set) is refused rather than turned into a name.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from types import MappingProxyType
from typing import Any, NoReturn

from membrane.agents.definition import NAME_RE, REPAIRED_NAME, UNSET, DefinitionWarning, Unset
from membrane.config.budget import Budget
from membrane.config.values import McpServerSpec
from membrane.errors import DefinitionError, InvalidRequest, SettingsError
from membrane.tools.permissions import RULE_TOOLS, PermissionRule, Verdict, parse_rule
from membrane.vocabulary import DELEGATION_TOOLS, canonical_builtin_name

__all__ = [
    "AUTHORITY_FIELDS",
    "CHOICES",
    "NAME_LIST_FIELDS",
    "NAME_RE",
    "REPAIRED_NAME",
    "ValueReader",
    "check_names",
    "definition_name",
    "name_slug",
    "split_commas",
]

AUTHORITY_FIELDS = frozenset(
    {
        "tools",
        "disallowed_tools",
        "ask_tools",
        "extensions",
        "exclude_extensions",
        "mcp_servers",
        "skills",
        "allowed_subagents",
        "may_ask_parent",
        "requests_per_minute",
        "max_concurrent_requests",
        "isolated",
        "isolation",
        "network",
        "read_paths",
        "memory",
        "permission",
        "enabled",
        "inherit_context",
        "mode",
        "budget",
        "workflow",
        "hooks",
    }
)
#: An example value for each name-list field, used in hints.
_EXAMPLES: Mapping[str, str] = {
    "tools": "Read, Grep",
    "disallowed_tools": "Bash, Write",
    "ask_tools": "Bash(git push:*), Write",
    "exclude_extensions": "my-extension",
    "allowed_subagents": "explorer, code-reviewer",
    "extensions": "my-extension",
    "skills": "my-skill",
}
#: Fields whose value is a list of names (or, for ``extensions``/``skills``, a flag).
NAME_LIST_FIELDS = frozenset(_EXAMPLES)
_NAME_HINT = (
    "use letters, digits, `.`, `_`, `:` and `-`, starting with a letter or digit, at most "
    "128 characters, such as `code-reviewer`"
)
_BOOL_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
CHOICES: Mapping[str, tuple[str, ...]] = {
    "prompt_mode": ("replace", "append"),
    "isolation": ("off", "worktree"),
    "memory": ("project", "local", "user"),
    "mode": ("all", "subagent", "primary"),
}


class ValueReader:
    """Reads the values of one file, collecting its warnings."""

    def __init__(self, *, path: str, lines: Mapping[str, int]) -> None:
        self.path = path
        self.lines = lines
        self.warnings: list[DefinitionWarning] = []
        #: Permission rules read from ``tools``, ``ask_tools``, ``disallowed_tools`` (and a
        #: dialect's own permission fields), in the order they were read.
        self.rules: list[PermissionRule] = []

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
        options = CHOICES[field]
        if isinstance(value, str) and value.strip().lower() in options:
            return value.strip().lower()
        return self.bad(
            key,
            field,
            f"must be one of {', '.join(options)}, not {_show(value)}",
            f"write `{key}: {options[0]}` or remove the line",
        )

    def count(self, key: str, field: str, value: Any) -> int | Unset:
        """A whole number of at least 1 (``requests_per_minute``, ``max_concurrent_requests``)."""
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        return self.bad(
            key,
            field,
            f"must be a whole number of at least 1, not {_show(value)}",
            f"write for example `{key}: 30`",
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

    def budget(self, key: str, value: Any) -> Budget:
        """A mapping of limits or ``kind=N,...`` text; a malformed one fails the file, since
        reading it any other way would let a run spend what its author did not allow."""
        try:
            return Budget.parse(value, where=f"`{key}`")
        except InvalidRequest as exc:
            self.fail(
                key,
                exc.message.removeprefix(f"`{key}`").lstrip(": "),
                "write for example `budget: {tokens: 200000, children: 20}`",
            )

    def tokens(self, key: str, field: str, value: Any, *, flags: bool) -> Any:
        """A comma string or a YAML list; ``none`` and ``[]`` are the empty tuple."""
        denylist = field in ("disallowed_tools", "exclude_extensions", "ask_tools")
        if isinstance(value, bool):
            if flags or (field == "allowed_subagents" and value is False):
                return value if flags else ()
            self.fail(
                key,
                f"cannot be `{str(value).lower()}`",
                f"list names, e.g. `{key}: {_EXAMPLES[field]}`, or write `{key}: none`",
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
            items = split_commas(value)
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
        if field in ("tools", "disallowed_tools", "ask_tools"):
            for item in items:
                if re.search(r"\s", re.sub(r"\(.*\)", "", item)):
                    self.fail(
                        key, f"`{item}` is not one tool name", "separate tool names with commas"
                    )
            items = self.patterns(key, field, items)
        if field == "tools":
            self.unknown_tools(key, items)
        if field == "allowed_subagents" and "*" in items and len(items) > 1:
            self.fail(
                key,
                "mixes `*` with names",
                f"write `{key}: '*'` alone for any subagent, or list the names without `*`",
            )
        return tuple(dict.fromkeys(items))

    def mcp_servers(self, key: str, value: Any) -> Mapping[str, McpServerSpec | None]:
        """``mcp_servers``: names of servers in the settings and inline entries, as a list
        (``[time, {docs: {url: ...}}]``), a mapping (``{time: null, docs: {...}}``) or a comma
        string. A bad entry makes the file unusable (it is authority)."""
        entries: list[tuple[object, object]] = []
        if isinstance(value, str):
            entries = [(name.strip(), None) for name in value.split(",") if name.strip()]
        elif isinstance(value, Mapping):
            entries = list(value.items())
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Mapping) and len(item) == 1:
                    entries.extend(item.items())
                else:
                    entries.append((item, None))
        else:
            self.fail(
                key,
                f"must be a list of MCP server names or entries, got {type(value).__name__}",
                "write `mcp_servers: [time]` (names from the settings) or inline entries "
                "`- docs: {url: http://127.0.0.1:9000/mcp}`",
            )
        from membrane.config.mcp_servers import mcp_server_spec  # a file naming servers only

        servers: dict[str, McpServerSpec | None] = {}
        for name, raw in entries:
            where = f"{key}.{name}"
            try:
                spec = mcp_server_spec(
                    str(name), {"command": "-"} if raw is None else raw, path=self.path, key=where
                )
            except SettingsError as exc:
                self.fail(key, str(exc.message).split(": ", 1)[-1], str(exc.data.get("hint")))
            if not isinstance(name, str) or name in servers:
                self.fail(key, f"names the MCP server {name!r} twice", "name each server once")
            servers[name] = None if raw is None else spec
        return MappingProxyType(servers)

    def unknown_tools(self, key: str, items: list[str]) -> None:
        """Warn about ``tools`` tokens that select nothing, so ``validate`` shows them.

        A token is a built-in name (any case), ``*``/``all``/``inherit``, or a selector
        (``ext:NAME[/TOOL]``, ``mcp__SERVER__TOOL``, ``mcp__SERVER__*``). Anything else, such as
        another product's tool name, grants nothing: the resolver ignores it.
        """
        for item in items:
            if item.lower() in _TOOL_WORDS or item.startswith(("ext:", "mcp__")):
                continue
            if canonical_builtin_name(item) is not None:
                continue
            if item.lower() in _DELEGATION_LOWER:
                why = "the delegation tools come with `allowed_subagents`, not with `tools`"
            else:
                why = (
                    "select extension tools with `ext:NAME/TOOL` and MCP tools with "
                    "`mcp__SERVER__TOOL`"
                )
            self.warn(
                key,
                "unknown-tool",
                f"`{item}` is not a built-in tool or a selector, so it grants nothing ({why})",
            )

    def patterns(self, key: str, field: str, items: list[str]) -> list[str]:
        """Argument patterns (``Bash(git log:*)``) become permission rules; never more authority.

        A pattern on a tool whose arguments Membrane reads (``Bash``, ``Read``, ``Glob``,
        ``Grep``, ``Edit``, ``Write``) is a rule enforced on every call: in ``tools`` it grants
        the tool for the calls it matches (``allow``), in ``ask_tools`` the matching calls need
        the host's approval, in ``disallowed_tools`` they are refused. Any other pattern cannot
        be enforced: in ``tools`` it grants nothing, in ``disallowed_tools`` and ``ask_tools``
        it covers the whole tool, which only narrows; the ``argument-pattern`` warning says so.
        Every ``ask_tools`` entry is a rule; the list keeps only the names, for the record.
        """
        verdict: Verdict = (
            "allow" if field == "tools" else "ask" if field == "ask_tools" else "deny"
        )
        kept: list[str] = []
        for item in items:
            parsed = parse_rule(item)
            if parsed is None:
                self.fail(
                    key,
                    f"`{item}` is not a tool name",
                    "write a tool name such as `Bash`, or a rule such as `Bash(git log:*)`",
                )
            tool, pattern = parsed
            builtin = canonical_builtin_name(tool)
            if pattern is None:
                kept.append(item)
                if field == "ask_tools":
                    self._rule(builtin or tool, None, verdict, item, key)
                continue
            if builtin is not None and builtin in RULE_TOOLS:
                for one in _split_patterns(pattern):
                    self._rule(builtin, one, verdict, f"{builtin}({one})", key)
                if field == "ask_tools":
                    kept.append(builtin)
                continue
            if field == "tools":
                self.warn(
                    key,
                    "argument-pattern",
                    f"Membrane cannot read the arguments of {tool}, so `{item}` would grant all "
                    f"of {tool}: it is dropped and grants nothing (write `{tool}` to grant all "
                    "of it)",
                )
                continue
            whole = "denies" if field == "disallowed_tools" else "asks for every call of"
            self.warn(
                key,
                "argument-pattern",
                f"Membrane cannot read the arguments of {tool}, so `{item}` {whole} all of {tool}",
            )
            kept.append(tool)
            if field == "ask_tools":
                self._rule(builtin or tool, None, verdict, tool, key)
        return kept

    def _rule(self, tool: str, pattern: str | None, verdict: Verdict, text: str, key: str) -> None:
        rule = PermissionRule(tool, pattern, verdict, text, key, grants=verdict == "allow")
        self.rules.append(rule)


def _split_patterns(pattern: str) -> list[str]:
    """``git log:*, git diff:*`` (several prefix patterns in one pair of parentheses) as two;
    any other pattern stays whole (a command may hold a comma)."""
    parts = [p.strip() for p in pattern.split(",")]
    if len(parts) > 1 and all(p.endswith(":*") and p[:-2].strip() for p in parts):
        return parts
    return [pattern]


_TOOL_WORDS = frozenset({"*", "all", "inherit"})
_DELEGATION_LOWER = frozenset(name.lower() for name in DELEGATION_TOOLS)


def split_commas(text: str) -> list[str]:
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


def definition_name(builder: ValueReader, name: Any, stem: str) -> str:
    """The ``name`` as written, else the file stem without leading dots (a hidden file)."""
    if isinstance(name, str) and name:
        if NAME_RE.fullmatch(name):
            return name
        slug = name_slug(name)
        if slug is None:
            builder.fail("name", f"{_quote(name)} is not a valid agent name", _NAME_HINT)
        builder.warn(
            "name",
            REPAIRED_NAME,
            f"read `name: {name}` as `{slug}`, a valid agent name; write `name: {slug}` to "
            "keep it so",
        )
        return slug
    derived = stem.lstrip(".")
    if not NAME_RE.fullmatch(derived):
        raise DefinitionError(
            f"the file gives no `name` and its file name {_quote(stem)} is not a valid agent name",
            path=builder.path,
            line=builder.lines.get("name", 1),
            field="name",
            hint=f"add a `name` field: {_NAME_HINT}",
        )
    return derived


#: Characters a repairable name may hold: printable ASCII without path separators, so the slug
#: never hides a traversal, a control character or a look-alike letter.
_SLUGGABLE = re.compile(r"[A-Za-z0-9 _.:()&+,'!?#@*-]+")


def name_slug(name: str) -> str | None:
    """``Python Security Expert`` as ``python-security-expert``; ``None`` when ``name`` has
    characters a slug must not paper over (``/``, ``\\``, control or non-ASCII characters)."""
    if not _SLUGGABLE.fullmatch(name):
        return None
    slug = re.sub(r"[^a-z0-9._:]+", "-", name.lower()).strip("-._:")
    slug = re.sub(r"-{2,}", "-", slug)
    return slug if NAME_RE.fullmatch(slug) else None


def _quote(text: str) -> str:
    """``text`` in backticks, or escaped when it holds invisible or control characters."""
    shown = text if len(text) <= 60 else text[:57] + "..."
    return f"`{shown}`" if shown.isprintable() else ascii(shown)


def check_names(builder: ValueReader, key: str, raw: Any) -> None:
    """A name list holds text only: a date, binary data, a set or a tagged value is refused,
    because converting it to text would make up a name its author did not write."""
    items = list(raw) if isinstance(raw, list) else [raw]
    for item in items:
        if item is None or isinstance(item, (str, bool, int, float, list, Mapping)):
            continue  # kinds the field rules judge themselves, with their own message
        tag = getattr(getattr(item, "tag", None), "value", None)
        if tag == "tag:yaml.org,2002:str":
            continue  # `!!str 2024-01-01`: explicitly text
        builder.fail(
            key,
            f"holds {_yaml_kind(item)}, which is not a name",
            "write each entry as plain text; quote it if it looks like a date or a number",
        )


def _yaml_kind(value: Any) -> str:
    if isinstance(value, (dt.date, dt.datetime)):
        return f"the date {value.isoformat()}"
    if isinstance(value, (bytes, bytearray)):
        return "binary data"
    if isinstance(value, AbstractSet):
        return "a set"
    tag = getattr(getattr(value, "tag", None), "value", None)
    if tag:
        return f"a value tagged `{tag}`"
    return f"a {type(value).__name__}"
