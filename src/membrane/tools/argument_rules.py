"""Argument rules as a definition's ``rules:`` block, the settings' ``[[rules]]`` or a start
request's ``rules`` write them, read into :class:`~membrane.tools.rules.PermissionRule` values.

One entry::

    - tool: send_money
      allow:                       # or ask:, or deny: (exactly one)
        amount: {max: 100}
        recipient: {one_of: [alice, bob]}
      reason: payments above 100 or to someone new need approval

Each argument takes a value (the argument must equal it) or a mapping of tests, all of which
must pass: ``equals``, ``glob``, ``regex`` (RE2, over the whole text), ``min``, ``max``,
``one_of``. A missing argument passes no test, unless the mapping also says
``when_present: true`` (``participants: {one_of: [...], when_present: true}``): then its tests
apply only to a call that supplies the argument. An argument that is a list passes an ``allow``
test when every item does, and a ``deny``/``ask`` test when any item does. The tool is a
built-in's name (any case) or another tool's exact name (a host tool, ``mcp__SERVER__TOOL``, an
extension's tool).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, NoReturn, cast

from membrane.errors import InvalidRequest, SettingsError
from membrane.json_types import JSONDict
from membrane.tools.rules import (
    CONDITION_TESTS,
    VERDICTS,
    WHEN_PRESENT,
    Condition,
    PermissionRule,
    Verdict,
)
from membrane.vocabulary import canonical_builtin_name

__all__ = ["read_argument_rules", "request_rules", "rule_mapping", "settings_rules"]

Fail = Callable[[str, str], NoReturn]
_Scalar = str | int | float | bool | None
_HINT = (
    "write each rule as `{tool: NAME, allow|ask|deny: {ARGUMENT: VALUE or {equals|glob|regex|"
    "min|max|one_of: ..., when_present: true|false}}, reason: TEXT}`"
)


def read_argument_rules(value: Any, *, source: str, fail: Fail) -> tuple[PermissionRule, ...]:
    """The rules of ``value`` (a list of mappings); ``fail(problem, hint)`` for a bad one."""
    if not isinstance(value, list):
        fail("must be a list of rules", _HINT)
    return tuple(_rule(entry, index, source, fail) for index, entry in enumerate(value))


@lru_cache(maxsize=64)
def settings_rules(texts: tuple[str, ...]) -> tuple[PermissionRule, ...]:
    """The settings' ``[[rules]]`` (``Settings.rules``) as rules; ``settings-invalid`` for a
    bad one."""

    def fail(problem: str, hint: str) -> NoReturn:
        raise SettingsError(f"[[rules]]: {problem}", path=None, key="rules", hint=hint)

    return read_argument_rules([json.loads(t) for t in texts], source="settings", fail=fail)


def request_rules(value: Any) -> tuple[PermissionRule, ...]:
    """A start request's ``rules`` (the same entries as a ``rules:`` block) as rules with
    source ``request``; ``invalid-request`` for a bad one."""

    def fail(problem: str, hint: str) -> NoReturn:
        raise InvalidRequest(f"rules: {problem}; {hint}", field="rules")

    return read_argument_rules(list(value), source="request", fail=fail)


def rule_mapping(rule: PermissionRule) -> JSONDict:
    """An argument rule written back as the entry it was read from."""
    tests: dict[str, Any] = {}
    for condition in rule.conditions:
        value = condition.value
        entry = tests.setdefault(condition.argument, {})
        entry[condition.test] = list(value) if isinstance(value, tuple) else value
        if condition.when_present:
            entry[WHEN_PRESENT] = True
    out: JSONDict = {"tool": rule.tool, rule.verdict: tests}
    if rule.reason:
        out["reason"] = rule.reason
    return out


def _rule(entry: Any, index: int, source: str, fail: Fail) -> PermissionRule:
    where = f"rule {index + 1}"
    if not isinstance(entry, Mapping):
        fail(f"{where} must be a mapping", _HINT)
    unknown = set(entry) - {"tool", "reason", *VERDICTS}
    if unknown:
        fail(f"{where} has unknown keys {sorted(unknown)}", _HINT)
    tool = entry.get("tool")
    if not isinstance(tool, str) or not tool.strip():
        fail(f"{where} names no `tool`", _HINT)
    verdicts = [v for v in VERDICTS if v in entry]
    if len(verdicts) != 1:
        fail(f"{where} must hold exactly one of `allow`, `ask` and `deny`", _HINT)
    verdict = cast(Verdict, verdicts[0])
    arguments = entry[verdict]
    if not isinstance(arguments, Mapping) or not arguments:
        fail(f"{where}: `{verdict}` must map each argument to its test", _HINT)
    reason = entry.get("reason", "")
    if not isinstance(reason, str):
        fail(f"{where}: `reason` must be text", _HINT)
    conditions: list[Condition] = []
    for argument, test in arguments.items():
        if not isinstance(argument, str) or not argument:
            fail(f"{where}: an argument name must be text", _HINT)
        conditions += _conditions(argument, test, f"{where}, `{argument}`", fail)
    name = canonical_builtin_name(tool.strip()) or tool.strip()
    text = f"{name}({', '.join(c.describe() for c in conditions)})"
    return PermissionRule(
        name,
        None,
        verdict,
        text=text,
        source=source,
        conditions=tuple(conditions),
        reason=reason.strip(),
    )


def _conditions(argument: str, test: Any, where: str, fail: Fail) -> list[Condition]:
    if not isinstance(test, Mapping):
        return [Condition(argument, "equals", _scalar(test, where, fail))]
    present = test.get(WHEN_PRESENT, False)
    if not isinstance(present, bool):
        fail(f"{where}: `{WHEN_PRESENT}` must be true or false", _HINT)
    if not set(test) - {WHEN_PRESENT}:
        fail(f"{where} has no test", _HINT)
    out: list[Condition] = []
    for kind, value in test.items():
        if kind == WHEN_PRESENT:
            continue
        if kind not in CONDITION_TESTS:
            fail(f"{where}: `{kind}` is not a test ({', '.join(CONDITION_TESTS)})", _HINT)
        if kind in ("min", "max"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                fail(f"{where}: `{kind}` must be a number", _HINT)
            out.append(Condition(argument, kind, value, present))
        elif kind in ("glob", "regex"):
            if not isinstance(value, str):
                fail(f"{where}: `{kind}` must be text", _HINT)
            if kind == "regex":
                _check_regex(value, where, fail)
            out.append(Condition(argument, kind, value, present))
        elif kind == "one_of":
            if not isinstance(value, list) or not value:
                fail(f"{where}: `one_of` must be a non-empty list", _HINT)
            items = tuple(_scalar(v, where, fail) for v in value)
            out.append(Condition(argument, kind, items, present))
        else:
            out.append(Condition(argument, kind, _scalar(value, where, fail), present))
    return out


def _scalar(value: Any, where: str, fail: Fail) -> _Scalar:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    fail(f"{where}: a value to compare must be text, a number, a boolean or null", _HINT)


def _check_regex(pattern: str, where: str, fail: Fail) -> None:
    import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

    options = re2.Options()
    options.log_errors = False
    try:
        re2.compile(pattern, options)
    except re2.error as exc:
        fail(f"{where}: {pattern!r} is not a pattern RE2 accepts ({exc})", _HINT)
