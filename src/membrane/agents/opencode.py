"""The OpenCode dialect: ``<project>/.opencode/agent(s)/*.md`` and the agents of ``opencode.json``.

OpenCode's fields, each with its own meaning:

* ``mode``: ``subagent``, ``primary`` (never started for a ``Task`` call) or ``all``;
  ``hidden``: left out of catalogs that list every agent; ``disable: true`` is
  ``enabled: false``; ``steps`` (or the older ``maxSteps``) is ``max_turns``.
* ``tools``: a map of tool names (globs allowed) to ``true``/``false``; ``NAME_*`` is the tools of
  MCP server ``NAME``.
* ``permission``: per tool ``allow``, ``ask`` or ``deny`` (or, for ``bash``, a map of command
  globs to one of them); keys are globs and the **last matching key wins**. ``permission.task``
  says which subagents may be started (``allowed_subagents``), ``permission.skill`` which skills
  are listed.

* ``permissions``: OpenCode's current list format, ``[{action, resource, effect}]``: read as the
  ``permission`` map it means (``shell`` is ``bash``; the last matching rule wins; a built-in no
  rule names asks, as OpenCode asks when no rule matches).

A tool no key mentions is allowed in OpenCode; in Membrane it follows the read-only default
(``dialect-default-differs``) unless ``opencode_omitted_tools = "all"``. ``edit`` governs every
file change in OpenCode (``write``, ``patch`` and ``multiedit`` are the same switch, in ``tools``
as in ``permission``), so it decides ``Edit`` and ``Write`` together. ``ask`` and pattern maps
(``bash: {"git *": allow, "*": ask}``, ``edit: {"src/**": allow}``) become permission rules in
the map's order (the last matching one wins, ``*`` matching every call), enforced on every call;
a command no pattern matches asks (OpenCode would allow it). ``permission.task`` may ``ask`` and
take globs too: its keys become rules on ``Task`` over the subagent a call names, so an ``ask``
goes to the host's approver and a ``deny`` refuses the call. ``skill`` takes names only: ``ask``
there grants nothing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any, Final

from membrane.agents.translation import Dialect, Translation
from membrane.tools.permissions import PermissionRule

__all__ = ["OPENCODE_TOOLS", "finish_opencode", "translate_opencode"]

#: OpenCode folds every file change into one ``edit`` permission: in ``tools`` and in
#: ``permission`` the last key naming any of them decides ``Edit`` and ``Write`` together.
_FILE_CHANGES = ("edit", "write", "patch", "multiedit")
#: Membrane built-in -> (its OpenCode tool names, its OpenCode permission keys).
_BUILTINS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "Read": (("read",), ("read",)),
    "Glob": (("glob", "list"), ("glob", "list")),
    "Grep": (("grep",), ("grep",)),
    "Bash": (("bash",), ("bash",)),
    "Edit": (_FILE_CHANGES, _FILE_CHANGES),
    "Write": (_FILE_CHANGES, _FILE_CHANGES),
}
#: Every tool and permission name OpenCode knows.
OPENCODE_TOOLS: Final = frozenset(
    {
        "read",
        "edit",
        "write",
        "patch",
        "multiedit",
        "glob",
        "grep",
        "list",
        "bash",
        "task",
        "skill",
        "lsp",
        "todoread",
        "todowrite",
        "webfetch",
        "websearch",
        "codesearch",
        "external_directory",
        "doom_loop",
    }
)
_VERDICTS = ("allow", "ask", "deny")
#: Permission keys whose value may be a map of patterns (commands, paths, names).
_PATTERN_KEYS = ("bash", "edit", "read", "glob", "grep", "list", "task", "skill")
_BOOL_WORDS = {"true": True, "yes": True, "false": False, "no": False}
_IGNORED: Mapping[str, str] = {
    "temperature": "sets a sampling temperature, which Membrane leaves to the model",
    "top_p": "sets a sampling parameter, which Membrane leaves to the model",
    "options": "holds provider options, which Membrane leaves to the model",
    "variant": "names a model variant, which Membrane leaves to the model",
    "prompt": "is the prompt of an opencode.json agent; in a file the body is the prompt",
}


def translate_opencode(out: Translation, key: str, value: Any) -> bool:
    """Handle ``key`` if it is an OpenCode key; ``False`` leaves it to the Membrane fields."""
    if key == "permissions":
        if not isinstance(value, list):
            out.reader.fail(
                key,
                "must be a list of `{action, resource, effect}` rules",
                'write for example `permissions: [{action: read, resource: "*", effect: allow}]`',
            )
        out.pending["permissions"] = value
        return True
    if key in ("tools", "permission") and (isinstance(value, Mapping) or key == "permission"):
        out.pending[key] = value
        return True
    if key in ("steps", "maxSteps"):
        out.add(key, "max_turns", value)
        return True
    if key == "disable":
        flag = _BOOL_WORDS.get(value.strip().lower()) if isinstance(value, str) else value
        out.add(key, "enabled", (not flag) if isinstance(flag, bool) else value)
        return True
    if key in _IGNORED:
        out.ignore(key, value, _IGNORED[key])
        return True
    return False


def finish_opencode(out: Translation, dialect: Dialect) -> None:
    """Turn the collected ``tools`` and ``permission`` into Membrane's tool fields."""
    if not out.pending:
        return
    tools_map = out.pending.get("tools")
    permission = out.pending.get("permission")
    if isinstance(permission, str):
        permission = {"*": permission}
    if "permissions" in out.pending:
        if permission is not None:
            out.reader.fail(
                "permissions",
                "is given with `permission`",
                "keep one: the `permissions` list (OpenCode's current format) or the map",
            )
        permission = _rule_list(out, out.pending["permissions"])
        out.pending["permission"] = permission
    key = (
        "permissions"
        if "permissions" in out.pending
        else "permission"
        if "permission" in out.pending
        else "tools"
    )
    if permission is not None and not isinstance(permission, Mapping):
        out.reader.fail(
            "permission",
            "must be `allow`, `ask`, `deny` or a map of tools to them",
            'write for example `permission: {edit: deny, bash: {"git *": allow}}`',
        )
    perms = dict(permission or {})
    tmap = dict(tools_map or {})
    _check_keys(out, perms, tmap)
    granted: list[str] = []
    denied: list[str] = []
    unspecified: list[str] = []
    ruled = False
    for builtin, (tool_names, perm_keys) in _BUILTINS.items():
        enabled = _last(tmap, tool_names, out, "tools")
        verdict = _last(perms, perm_keys, out, "permission")
        if enabled is False or verdict == "deny":
            denied.append(builtin)
        elif verdict == "allow" or (enabled is True and verdict is None):
            granted.append(builtin)
        elif verdict is not None:
            ruled |= _rules(out, builtin, perm_keys[0], verdict)
        else:
            unspecified.append(builtin)
    extras, mcp_denied = _mcp(tmap)
    explicit = bool(granted or extras or ruled)
    if explicit:
        policy = dialect.omitted_tools
        base = {"default": list(dialect.default_tools), "all": list(_BUILTINS), "inherit": []}
        fill = [b for b in unspecified if b in base[policy]]
        tools = (["inherit"] if policy == "inherit" else []) + granted + fill + extras
        missing = [b for b in unspecified if b not in fill and policy == "default"]
        if missing:
            out.warn_file(
                "dialect-default-differs",
                f"OpenCode allows {', '.join(missing)} where no key mentions them; Membrane "
                "grants only what the file names and the read-only default: list them in "
                '`permission` or set opencode_omitted_tools = "all"',
            )
        out.add(key, "tools", tools)
    if denied or mcp_denied:
        out.add(key, "disallowed_tools", denied + mcp_denied)
    _delegation(out, perms, "task", "allowed_subagents")
    _delegation(out, perms, "skill", "skills")


def _rules(out: Translation, builtin: str, key: str, verdict: Any) -> bool:
    """``ask``, or a map of patterns, as ``builtin``'s rules; whether any of them grants."""
    table: Mapping[str, Any] = {"*": verdict} if isinstance(verdict, str) else verdict
    grants = False
    for pattern, value in table.items():
        if value not in _VERDICTS:
            out.reader.fail(
                "permission",
                f"gives `{key}` pattern {pattern!r} the verdict {value!r}",
                "write `allow`, `ask` or `deny`",
            )
        where = "permission" if isinstance(verdict, str) else f"permission.{key}"
        text = f"{key}: {value}" if pattern == "*" else f"{key} {pattern!r}: {value}"
        rule = PermissionRule(
            builtin, None if pattern == "*" else str(pattern), value, text, where, value != "deny"
        )
        out.reader.rules.append(rule)
        grants |= value != "deny"
    return grants


def _check_keys(out: Translation, perms: Mapping[str, Any], tmap: Mapping[str, Any]) -> None:
    for name, verdict in perms.items():
        if name == "*" or any(fnmatch.fnmatchcase(t, name) for t in OPENCODE_TOOLS):
            if name not in _PATTERN_KEYS and isinstance(verdict, Mapping):
                out.reader.warn(
                    "permission",
                    "argument-pattern",
                    f"`permission.{name}` holds patterns; only {', '.join(_PATTERN_KEYS)} take "
                    "them, so it grants nothing",
                )
            continue
        out.reader.warn(
            "permission",
            "unknown-tool",
            f"`permission` key `{name}` names no OpenCode tool, so it grants and denies "
            "nothing (command patterns belong under `permission.bash`)",
        )
    for name in tmap:
        known = any(fnmatch.fnmatchcase(t, name) for t in OPENCODE_TOOLS)
        if name == "*" or _server(name) or known:
            continue
        out.reader.warn(
            "tools", "unknown-tool", f"`tools` key `{name}` names no OpenCode tool; ignored"
        )


def _last(table: Mapping[str, Any], names: tuple[str, ...], out: Translation, where: str) -> Any:
    """The value of the last key of ``table`` whose glob matches one of ``names``."""
    found: Any = None
    for pattern, value in table.items():
        if any(fnmatch.fnmatchcase(n, pattern) for n in names):
            found = value
    if where == "tools" and found is not None and not isinstance(found, bool):
        flag = _BOOL_WORDS.get(str(found).strip().lower())
        if flag is None:
            out.reader.fail("tools", f"maps a tool to {found!r}", "write `true` or `false`")
        return flag
    if where == "permission" and isinstance(found, str) and found not in _VERDICTS:
        out.reader.fail(
            "permission", f"gives the verdict {found!r}", "write `allow`, `ask` or `deny`"
        )
    return found


def _server(pattern: str) -> str | None:
    head, sep, tail = pattern.rpartition("_")
    return head if sep and tail == "*" and head and "*" not in head else None


def _mcp(tmap: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    granted: list[str] = []
    denied: list[str] = []
    for pattern, value in tmap.items():
        server = _server(pattern)
        if server is None:
            continue
        (granted if value is True else denied).append(f"mcp__{server}__*")
    return granted, denied


def _delegation(out: Translation, perms: Mapping[str, Any], name: str, field: str) -> None:
    """``permission.task`` (or ``skill``) as the names allowed, last matching key winning.

    ``task`` may also ``ask`` and take globs: each key is then a rule on ``Task`` over the
    subagent it names (the last matching one wins), enforced on every call, and the agent may
    start whatever a rule allows or asks (``*`` when a glob or ``*`` does)."""
    verdict = _last(perms, (name,), out, "permission")
    if verdict is None:
        return
    if name == "task" and isinstance(verdict, Mapping):
        # A nested agent OpenCode calls ``team/reviewer`` is ``team:reviewer`` here.
        verdict = {str(key).replace("/", ":"): value for key, value in verdict.items()}
    if name == "task" and (verdict == "ask" or isinstance(verdict, Mapping)):
        _task_rules(out, verdict)
        return
    if isinstance(verdict, str):
        if verdict == "allow":
            out.add("permission", field, "*" if field == "allowed_subagents" else True)
        elif verdict == "deny":
            out.add("permission", field, "none" if field == "allowed_subagents" else False)
        else:
            out.reader.warn(
                "permission",
                "argument-pattern",
                f"`permission.{name}: ask` needs an approval Membrane cannot hold; nothing granted",
            )
        return
    allowed: list[str] = []
    star: Any = None
    for pattern, value in verdict.items():
        if pattern == "*":
            star = value
        elif any(c in pattern for c in "*?["):
            out.reader.warn(
                "permission",
                "argument-pattern",
                f"`permission.{name}` pattern `{pattern}` is not a name; it grants nothing",
            )
    for pattern in verdict:
        if pattern == "*" or any(c in pattern for c in "*?["):
            continue
        final = _last(verdict, (pattern,), out, "permission")
        if final == "allow":
            allowed.append(pattern)
    denied_any = any(
        _last(verdict, (p,), out, "permission") != "allow" for p in verdict if p != "*"
    )
    if star == "allow" and not denied_any:
        out.add("permission", field, "*" if field == "allowed_subagents" else True)
    elif allowed:
        out.add("permission", field, allowed)
    else:
        out.add("permission", field, "none" if field == "allowed_subagents" else False)


def _task_rules(out: Translation, verdict: Any) -> None:
    """``permission.task: ask`` or a map of subagent globs as rules on ``Task``."""
    table: Mapping[str, Any] = {"*": verdict} if isinstance(verdict, str) else verdict
    globs = {p for p in table if p == "*" or any(c in p for c in "*?[")}
    if "*" not in table and globs:
        # A glob lets Task name any agent; one no key matches stays refused, as without globs.
        out.reader.rules.append(
            PermissionRule("Task", None, "deny", "task (no key matches): deny", "permission.task")
        )
    _rules(out, "Task", "task", verdict)
    reachable = [
        "*" if pattern in globs else str(pattern)
        for pattern, value in table.items()
        if (value if pattern in globs else _last(table, (pattern,), out, "permission")) != "deny"
    ]
    if "*" in reachable:
        out.add("permission", "allowed_subagents", "*")
    else:
        out.add("permission", "allowed_subagents", reachable or "none")


#: The actions of OpenCode's ``permissions`` list that name a permission key under another name.
_ACTIONS: Mapping[str, str] = {"shell": "bash", "agent": "task"}
#: The built-in permission keys a ``permissions`` list that never names them leaves at ``ask``.
_ASKED_BY_DEFAULT = ("read", "glob", "grep", "list", "bash", "edit")


def _rule_list(out: Translation, rules: list[Any]) -> dict[str, Any]:
    """OpenCode's ``permissions`` list (``{action, resource, effect}``, the last matching rule
    wins, no matching rule asks) as the ``permission`` map it means: one pattern map per
    action in list order, each built-in the list never names at ``ask``."""
    table: dict[str, dict[str, str]] = {}
    for index, rule in enumerate(rules):
        fields = ("action", "resource", "effect")
        if not isinstance(rule, Mapping) or not all(isinstance(rule.get(f), str) for f in fields):
            out.reader.fail(
                "permissions",
                f"entry {index + 1} is not an `{{action, resource, effect}}` rule of three texts",
                'write for example `- {action: shell, resource: "git *", effect: allow}`',
            )
        action = _ACTIONS.get(rule["action"], rule["action"])
        patterns = table.setdefault(action, {})
        patterns.pop(rule["resource"], None)  # a later rule for the same resource wins
        patterns[rule["resource"]] = rule["effect"]
    merged: dict[str, Any] = {}
    for action in _ASKED_BY_DEFAULT:
        if action not in table:
            merged[action] = "ask"
    for action, patterns in table.items():
        if "*" not in patterns and action in _ASKED_BY_DEFAULT:
            patterns = {"*": "ask", **patterns}
        merged[action] = patterns["*"] if list(patterns) == ["*"] else patterns
    return merged
