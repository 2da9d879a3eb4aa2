"""``RoleRestriction``: a trusted caller role (``[roles.NAME]``) as a live tool predicate.

A role names its tool set in ``allow`` (when given, only what it names) and ``deny`` (never
these), with the tokens a definition's ``tools`` uses (DESIGN rule 2): built-in names, any case
(``read`` is ``Read``); host, extension and MCP tool names, exactly; ``ext:NAME``,
``ext:NAME/TOOL``, ``mcp__SERVER__TOOL`` and ``mcp__SERVER__*``, which match by the tool's
origin, so a tool an extension or server registers later is in the role's set at once. A role
is thus its base tools plus its elevated sets, e.g.
``allow = ["Read", "Glob", "Grep", "ext:operator", "mcp__linear__*"]``.

``permissions`` names the requirements (``Tool.requires``, e.g. ``computer-use``) its callers
may use: a tool that requires anything else is hidden from the role even when ``allow``
names it.

Pure: no I/O. The predicate keeps no list of admitted names, so its ``stamp`` never moves.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from membrane.config.values import RoleSpec
from membrane.errors import SettingsError
from membrane.extensions.select import extension_of
from membrane.resolve.tools import Selector, builtin_of
from membrane.tools.registry import ToolRegistry
from membrane.tools.restriction import Restriction
from membrane.tools.spec import Tool
from membrane.vocabulary import DELEGATION_TOOLS, canonical_builtin_name

__all__ = ["RoleRestriction", "TokenSet"]


@dataclass(frozen=True, slots=True)
class TokenSet:
    """A set of tool tokens (a role's ``allow`` or ``deny``, a ceiling's denials), parsed."""

    builtins: frozenset[str]
    names: frozenset[str]
    selectors: tuple[Selector, ...]
    #: The plain names as a registry spells them (builtins canonical), for ``validate``.
    plain: tuple[str, ...] = ()

    @classmethod
    def parse(cls, tokens: Iterable[str], *, key: str) -> TokenSet:
        builtins: set[str] = set()
        names: set[str] = set()
        selectors: list[Selector] = []
        plain: list[str] = []
        for token in tokens:
            text = token.strip()
            if text[:4].lower() == "ext:" or text.startswith("mcp__"):
                selector = Selector.parse(text)
                if selector is None:
                    raise SettingsError(
                        f"`{key}` has {text!r}, which is not a selector: write ext:NAME, "
                        "ext:NAME/TOOL, mcp__SERVER__TOOL or mcp__SERVER__*",
                        path=None,
                        key=key,
                    )
                selectors.append(selector)
                if text.startswith("mcp__") and selector.tool is not None:
                    names.add(text)
                continue
            builtin = canonical_builtin_name(text)
            if builtin is not None:
                builtins.add(builtin)
            names.add(text)
            plain.append(builtin or text)
        return cls(frozenset(builtins), frozenset(names), tuple(selectors), tuple(plain))

    def matches(self, tool: Tool) -> bool:
        if tool.name in self.names:
            return True
        builtin = builtin_of(tool)
        if builtin is not None and builtin in self.builtins:
            return True
        if self.selectors:
            extension = extension_of(tool)
            return any(selector.matches(tool, extension) for selector in self.selectors)
        return False


class RoleRestriction:
    """The restriction of the role ``name`` (a ``ToolPredicate``; see the module docstring)."""

    __slots__ = ("_allow", "_deny", "label", "name", "permissions")

    def __init__(self, name: str, spec: RoleSpec) -> None:
        self.name = name
        self.label = f"role:{name}"
        key = f"roles.{name}"
        self._allow = None if spec.allow is None else TokenSet.parse(spec.allow, key=f"{key}.allow")
        self._deny = TokenSet.parse(spec.deny or (), key=f"{key}.deny")
        self.permissions = frozenset(spec.permissions)

    def __repr__(self) -> str:
        return f"RoleRestriction({self.name!r})"

    def admits(self, tool: Tool) -> bool:
        if tool.requires and not tool.requires <= self.permissions:
            return False
        if self._allow is not None and not self._allow.matches(tool):
            return False
        return not self._deny.matches(tool)

    def stamp(self) -> Hashable:
        return self.label

    def validate(self, registry: ToolRegistry, *, local: Iterable[str] = ()) -> None:
        """Check the plain names against the registry as ``Restriction.validate`` does
        (``UnknownToolInFilter``); selectors match by origin and are never unknown, and the
        delegation tools (``Task`` ...) are never registry tools: a view that offers them
        (``membrane mcp serve``) asks the role itself."""
        allow = None if self._allow is None else _registrable(self._allow.plain)
        deny = _registrable(self._deny.plain)
        if allow or deny:
            Restriction(allow=allow or None, deny=deny, label=self.label).validate(
                registry, local=local
            )


def _registrable(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(name for name in names if name not in DELEGATION_TOOLS)
