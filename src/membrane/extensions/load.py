"""Extensions: Python modules that register live tools, hooks and prompt guidance.

An extension is a module ``<project>/.membrane/extensions/NAME.py`` or an installed entry point in
the group ``membrane.extensions``, exposing ``setup(ext)``. ``ext`` is an ``ExtensionAPI``:
``ext.register_tool`` / ``ext.remove_tool`` act on the extension's live tool map in the registry
(origin ``extension:NAME``), during setup and at any time after; ``ext.on(event, handler)``
registers a lifecycle hook; ``ext.add_prompt_section`` adds the extension's own guidance.

Discovery only lists files and entry points (no import). Loading imports the module and runs
``setup`` synchronously: filtering extensions after this point cannot undo import-time side
effects, which is why the resolver selects extensions before anything is loaded.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final, Literal, overload

from membrane.errors import ExtensionError, MembraneError
from membrane.extensions.installed import installed_entry_points
from membrane.json_types import JSONObject
from membrane.tools.registry import ExtensionTools, ToolRegistry
from membrane.tools.requirements import Requirements
from membrane.tools.spec import Tool

__all__ = [
    "ENTRY_POINT_GROUP",
    "ExtensionAPI",
    "ExtensionSource",
    "LoadedExtension",
    "discover_extensions",
    "load_extension",
]

ENTRY_POINT_GROUP = "membrane.extensions"
Hook = Callable[..., object]
AsyncFunction = Callable[..., Awaitable[object]]


@dataclass(frozen=True, slots=True)
class ExtensionSource:
    """Where an extension comes from: a project file or an installed entry point."""

    name: str
    kind: Literal["file", "entry-point"]
    location: str  # the file path, or the entry point's ``module:attr`` value

    @property
    def path(self) -> Path | None:
        return Path(self.location) if self.kind == "file" else None


def discover_extensions(
    project: Path | None, *, installed: bool = True, cache: Path | None = None
) -> dict[str, ExtensionSource]:
    """Every extension available to ``project``, by name, sorted; no module is imported.

    A project file wins over an installed entry point of the same name (most specific first).
    Files whose name starts with ``_`` are helpers, not extensions. ``cache``: the file that
    remembers the installed entry points while the installation is unchanged
    (``membrane.extensions.installed``).
    """
    found: dict[str, ExtensionSource] = {}
    if installed:
        for name, value in installed_entry_points(ENTRY_POINT_GROUP, cache=cache).items():
            found[name] = ExtensionSource(name, "entry-point", value)
    if project is not None:
        folder = project / ".membrane" / "extensions"
        if folder.is_dir():
            for path in sorted(folder.glob("*.py")):
                if not path.stem.startswith("_") and path.is_file():
                    found[path.stem] = ExtensionSource(path.stem, "file", str(path))
    return dict(sorted(found.items()))


class ExtensionAPI:
    """The handle an extension's ``setup(ext)`` receives; it stays valid after setup."""

    def __init__(
        self,
        name: str,
        tools: ExtensionTools,
        *,
        location: str | None = None,
        requirements: Requirements | None = None,
    ) -> None:
        self.name = name
        self.tools = tools
        self.location = location
        self._requirements = requirements if requirements is not None else Requirements()
        self._hooks: dict[str, list[Hook]] = {}
        self._sections: dict[str, str] = {}

    def register_tool(self, tool: Tool) -> None:
        """Add or replace ``tool`` in this extension's live map (origin ``extension:NAME``)."""
        self.tools.register_tool(tool)

    def remove_tool(self, name: str) -> None:
        self.tools.remove_tool(name)

    def provide(self, requirement: str) -> None:
        """Say that ``requirement`` (a backend tools name in ``Tool.requires``) is present
        now: the tools that need it appear in the views of callers permitted to use it."""
        self._requirements.provide(requirement)

    def withdraw(self, requirement: str) -> None:
        """Say that ``requirement`` went away: the tools that need it are hidden again."""
        self._requirements.withdraw(requirement)

    @overload
    def tool(self, name: AsyncFunction, /) -> Tool: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        schema: JSONObject | None = None,
        mutating: bool = False,
    ) -> Callable[[AsyncFunction], Tool]: ...

    def tool(
        self,
        name: str | AsyncFunction | None = None,
        *,
        description: str | None = None,
        schema: JSONObject | None = None,
        mutating: bool = False,
    ) -> Tool | Callable[[AsyncFunction], Tool]:
        """Decorator, bare or called: ``function_tool`` that also registers the tool here."""
        if callable(name):
            return self.tool()(name)
        from membrane.extensions.function_tools import function_tool  # only a decorated tool

        build = function_tool(name, description=description, schema=schema, mutating=mutating)

        def register(function: AsyncFunction) -> Tool:
            built = build(function)
            self.register_tool(built)
            return built

        return register

    def on(self, event: str, handler: Hook) -> None:
        """Call ``handler`` at ``event`` (one of ``HOOK_EVENTS``)."""
        from membrane.extensions.hooks import hook_problem  # only an extension with hooks

        problem = hook_problem(event, handler)
        if problem is not None:
            raise self._error(f"extension {self.name!r} {problem}", event=event)
        self._hooks.setdefault(event, []).append(handler)

    def add_prompt_section(self, name: str, text: str) -> None:
        """Add (or replace) the named guidance section this extension contributes."""
        if not isinstance(name, str) or not name or not isinstance(text, str):
            raise self._error(
                f"extension {self.name!r}: a prompt section needs a non-empty name and text"
            )
        self._sections[name] = text

    def _error(self, message: str, **data: object) -> ExtensionError:
        where = f"{self.location}: " if self.location else ""
        return ExtensionError(where + message, extension=self.name, path=self.location, **data)


class LoadedExtension:
    """An extension after a successful ``setup``; its maps stay live."""

    def __init__(self, source: ExtensionSource, api: ExtensionAPI) -> None:
        self.source = source
        self.name = source.name
        self.api = api

    @property
    def tools(self) -> ExtensionTools:
        return self.api.tools

    @property
    def hooks(self) -> Mapping[str, list[Hook]]:
        """Handlers by event, in registration order (read-only view)."""
        return MappingProxyType(self.api._hooks)

    @property
    def prompt_sections(self) -> Mapping[str, str]:
        return MappingProxyType(self.api._sections)

    def __repr__(self) -> str:
        return f"LoadedExtension({self.name!r}, tools={sorted(self.tools.names())!r})"


def _awaitable(value: object) -> bool:
    import inspect

    return inspect.isawaitable(value)


def load_extension(source: ExtensionSource, registry: ToolRegistry) -> LoadedExtension:
    """Import ``source`` and run its ``setup(ext)``; ``ExtensionError`` naming the location if not.

    Tools registered by a ``setup`` that then fails are removed again.
    """
    setup = _setup_of(source)
    tools = registry.extension(source.name)
    before = tools.names()
    api = ExtensionAPI(
        source.name, tools, location=source.location, requirements=registry.requirements
    )
    try:
        result = setup(api)
        # ``None`` is the usual answer, and no awaitable: ``inspect`` is imported for others only.
        if result is not None and _awaitable(result):
            if isinstance(result, types.CoroutineType):
                result.close()
            raise ExtensionError(
                f"{source.location}: setup() of extension {source.name!r} must be synchronous; "
                "do async work in a session_start hook",
                extension=source.name,
                path=source.location,
            )
    except (Exception, SystemExit) as exc:
        # ``sys.exit()`` in an extension must not end the host: it is a failed setup like any.
        for name in tools.names() - before:
            tools.remove_tool(name)
        if isinstance(exc, ExtensionError):
            raise
        detail = exc.message if isinstance(exc, MembraneError) else _describe(exc)
        raise ExtensionError(
            f"{source.location}: setup() of extension {source.name!r} failed: {detail}",
            extension=source.name,
            path=source.location,
        ) from exc
    return LoadedExtension(source, api)


def _setup_of(source: ExtensionSource) -> Callable[[ExtensionAPI], object]:
    try:
        if source.kind == "file":
            target: object = _import_file(source)
        else:
            target = _load_entry_point(source.location)
    except ExtensionError:
        raise
    except (Exception, SystemExit) as exc:
        raise ExtensionError(
            f"{source.location}: cannot import extension {source.name!r}: {_describe(exc)}",
            extension=source.name,
            path=source.location,
        ) from exc
    setup = getattr(target, "setup", None) if isinstance(target, types.ModuleType) else target
    if not callable(setup):
        raise ExtensionError(
            f"{source.location}: extension {source.name!r} has no setup(ext) function",
            extension=source.name,
            path=source.location,
        )
    return setup  # type: ignore[no-any-return]


#: An entry point's value, as ``importlib.metadata.EntryPoint.pattern`` reads it: ``module``,
#: ``module:attr`` or ``module:attr.attr``, optionally followed by ``[extras]``.
#: (Compiled on the first entry point loaded: a project with file extensions only never needs it.)
_ENTRY_POINT: Final = r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$"


def _load_entry_point(value: str) -> object:
    """What ``importlib.metadata.EntryPoint(name, value, group).load()`` returns: the module,
    then each attribute after the colon. Without ``importlib.metadata``, which imports
    ``email``, ``zipfile`` and more that a start whose entry points are cached never needs."""
    match = re.match(_ENTRY_POINT, value)
    if match is None:
        raise ValueError(f"{value!r} is not an entry point (`module` or `module:attribute`)")
    target: object = importlib.import_module(match.group("module"))
    for attribute in filter(None, (match.group("attr") or "").split(".")):
        target = getattr(target, attribute)
    return target


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}); an extension must raise an exception instead"
    return f"{type(exc).__name__}: {exc}"


def _import_file(source: ExtensionSource) -> types.ModuleType:
    module_name = f"membrane_extension_{source.name}"
    spec = importlib.util.spec_from_file_location(module_name, source.location)
    if spec is None or spec.loader is None:
        raise ExtensionError(
            f"{source.location}: not an importable Python file",
            extension=source.name,
            path=source.location,
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module
