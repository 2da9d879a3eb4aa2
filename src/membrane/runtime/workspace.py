"""A project as Membrane finds it on disk: settings, definitions, tools, extensions and memory.

``Workspace.open(project)`` is the one place that reads a project for ``membrane explain`` and
``membrane run`` (and for hosts that want the same defaults), so that what ``explain`` shows and
what a run gets are built from the same files the same way.

Opening a workspace imports every discovered extension and runs its ``setup()``: that is how
their tools are learned. It also loads every extension file a definition names by path in its
``extensions`` list (``membrane.extensions.select.ExtensionPaths``). Open only projects you
trust.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# The package, not its ``sqlite`` module: a pure read (``membrane explain``) never imports the
# store, and ``store.SQLiteStore`` is imported when first named.
import membrane.store as store
from membrane.agents.cache import CACHE_FILE
from membrane.agents.catalog import Catalog
from membrane.agents.definition import AgentDefinition
from membrane.agents.settings_hooks import settings_hook_warnings
from membrane.agents.skill_cache import SKILLS_CACHE_FILE
from membrane.agents.skills import SkillCatalog, discover_skills, skill_roots
from membrane.builtin_tools import builtin_tools, register_builtin_tools
from membrane.builtin_tools.skill import skill_tool
from membrane.config.load import load_settings, membrane_home
from membrane.config.product_settings import claude_config_home
from membrane.config.values import Settings
from membrane.errors import ExtensionError, InvalidRequest
from membrane.extensions.installed import ENTRY_POINTS_FILE
from membrane.extensions.load import (
    ExtensionSource,
    LoadedExtension,
    discover_extensions,
    load_extension,
)
from membrane.extensions.select import ExtensionPaths, extension_path, is_extension_path
from membrane.resolve import Deployment
from membrane.sandbox.policy import SandboxPolicy
from membrane.store.location import StateLocation, locate_state, migrate_legacy_state
from membrane.store.select import chosen_state
from membrane.tools.registry import ToolRegistry

__all__ = ["UntrustedPlace", "Workspace", "memory_file", "require_folder"]

#: Why a file lies where a child (or anyone but the user) may write it, or ``None``.
UntrustedPlace = Callable[[Path], str | None]


def _refused(source: ExtensionSource, untrusted: UntrustedPlace | None) -> str | None:
    """Why the extension file ``source`` must not be imported, or ``None``."""
    path = source.path
    if untrusted is None or path is None:
        return None
    why = untrusted(path)
    return None if why is None else f"its file {path} {why}"


_MEMORY_FOLDERS = {"project": "memory", "local": "memory.local"}


def memory_file(
    scope: str,
    agent: str,
    *,
    project: Path,
    home: Path,
    dialect: str = "membrane",
    claude_home: Path | None = None,
) -> Path:
    """Where ``memory: project|local|user`` keeps an agent's ``MEMORY.md``: a Claude Code
    file's in Claude Code's folders (``.claude/agent-memory/<agent>/``,
    ``.claude/agent-memory-local/<agent>/``, ``~/.claude/agent-memory/<agent>/``)."""
    if dialect == "claude-code":
        if scope == "user":
            return (claude_home or Path.home() / ".claude") / "agent-memory" / agent / "MEMORY.md"
        folder = "agent-memory-local" if scope == "local" else "agent-memory"
        return project / ".claude" / folder / agent / "MEMORY.md"
    if scope == "user":
        return home / "memory" / agent / "MEMORY.md"
    return project / ".membrane" / _MEMORY_FOLDERS[scope] / agent / "MEMORY.md"


#: What Claude Code puts of a subagent's ``MEMORY.md`` in its prompt: the first lines, bounded.
_CLAUDE_MEMORY_LINES = 200
_CLAUDE_MEMORY_BYTES = 25_000


def _claude_memory_head(text: str) -> str:
    """The first 200 lines (at most 25 KB) of a Claude Code agent's ``MEMORY.md``, as Claude
    Code injects it, with a line saying where the rest is when something was left out."""
    lines = text.splitlines()
    head = "\n".join(lines[:_CLAUDE_MEMORY_LINES])
    cut = len(lines) > _CLAUDE_MEMORY_LINES
    if len(head.encode("utf-8")) > _CLAUDE_MEMORY_BYTES:
        head = head.encode("utf-8")[:_CLAUDE_MEMORY_BYTES].decode("utf-8", "ignore")
        cut = True
    if cut:
        head += "\n[MEMORY.md continues past this point: read the file for the rest]"
    return head


def require_folder(option: str, path: Path) -> Path:
    """``path`` resolved, or ``InvalidRequest`` naming ``option`` when it is not a folder."""
    if not path.is_dir():
        what = "is not a folder" if path.exists() else "does not exist"
        raise InvalidRequest(f"{option}: {path} {what}; name an existing folder", field=option)
    return path.resolve()


@dataclass
class Workspace:
    """Everything read from one project. ``warnings`` collects what was skipped and why."""

    project: Path
    home: Path
    settings: Settings
    catalog: Catalog
    registry: ToolRegistry
    extensions: Mapping[str, LoadedExtension]
    workspace: Path | None = None
    warnings: list[str] = field(default_factory=list)
    skills: SkillCatalog = field(default_factory=SkillCatalog)
    extension_paths: ExtensionPaths = field(default_factory=ExtensionPaths)

    @classmethod
    def open(
        cls,
        project: Path,
        *,
        workspace: Path | None = None,
        home: Path | None = None,
        untrusted: UntrustedPlace | None = None,
    ) -> Workspace:
        """Read ``project``: settings, the catalog, built-in tools and every extension.

        A missing folder is ``InvalidRequest``; bad settings are ``SettingsError``. An extension
        that fails to load is skipped with a warning and offers no tools. ``untrusted`` says
        why a file lies where someone else may write it (a live run's checkout): an extension
        file it names a reason for is never imported, and a warning says so.
        """
        require_folder("--project", project)
        if workspace is not None:
            require_folder("--workspace", workspace)
        project = project.resolve()
        home = home if home is not None else membrane_home()
        settings = load_settings(project=project, home=home)
        state_folder = locate_state(project, home=home).path.parent
        catalog = Catalog(
            project=project,
            workspace=workspace,
            home=home,
            settings=settings,
            cache=state_folder / CACHE_FILE,
        )
        registry = ToolRegistry()
        registry.rate_limits.configure(
            settings.rate_limits, max_sessions=settings.rate_limit_sessions
        )
        register_builtin_tools(
            registry, tools=builtin_tools(sandbox=SandboxPolicy.from_settings(settings))
        )
        loaded: dict[str, LoadedExtension] = {}
        warnings: list[str] = [*settings.warnings, *settings_hook_warnings(settings)]
        discovered = discover_extensions(project, cache=home / "cache" / ENTRY_POINTS_FILE)
        for name, source in discovered.items():
            refused = _refused(source, untrusted)
            if refused is not None:
                warnings.append(f"extension {name!r} is not loaded: {refused}")
                continue
            try:
                loaded[name] = load_extension(source, registry)
            except ExtensionError as exc:
                warnings.append(f"extension {name!r} failed to load and offers no tools: {exc}")
        paths = _load_paths(catalog, project, discovered, loaded, registry, untrusted)
        skills = discover_skills(
            skill_roots(project=project, home=home), cache=state_folder / SKILLS_CACHE_FILE
        )
        warnings += [f"skill: {problem}" for problem in skills.problems]
        if skills.skills:
            # The host's own Skill, over every discovered skill: what a top-level agent (and a
            # `tools: inherit` child of the host) can load. Each child gets its own, bound to
            # the skills it selects.
            registry.register(skill_tool(skills.skills))
        return cls(
            project=project,
            home=home,
            settings=settings,
            catalog=catalog,
            registry=registry,
            extensions=loaded,
            workspace=workspace,
            warnings=warnings,
            skills=skills,
            extension_paths=paths,
        )

    @property
    def state(self) -> StateLocation:
        """Where the project's durable state lives: ``$MEMBRANE_HOME/projects/<id>/state.db``
        (DESIGN rule 9), outside every checkout."""
        return locate_state(self.project, home=self.home)

    @property
    def state_path(self) -> Path:
        return self.state.path

    def open_store(
        self, state: Path | str | None = None
    ) -> store.SQLiteStore | store.PostgresStore:
        """The project's store: ``state`` (a file, or a ``postgresql://`` URL), else the
        database ``MEMBRANE_STATE_URL`` or the settings' ``state_url`` names, else the
        project's own file (``membrane.store.select``). Opening the default file first moves
        a legacy ``<project>/.membrane/state.db`` there, once."""
        synchronous = self.settings.state_synchronous
        target = chosen_state(state, settings_url=self.settings.state_url)
        if isinstance(target, str):
            return store.PostgresStore(target)
        if target is not None:
            return store.SQLiteStore(target, synchronous=synchronous)
        location = self.state
        migrate_legacy_state(location)
        return store.SQLiteStore(location.path, synchronous=synchronous)

    def deployment(self) -> Deployment:
        """The deployment as the resolver sees it now (tool names of each extension included)."""
        prompts: dict[str, str] = {}
        for name, extension in self.extensions.items():
            sections = [text for text in extension.prompt_sections.values() if text.strip()]
            if sections:
                prompts[name] = "\n\n".join(sections)
        return Deployment(
            settings=self.settings,
            registry_tools=dict(self.registry.tools()),
            extensions={name: ext.tools.names() for name, ext in self.extensions.items()},
            extension_prompts=prompts,
            project=str(self.project),
            home=str(self.home),
            claude_home=str(claude_config_home()),
            subagents=self.catalog.definitions(),
            skills=self.skills.descriptions(),
            skill_files=self.skills.skills,
            skill_roots=tuple(str(root) for root in self.skills.roots),
            extension_paths=self.extension_paths,
        )

    def memory_for(self, definition: AgentDefinition) -> dict[str, str]:
        """The agent's ``MEMORY.md`` text under its memory scope (empty when it has none yet).

        A file that exists but cannot be read is a warning, never a silent empty memory.
        """
        if not isinstance(definition.memory, str):
            return {}
        file = memory_file(
            definition.memory,
            definition.name,
            project=self.project,
            home=self.home,
            dialect=definition.dialect,
            claude_home=claude_config_home(),
        )
        try:
            text = file.read_text(encoding="utf-8")
            if definition.dialect == "claude-code":
                text = _claude_memory_head(text)
            return {definition.memory: text}
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            self.warnings.append(f"memory file {file} cannot be read: {exc}")
            return {}


def _load_paths(
    catalog: Catalog,
    project: Path,
    discovered: Mapping[str, ExtensionSource],
    loaded: dict[str, LoadedExtension],
    registry: ToolRegistry,
    untrusted: UntrustedPlace | None = None,
) -> ExtensionPaths:
    """Load every extension file a definition names by path (relative to ``project``), under
    its file name, into ``loaded``. A path to a discovered extension's file means that
    extension; a missing file, one that is not ``*.py``, a name another extension holds or a
    failed ``setup()`` is recorded as the path's problem (the definition is refused)."""
    by_location = {
        str(Path(source.location).resolve()): name
        for name, source in discovered.items()
        if source.kind == "file"
    }
    found: dict[str, str] = {}
    problems: dict[str, str] = {}
    only: set[str] = set()
    for definition in catalog.definitions().values():
        if definition.dialect != "membrane":
            continue  # another product's paths name its own extensions, not Membrane's
        tokens = definition.extensions if isinstance(definition.extensions, tuple) else ()
        for token in tokens:
            if not is_extension_path(token):
                continue
            key = extension_path(token, project=str(project))
            if key in found or key in problems:
                continue
            file = Path(key)
            if not file.is_file() or file.suffix != ".py":
                problems[key] = f"{key} is not a Python file (a module with setup(ext))"
                continue
            name = by_location.get(str(file.resolve()))
            if name is None and file.stem in loaded:
                problems[key] = f"its name {file.stem!r} is already an extension's"
                continue
            if name is None:
                name = file.stem
                refused = _refused(ExtensionSource(name, "file", key), untrusted)
                if refused is not None:
                    problems[key] = refused
                    continue
                try:
                    loaded[name] = load_extension(ExtensionSource(name, "file", key), registry)
                except ExtensionError as exc:
                    problems[key] = exc.message
                    continue
                only.add(name)
            found[key] = name
    return ExtensionPaths(loaded=found, problems=problems, only=frozenset(only))
