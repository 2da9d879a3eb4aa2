"""The child's tool decision as one live predicate.

``ToolPlan`` is what the definition says, parsed once. ``DefinitionRestriction`` answers for any
tool, now or later, by its name and origin: the builtin set, the loaded extensions and their
selectors, and (for ``inherit``) whatever the parent's live catalog holds when asked. The
explain output (``callable``/``left_out``) is this same predicate applied to the known tools.

Case-insensitivity belongs to the tokens in files (DESIGN rule 2): ``read`` in ``tools`` means
``Read``. A tool in a catalog is a builtin only when its origin is ``builtin`` and its name is the
canonical spelling, so a host tool ``read`` or a server action ``BASH`` is never mistaken for one.
Nothing is admitted because it is ``reserved``: reserved tools (``run_code``) are scope-local and
installed by the runtime outside every filter, so the resolver neither classifies nor inherits them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from membrane.agents.definition import UNSET, AgentDefinition
from membrane.config.values import Settings
from membrane.errors import ToolNotVisible
from membrane.extensions.select import ExtensionSelection, extension_of
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool
from membrane.vocabulary import (
    ASK_PARENT_TOOL,
    ASSIGNABLE_TOOLS,
    DELEGATION_TOOLS,
    INHERIT_DENY_TOOLS,
    MUTATING_DELEGATION_TOOLS,
    WRITE_TOOLS,
    canonical_builtin_name,
)

__all__ = [
    "LEFT_OUT_REASONS",
    "DefinitionRestriction",
    "Selector",
    "ToolPlan",
    "builtin_of",
    "delegation_placeholder",
    "describe_tools",
    "plan_tools",
]

LEFT_OUT_REASONS: Final = (
    "disallowed_tools",
    "not selected",
    "not asked for",
    "extension not loaded",
    "extension excluded",
    "inherit deny list",
    "not assignable",
    "isolated",
    "depth cap",
    "toolFilter",
    "role",
    "no such MCP server",
    "permission mode plan",
)


def builtin_of(tool: Tool) -> str | None:
    """The builtin ``tool`` is: its origin is ``builtin`` and its name the canonical spelling."""
    name = tool.name
    return name if tool.origin == "builtin" and canonical_builtin_name(name) == name else None


@dataclass(frozen=True, slots=True)
class Selector:
    """``ext:NAME``, ``ext:NAME/TOOL``, ``mcp__SERVER__TOOL`` or ``mcp__SERVER__*``.

    ``tool`` is ``None`` for all tools of the extension. Names match exactly.
    """

    extension: str
    tool: str | None
    text: str

    @classmethod
    def parse(cls, token: str) -> Selector | None:
        text = token.strip()
        if text[:4].lower() == "ext:":
            name, _, tool = text[4:].partition("/")
            if not name.strip():
                return None
            return cls(name.strip(), tool.strip() or None, text)
        if text.startswith("mcp__"):
            parts = text.split("__", 2)
            if len(parts) != 3 or not parts[1] or not parts[2]:
                return None
            return cls(parts[1], None if parts[2] == "*" else text, text)
        return None

    def matches(self, tool: Tool, extension: str | None) -> bool:
        if extension != self.extension:
            return False
        if self.tool is None:
            return True
        return tool.name in (self.tool, f"mcp__{extension}__{self.tool}")


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """The definition's tool fields, parsed. Everything here is fixed at resolution time; only
    the parent's catalog (for ``inherit``) and the registry's contents stay live."""

    builtins: frozenset[str]
    #: Never true for a builtin definition, under ``isolated`` or from ``default_tools``.
    inherit: bool
    selectors: tuple[Selector, ...]
    #: Names written in ``tools`` that are not assignable (``Skill``, ``Task`` ...).
    named: frozenset[str]
    disallowed_builtins: frozenset[str]
    #: Every ``disallowed_tools`` token as written: any tool of exactly that name is disallowed.
    disallowed_names: frozenset[str]
    disallowed_selectors: tuple[Selector, ...]
    extensions: ExtensionSelection
    isolated: bool
    #: ``None`` when the delegation tools are visible; otherwise why not (``isolated``,
    #: ``depth cap``, ``disallowed_tools``), or ``"off"`` without ``allowed_subagents``.
    delegation: str | None
    #: Where the selecting tokens came from: ``tools`` or ``default_tools``.
    field: str = "tools"
    #: Whether the file writes ``extensions`` (or ``mcp_servers``): only then does "no
    #: selector" admit every tool of the loaded extensions (DESIGN rule 2).
    extensions_written: bool = False
    #: Built-ins that only permission rules grant: a call no rule matches asks.
    by_rules: frozenset[str] = frozenset()
    #: ``permission: plan``: every mutating tool is left out.
    plan_mode: bool = False
    #: ``may_ask_parent: true``: the child's own ``AskParent`` tool is admitted.
    ask_parent: bool = False

    def is_disallowed(self, tool: Tool, extension: str | None) -> bool:
        if builtin_of(tool) in self.disallowed_builtins:
            return True
        if tool.name in self.disallowed_names:
            return True
        return any(s.matches(tool, extension) for s in self.disallowed_selectors)


@dataclass(frozen=True, slots=True)
class _Tokens:
    builtins: frozenset[str]
    inherit: bool
    selectors: tuple[Selector, ...]
    named: frozenset[str]
    written: frozenset[str] = frozenset()
    field: str = "tools"


def _parse_tokens(tokens: Iterable[str], *, field: str, warnings: list[str]) -> _Tokens:
    builtins: set[str] = set()
    selectors: list[Selector] = []
    named: set[str] = set()
    written: set[str] = set()
    inherit = False
    for raw in tokens:
        token = raw.strip()
        low = token.lower()
        if not token or low == "none":
            continue
        written.add(token)
        if low in ("*", "all"):
            builtins.update(ASSIGNABLE_TOOLS)
        elif low == "inherit":
            inherit = True
        elif low.startswith("ext:") or token.startswith("mcp__"):
            selector = Selector.parse(token)
            if selector is None:
                warnings.append(f"{field}: malformed selector {token!r} is ignored")
            else:
                selectors.append(selector)
        elif (name := canonical_builtin_name(token)) is not None:
            builtins.add(name)
        elif "(" in token and (name := canonical_builtin_name(token.partition("(")[0])) is not None:
            builtins.add(name)
            warnings.append(f"{field}: {token!r} grants {name}; argument patterns are not enforced")
        else:
            named.add(token)
    return _Tokens(
        frozenset(builtins), inherit, tuple(selectors), frozenset(named), frozenset(written), field
    )


def _default_tokens(settings: Settings, *, warnings: list[str]) -> _Tokens:
    """``default_tools`` without ``inherit``: only a definition opts into the parent's tools
    (seed 000: builtins do not opt in; documents that omit ``tools`` get the deployment's
    default, read-only unless it names more builtins). Selectors are kept: they only narrow
    which tools of loaded extensions surface, so dropping one would widen the grant."""
    tokens = _parse_tokens(settings.default_tools, field="default_tools", warnings=warnings)
    if tokens.inherit:
        warnings.append(
            "default_tools: 'inherit' is ignored: only a definition opts into the parent's "
            "tools, by writing tools: inherit"
        )
    return _Tokens(
        tokens.builtins, False, tokens.selectors, tokens.named, tokens.written, "default_tools"
    )


def plan_tools(
    definition: AgentDefinition,
    *,
    settings: Settings,
    extensions: ExtensionSelection,
    isolated: bool,
    delegation: str | None,
    has_memory: bool,
    parent_tools: Mapping[str, Tool],
    plan_mode: bool = False,
) -> tuple[ToolPlan, list[str]]:
    """Steps 1-3 and 5 of the tool order; the caller decides delegation (step 4).

    ``parent_tools`` is the parent's catalog now; it only decides whether memory is
    read-write for an inheriting child. ``inherit`` survives only when the definition itself
    writes it, is not a builtin and is not ``isolated``.
    """
    warnings: list[str] = []
    written = definition.tools
    if written is UNSET:
        tokens = _default_tokens(settings, warnings=warnings)
    else:
        tokens = _parse_tokens(written, field="tools", warnings=warnings)
    if tokens.inherit and (definition.builtin or isolated):
        why = (
            "builtin definitions never inherit"
            if definition.builtin
            else "isolated: true allows builtins only"
        )
        rest = [
            t
            for t in (written if isinstance(written, tuple) else ())
            if t.strip().lower() != "inherit"
        ]
        if any(t.strip() for t in rest):
            warnings.append(f"tools: inherit is ignored ({why}); the other tokens still apply")
            tokens = _parse_tokens(rest, field="tools", warnings=[])
        else:
            tokens = _default_tokens(settings, warnings=warnings)
            warnings.append(
                f"tools: inherit is ignored ({why}); the default tools "
                f"({', '.join(sorted(tokens.builtins)) or 'none'}) apply"
            )
    if isolated and tokens.selectors:
        warnings.append(
            "isolated: true loads no extensions; the selectors "
            f"{', '.join(s.text for s in tokens.selectors)} select nothing"
        )
    inherit = tokens.inherit and not definition.builtin and not isolated

    disallowed = _parse_tokens(
        () if definition.disallowed_tools is UNSET else definition.disallowed_tools,
        field="disallowed_tools",
        warnings=warnings,
    )
    builtins = set(tokens.builtins)
    # A rule in ``tools`` (``Bash(git log:*)``) grants its tool for the calls it matches.
    by_rules = {
        rule.tool
        for rule in definition.rules
        if rule.grants and rule.tool in ASSIGNABLE_TOOLS and rule.tool not in builtins
    }
    builtins |= by_rules
    if has_memory:
        inherited = {b for t in parent_tools.values() if (b := builtin_of(t))} if inherit else set()
        writes = ((builtins | inherited) & WRITE_TOOLS) - disallowed.builtins
        builtins |= {"Read", "Write", "Edit"} if writes else {"Read"}
    # ``mcp_servers: [NAME]`` selects every tool of NAME, as ``mcp__NAME__*`` in tools would.
    servers = definition.mcp_servers if isinstance(definition.mcp_servers, Mapping) else {}
    implied = tuple(Selector(name, None, f"mcp__{name}__*") for name in servers)
    plan = ToolPlan(
        builtins=frozenset(builtins),
        inherit=inherit,
        selectors=(*tokens.selectors, *implied),
        named=tokens.named,
        disallowed_builtins=disallowed.builtins,
        disallowed_names=disallowed.written,
        disallowed_selectors=disallowed.selectors,
        extensions=extensions,
        isolated=isolated,
        delegation=delegation,
        field=tokens.field,
        extensions_written=definition.extensions is not UNSET or bool(servers),
        by_rules=frozenset(by_rules),
        plan_mode=plan_mode,
        ask_parent=definition.may_ask_parent is True,
    )
    return plan, warnings


class DefinitionRestriction:
    """The ``definition`` restriction installed on a child's scope (a ``ToolPredicate``).

    Live: it keeps no list of admitted names. A tool that a loaded extension registers later
    is admitted by its origin; with ``inherit`` a tool is admitted while the parent's live
    catalog (``parent_tools()``) holds it. ``stamp()`` follows the parent catalog, so a cached
    view is re-resolved when the parent's catalog changes.
    """

    __slots__ = ("_admitted", "_cache", "label", "parent_stamp", "parent_tools", "plan")

    def __init__(
        self,
        plan: ToolPlan,
        *,
        parent_tools: Callable[[], Mapping[str, Tool]],
        parent_stamp: Callable[[], Hashable] | None = None,
        label: str = "definition",
    ) -> None:
        self.plan = plan
        self.parent_tools = parent_tools
        self.parent_stamp = parent_stamp
        self.label = label
        self._cache: tuple[Hashable, frozenset[str]] | None = None
        #: The last ``admitted_names``: (registry, its version, the parent's stamp, names).
        self._admitted: tuple[ToolRegistry, int, Hashable, frozenset[str]] | None = None

    def __repr__(self) -> str:
        return f"DefinitionRestriction(label={self.label!r}, inherit={self.plan.inherit})"

    def stamp(self) -> Hashable:
        if not self.plan.inherit:
            return ("definition", id(self))
        return ("definition", id(self), self._parent_names()[0])

    def admits(self, tool: Tool) -> bool:
        return self.reason(tool) is None

    def admitted_names(self, registry: ToolRegistry) -> frozenset[str]:
        """Exactly the registry's names that ``admits`` accepts now (``NamedAdmission``).

        ``reason`` decides, as for ``admits``, but is asked only of the candidates a tool can
        be admitted as: a builtin the plan names, a delegation or host tool it names, a name
        the parent's catalog holds (``inherit``), or a tool of an extension a selector (or an
        unselective ``extensions``) reaches, found in the registry's per-version index of
        names by extension. A tool no rule could admit is never looked at. The answer is
        kept while the registry's version and the parent's catalog stay the same (the
        children of one resolved definition share this restriction, and so the answer).
        """
        plan = self.plan
        stamp = self._parent_names()[0] if plan.inherit else None
        known = self._admitted
        if (
            known is not None
            and known[0] is registry
            and known[1] == registry.version
            and known[2] == stamp
        ):
            return known[3]
        version = registry.version
        table = registry.table()
        candidates: set[str] = {*plan.builtins, *DELEGATION_TOOLS, *plan.named}
        if plan.inherit:
            candidates |= self._parent_names()[1]
        if not plan.isolated:
            by_extension = registry.index(_BY_EXTENSION, _names_by_extension)
            if not plan.selectors and not plan.inherit and plan.extensions_written:
                for names in by_extension.values():
                    candidates |= names
            for selector in plan.selectors:
                if selector.tool is None:
                    candidates |= by_extension.get(selector.extension, frozenset())
                else:
                    candidates.add(selector.tool)
                    candidates.add(f"mcp__{selector.extension}__{selector.tool}")
        admitted = frozenset(
            name
            for name in candidates
            if (tool := table.get(name)) is not None and self.reason(tool) is None
        )
        self._admitted = (registry, version, stamp, admitted)
        return admitted

    def _parent_names(self) -> tuple[Hashable, frozenset[str]]:
        """The parent's inheritable names: its catalog without its reserved tools."""
        if self.parent_stamp is None:
            names = _inheritable(self.parent_tools())
            return names, names
        stamp = self.parent_stamp()
        cached = self._cache
        if cached is not None and cached[0] == stamp:
            return cached
        entry = (stamp, _inheritable(self.parent_tools()))
        self._cache = entry
        return entry

    def _inherited(self, name: str) -> bool:
        return self.plan.inherit and name in self._parent_names()[1]

    def reason(self, tool: Tool) -> str | None:
        """``None`` when the tool is admitted, otherwise the one reason it is left out."""
        plan = self.plan
        extension = extension_of(tool)
        if plan.is_disallowed(tool, extension):
            return "disallowed_tools"
        if plan.plan_mode and tool.mutating:
            return "permission mode plan"
        name = tool.name
        if extension is not None:
            return self._extension_reason(tool, extension)
        builtin = builtin_of(tool)
        if builtin is not None:
            if builtin in plan.builtins or self._inherited(name):
                return None
            return "not selected"
        if name in DELEGATION_TOOLS and plan.delegation != "off":
            return plan.delegation
        if name == ASK_PARENT_TOOL:
            # Only the child's own (``may_ask_parent``), never a parent's, inherited or not.
            return None if plan.ask_parent else "may_ask_parent is not true"
        if plan.isolated:
            return "isolated"
        if tool.origin == "host" and name in plan.named:
            return None  # a host's own tool, granted by its exact name in `tools`
        if plan.inherit:
            if name in INHERIT_DENY_TOOLS:
                return "inherit deny list"
            if self._inherited(name):
                return None
        return "not assignable" if name in plan.named else "not selected"

    def _extension_reason(self, tool: Tool, extension: str) -> str | None:
        plan = self.plan
        if plan.isolated:
            return "isolated"
        inherited = self._inherited(tool.name)
        state = plan.extensions.state(extension, via_parent=inherited)
        if state == "excluded":
            return "extension excluded"
        if state == "not loaded":
            return "extension not loaded"
        if inherited:
            return "inherit deny list" if tool.name in INHERIT_DENY_TOOLS else None
        if any(s.matches(tool, extension) for s in plan.selectors):
            return None
        if not plan.selectors and not plan.inherit:
            # DESIGN rule 2: seed 003's "no selector means every loaded extension's tools"
            # holds only where the file writes ``extensions`` (or ``mcp_servers``); a
            # definition that omits it (and ``tools`` with it, seed 000's read-only default)
            # must ask by selector.
            if plan.extensions_written:
                return None
            mcp = tool.origin.startswith("mcp:") or tool.name.startswith("mcp__")
            return "not selected" if mcp else "not asked for"
        # DESIGN rule 3: an inheriting child gets the parent's live catalog plus what it
        # declares, never a loaded extension's tool that the parent lacks.
        return "not selected"


#: The key of the registry's index of global tool names by extension (``extension_of``).
_BY_EXTENSION: Final = "resolve.names-by-extension"


def _names_by_extension(tools: Mapping[str, Tool]) -> dict[str, frozenset[str]]:
    grouped: dict[str, set[str]] = {}
    for name, tool in tools.items():
        extension = extension_of(tool)
        if extension is not None:
            grouped.setdefault(extension, set()).add(name)
    return {extension: frozenset(names) for extension, names in grouped.items()}


def _inheritable(tools: Mapping[str, Tool]) -> frozenset[str]:
    return frozenset(name for name, tool in tools.items() if not tool.reserved)


def describe_tools(definition: AgentDefinition, settings: Settings) -> str:
    """One catalog line's worth: ``inherit (+Bash)`` rather than every inherited name, and
    whether extension tools come on top (they do unless the definition selects or excludes)."""
    return _describe_selected(definition, settings) + _describe_extensions(definition)


def _describe_selected(definition: AgentDefinition, settings: Settings) -> str:
    tools = definition.tools
    if tools is UNSET:
        default = [t for t in settings.default_tools if canonical_builtin_name(t) is not None]
        return f"default ({', '.join(canonical_builtin_name(t) or t for t in default) or 'none'})"
    if not tools:
        return "none"
    if definition.inherits_tools and not definition.builtin:
        extras = [t for t in tools if t.lower() != "inherit"]
        return f"inherit (+{', '.join(extras)})" if extras else "inherit"
    return ", ".join(canonical_builtin_name(t) or t for t in tools)


def _describe_extensions(definition: AgentDefinition) -> str:
    if definition.isolated is True or definition.extensions is False:
        return ""
    if definition.inherits_tools and not definition.builtin:
        return ""  # the parent's catalog carries its extension tools already
    tokens = definition.tools if isinstance(definition.tools, tuple) else ()
    if any(t.startswith(("ext:", "mcp__")) for t in tokens):
        return ""  # the selectors are in the list already
    if definition.extensions is UNSET:
        return ""  # DESIGN rule 2: extension tools only when the file asks for them
    if isinstance(definition.extensions, tuple) and "*" not in definition.extensions:
        return f" + the tools of extensions {', '.join(definition.extensions)}"
    return " + the tools of every loaded extension"


def delegation_placeholder(name: str) -> Tool:
    """A name-only stand-in used to classify a tool the runtime supplies (the delegation tools);
    the resolver never runs it, and the runtime installs the real one."""

    async def _absent(arguments: Mapping[str, Any], context: Any) -> Any:
        raise ToolNotVisible(f"tool {name!r} is not available here", name=name)

    return Tool(
        name=name,
        description="",
        input_schema={"type": "object"},
        handler=_absent,
        mutating=name in MUTATING_DELEGATION_TOOLS,
    )
