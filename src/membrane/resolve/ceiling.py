"""Ceilings: what a host or an ancestor took away, kept away for every descendant (DESIGN rule 13).

A ``Ceiling`` is one value: the most permissive permission mode still allowed, the tool tokens
denied, the tool sets a start request narrowed to, the argument rules that deny, and whether the
network is still allowed, each with the ``source`` that lowered it (``ceiling:<run or agent>``,
or ``deployment``). ``resolve()`` applies the ceiling its parent passes down; the runtime
computes the ceiling a run passes to its own children with :func:`ceiling_below` from the
run's effective authority and its start request, keeps it with the run and stores it in the
run's header, so a resumed run and a child started over the socket get the same one.

A ceiling only ever goes down: :func:`ceiling_below` keeps everything of the ceiling it starts
from and adds what the run itself took away; :meth:`Ceiling.meet` of two ceilings keeps
everything either took away. A definition's own grants still decide what a child gets within
the ceiling: a lead that lacks ``Write`` has not denied it, so it may start a writer it names.

The rules are carried as they are (``PermissionRule`` objects): the ceiling neither reads nor
matches them; a permission gate in front of the child's own enforces them.

Pure: no I/O.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Final

from membrane.agents.definition import UNSET, AgentDefinition
from membrane.errors import StoreError
from membrane.json_types import JSONDict
from membrane.resolve.roles import TokenSet
from membrane.resolve.tools import Selector
from membrane.tools.restriction import Restriction
from membrane.tools.rules import PERMISSION_MODES, Condition, PermissionRule
from membrane.tools.spec import Tool
from membrane.vocabulary import ASSIGNABLE_TOOLS

__all__ = [
    "MODE_ORDER",
    "Ceiling",
    "CeilingRestriction",
    "ceiling_below",
    "ceiling_label",
    "ceiling_of_run",
    "common_read_roots",
    "definition_read_roots",
    "lower_mode",
    "mode_rank",
]

#: The permission modes from the most restrictive to the least: a child's effective mode is the
#: lowest of its own and its ceiling's. ``dontAsk`` (every ask refused) sits between ``plan``
#: (every mutating tool left out) and ``default`` (every ask goes to the host).
MODE_ORDER: Final = ("plan", "dontAsk", "default", "acceptEdits", "bypassPermissions")
#: The deployment's ``permission_mode`` values that cap the whole tree; the others are only
#: the top level's mode for ``inherit`` (a definition may still name a higher one).
_HOST_CAPS: Final = frozenset({"plan", "dontAsk"})
_TOP: Final = MODE_ORDER[-1]


def mode_rank(mode: str) -> int:
    """The place of ``mode`` in ``MODE_ORDER`` (an unknown mode ranks as ``default``)."""
    try:
        return MODE_ORDER.index(mode)
    except ValueError:
        return MODE_ORDER.index("default")


def lower_mode(mode: str, ceiling: Ceiling) -> tuple[str, str | None]:
    """``mode`` held under ``ceiling``: the lower of the two, and the ceiling's source when
    the ceiling decided (``None`` when ``mode`` stands)."""
    if mode_rank(ceiling.mode) < mode_rank(mode):
        return ceiling.mode, ceiling.mode_source
    return mode, None


@dataclass(frozen=True, slots=True)
class Ceiling:
    """What a child and all its descendants may at most have (see the module docstring).

    ``denied``: ``(token, source)`` pairs in the tokens of ``tools``/``disallowed_tools``
    (built-in names, exact host/extension/MCP names, ``ext:NAME``, ``ext:NAME/TOOL``,
    ``mcp__SERVER__TOOL``, ``mcp__SERVER__*``); ``allowed``: ``(names, source)`` pairs, each a
    set a start request's ``toolFilter`` narrowed to (a tool must be in every one); ``rules``:
    ``(rule, source)`` pairs of rules that only take away (``deny``/``ask`` rules and argument
    rules: ``_restricts``); ``network``: ``False`` once an
    ancestor denied it.
    """

    mode: str = _TOP
    mode_source: str | None = None
    denied: tuple[tuple[str, str], ...] = ()
    allowed: tuple[tuple[tuple[str, ...], str], ...] = ()
    rules: tuple[tuple[PermissionRule, str], ...] = ()
    network: bool = True
    network_source: str | None = None
    #: The folder every write must stay inside (an ancestor's worktree), or ``None``: a child
    #: that works in the main checkout works here instead.
    root: str | None = None
    root_source: str | None = None
    #: The folders a definition may name as its own read roots (``read_paths``; real absolute
    #: paths): a root must lie inside one of them. ``None``: no ancestor named read roots of
    #: its own to hold a child under (the top of the tree).
    read_roots: tuple[str, ...] | None = None
    read_roots_source: str | None = None

    @classmethod
    def from_settings(cls, permission_mode: str) -> Ceiling:
        """The host's ceiling: the deployment's ``permission_mode`` caps the tree when it is
        ``plan`` or ``dontAsk``; otherwise nothing is taken away at the top."""
        mode = _mode_name(permission_mode)
        if mode in _HOST_CAPS:
            return cls(mode=mode, mode_source="deployment")
        return cls()

    @property
    def empty(self) -> bool:
        """Nothing is taken away."""
        return self == _NOTHING

    def reason(self, tool: Tool, *, is_global: bool = True) -> str | None:
        """``ceiling:<source>`` when the ceiling keeps ``tool`` out, else ``None``. A denial
        holds for every tool; a ``toolFilter``'s set, like the filter itself, only for global
        tools (``is_global``), never for a child's own delegation tools."""
        for tokens, source in _denied_sets(self.denied):
            if tokens.matches(tool):
                return ceiling_label(source)
        if not is_global:
            return None
        for names, source in self.allowed:
            if not _token_set(names).matches(tool):
                return ceiling_label(source)
        return None

    def meet(self, other: Ceiling) -> Ceiling:
        """Everything ``self`` or ``other`` takes away."""
        mode, mode_source = self.mode, self.mode_source
        if mode_rank(other.mode) < mode_rank(mode):
            mode, mode_source = other.mode, other.mode_source
        network, network_source = self.network, self.network_source
        if network and not other.network:
            network, network_source = False, other.network_source
        root, root_source = self.root, self.root_source
        if other.root is not None and (root is None or _inside(other.root, root)):
            root, root_source = other.root, other.root_source
        read_roots, read_roots_source = self.read_roots, self.read_roots_source
        if other.read_roots is not None:
            read_roots_source = other.read_roots_source
            read_roots = (
                other.read_roots
                if read_roots is None
                else common_read_roots(read_roots, other.read_roots)
            )
        return Ceiling(
            mode=mode,
            mode_source=mode_source,
            denied=_union(self.denied, other.denied),
            allowed=_union(self.allowed, other.allowed),
            rules=_union(self.rules, other.rules),
            network=network,
            network_source=network_source,
            root=root,
            root_source=root_source,
            read_roots=read_roots,
            read_roots_source=read_roots_source,
        )

    def holds_read_root(self, root: str) -> bool:
        """Whether a definition below this ceiling may name the (real) read root ``root``."""
        return self.read_roots is None or any(_inside(root, outer) for outer in self.read_roots)

    @property
    def held_rules(self) -> tuple[PermissionRule, ...]:
        """The rules, in the order they were taken away (what the gate enforces)."""
        return tuple(rule for rule, _ in self.rules)

    def to_json(self) -> JSONDict:
        """The ceiling as ``explain``, the ``published`` event and a run's header hold it."""
        return {
            "mode": {"value": self.mode, "source": ceiling_label(self.mode_source)},
            "denied": [{"tool": token, "source": ceiling_label(s)} for token, s in self.denied],
            "allowed": [
                {"tools": list(names), "source": ceiling_label(s)} for names, s in self.allowed
            ],
            "rules": [{**rule.to_json(), "ceiling": ceiling_label(s)} for rule, s in self.rules],
            "network": {"value": self.network, "source": ceiling_label(self.network_source)},
            "root": {"value": self.root, "source": ceiling_label(self.root_source)},
            "read_roots": {
                "value": None if self.read_roots is None else list(self.read_roots),
                "source": ceiling_label(self.read_roots_source),
            },
        }

    @classmethod
    def from_json(cls, data: object, *, where: str) -> Ceiling:
        """A ceiling ``to_json`` wrote (a run's header); ``StoreError`` when it is not one:
        a ceiling that cannot be read again must never be read as no ceiling."""
        try:
            return _from_json(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StoreError(
                f"{where} holds a ceiling that cannot be read ({type(exc).__name__}: {exc}); "
                "the run cannot be started under it",
                where=where,
            ) from exc


_NOTHING: Final = Ceiling()


def ceiling_label(source: str | None) -> str | None:
    """How a source is shown: ``ceiling:<run or agent>``, ``deployment``, or
    ``settings:<file>`` (a product's settings file)."""
    if source is None:
        return None
    if source == "deployment" or source.startswith(("ceiling:", "settings:")):
        return source
    return f"ceiling:{source}"


def _unlabel(source: object) -> str | None:
    if source is None:
        return None
    if not isinstance(source, str):
        raise TypeError(f"a source must be a string, got {source!r}")
    return source.removeprefix("ceiling:")


def _union(first: tuple[Any, ...], second: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys((*first, *second)))


@functools.lru_cache(maxsize=512)
def _token_set(tokens: tuple[str, ...]) -> TokenSet:
    return TokenSet.parse(tokens, key="ceiling")


def _denied_sets(denied: tuple[tuple[str, str], ...]) -> tuple[tuple[TokenSet, str], ...]:
    by_source: dict[str, list[str]] = {}
    for token, source in denied:
        by_source.setdefault(source, []).append(token)
    return tuple((_token_set(tuple(tokens)), source) for source, tokens in by_source.items())


def _mode_name(value: object) -> str:
    text = value if isinstance(value, str) else "default"
    for mode in PERMISSION_MODES:
        if text.lower() == mode.lower():
            return mode
    return "default"


def _from_json(data: object) -> Ceiling:
    if not isinstance(data, Mapping):
        raise TypeError(f"expected an object, got {type(data).__name__}")
    mode = data["mode"]
    network = data["network"]
    root = data.get("root") or {"value": None, "source": None}
    if root["value"] is not None and not isinstance(root["value"], str):
        raise ValueError(f"root {root['value']!r}")
    read_roots = data.get("read_roots") or {"value": None, "source": None}
    if read_roots["value"] is not None and not all(
        isinstance(item, str) for item in read_roots["value"]
    ):
        raise ValueError(f"read_roots {read_roots['value']!r}")
    rules = []
    for item in data["rules"]:
        conditions = tuple(
            Condition(
                argument=str(c["argument"]),
                test=str(c["test"]),
                value=tuple(c["value"]) if isinstance(c["value"], list) else c["value"],
                when_present=c.get("when_present") is True,
            )
            for c in item.get("conditions", ())
        )
        rule = PermissionRule(
            tool=str(item["tool"]),
            pattern=item["pattern"],
            verdict=item["verdict"],
            text=str(item["rule"]),
            source=str(item["source"]),
            conditions=conditions,
            reason=str(item.get("reason", "")),
        )
        rules.append((rule, _unlabel(item["ceiling"]) or ""))
    if mode["value"] not in MODE_ORDER or not isinstance(network["value"], bool):
        raise ValueError(f"mode {mode['value']!r} / network {network['value']!r}")
    return Ceiling(
        mode=mode["value"],
        mode_source=_unlabel(mode["source"]),
        denied=tuple((str(i["tool"]), _unlabel(i["source"]) or "") for i in data["denied"]),
        allowed=tuple(
            (tuple(str(n) for n in i["tools"]), _unlabel(i["source"]) or "")
            for i in data["allowed"]
        ),
        rules=tuple(rules),
        network=network["value"],
        network_source=_unlabel(network["source"]),
        root=root["value"],
        root_source=_unlabel(root["source"]),
        read_roots=None if read_roots["value"] is None else tuple(read_roots["value"]),
        read_roots_source=_unlabel(read_roots["source"]),
    )


def common_read_roots(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    """The folders both ``first`` and ``second`` reach: each root of one inside a root of the
    other."""
    both = [root for root in first if any(_inside(root, outer) for outer in second)]
    both += [root for root in second if any(_inside(root, outer) for outer in first)]
    return tuple(dict.fromkeys(both))


def ceiling_below(
    ceiling: Ceiling,
    *,
    by: str,
    mode: str,
    disallowed: Iterable[str] = (),
    excluded_extensions: Iterable[str] = (),
    rules: Iterable[PermissionRule] = (),
    network: bool | None = None,
    filter_allow: Iterable[str] | None = None,
    filter_deny: Iterable[str] = (),
    root: str | None = None,
    read_roots: tuple[str, ...] = (),
) -> Ceiling:
    """The ceiling a run ``by`` passes to its children: ``ceiling`` (the one it runs under)
    lowered by what the run took away: its effective ``mode``, its ``disallowed_tools``
    tokens (the rules among them go in ``rules``), the extensions it excluded, the ``rules``
    that only take away (``deny`` and ``ask`` rules, argument rules of any verdict), an
    explicit ``network: false``, its start request's ``toolFilter``
    (``filter_allow``/``filter_deny``), ``root``, the worktree it works in, and
    ``read_roots``, its definition's own read roots (real paths): a child's definition may
    name a read root only inside one of them."""
    denied = [(token, by) for token in _deny_tokens(disallowed)]
    denied += [(f"ext:{name}", by) for name in excluded_extensions if name.strip()]
    denied += [(name, by) for name in filter_deny]
    allowed = () if filter_allow is None else ((tuple(sorted(filter_allow)), by),)
    own = Ceiling(
        mode=mode,
        mode_source=by,
        denied=tuple(dict.fromkeys(denied)),
        allowed=allowed,
        rules=tuple((rule, by) for rule in rules if _restricts(rule)),
        network=network is not False,
        network_source=by if network is False else None,
        root=root,
        root_source=by if root is not None else None,
        read_roots=read_roots,
        read_roots_source=by,
    )
    return ceiling.meet(own)


def ceiling_of_run(
    ceiling: Ceiling,
    definition: AgentDefinition,
    *,
    by: str,
    mode: str,
    tool_filter: Restriction | None = None,
    root: str | None = None,
    request_rules: Iterable[PermissionRule] = (),
) -> Ceiling:
    """:func:`ceiling_below` for a run of ``definition`` that runs under ``ceiling`` in the
    effective ``mode``, started with ``tool_filter`` and the argument rules
    ``request_rules``, working in the worktree ``root`` (if any)."""
    excluded = definition.exclude_extensions
    return ceiling_below(
        ceiling,
        by=by,
        mode=mode,
        disallowed=() if definition.disallowed_tools is UNSET else definition.disallowed_tools,
        excluded_extensions=excluded if isinstance(excluded, tuple) else (),
        rules=(*definition.rules, *request_rules),
        network=definition.network if isinstance(definition.network, bool) else None,
        filter_allow=None if tool_filter is None else tool_filter.allow,
        filter_deny=() if tool_filter is None else sorted(tool_filter.deny),
        root=root,
        read_roots=definition_read_roots(definition),
    )


def definition_read_roots(definition: AgentDefinition) -> tuple[str, ...]:
    """The real absolute folders a definition's ``read_paths`` name (``~`` expanded)."""
    named = definition.read_paths
    if not isinstance(named, tuple):
        return ()
    return tuple(dict.fromkeys(os.path.realpath(os.path.expanduser(p)) for p in named))


def _inside(inner: str, outer: str) -> bool:
    return PurePosixPath(inner).is_relative_to(PurePosixPath(outer))


def _restricts(rule: PermissionRule) -> bool:
    """Whether ``rule`` only ever takes away: a ``deny`` or ``ask`` rule, or an argument rule
    (conditions over a call's arguments never grant a tool, so even an ``allow`` one narrows).
    A rule that grants (``Bash(git log:*)`` in ``tools``) is the run's own grant, not a
    ceiling."""
    return not rule.grants and (rule.verdict != "allow" or bool(rule.conditions))


def _deny_tokens(tokens: Iterable[str]) -> list[str]:
    """The ``disallowed_tools`` tokens that name tools (``*``/``all``: every assignable
    built-in); rules (``Bash(rm:*)``) travel as rules, and a malformed selector, which the
    definition's own resolution reports and ignores, denies nothing here either."""
    out: list[str] = []
    for raw in tokens:
        token = raw.strip()
        low = token.lower()
        if not token or low in ("none", "inherit") or "(" in token:
            continue
        if low in ("*", "all"):
            out += ASSIGNABLE_TOOLS
        elif (low.startswith("ext:") or token.startswith("mcp__")) and Selector.parse(
            token
        ) is None:
            continue
        else:
            out.append(token)
    return out


class CeilingRestriction:
    """A ceiling's tool part as a live restriction on a child's scope (a ``ToolPredicate``):
    a tool registered after the start is held to the ceiling as well."""

    __slots__ = ("ceiling", "label")

    def __init__(self, ceiling: Ceiling) -> None:
        self.ceiling = ceiling
        self.label = "ceiling"

    def __repr__(self) -> str:
        return f"CeilingRestriction({len(self.ceiling.denied)} denied)"

    def admits(self, tool: Tool) -> bool:
        return self.ceiling.reason(tool) is None

    def stamp(self) -> Hashable:
        return ("ceiling", id(self))
