"""``resolve()``: what a child really gets, each field with its source and every tool accounted for.

Pure: no I/O but making read roots real (``os.path.realpath``). The caller (the runtime, or
``membrane explain``) reads files and the registry and hands the results in as
``ParentContext`` and ``Deployment``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from membrane.agents.definition import FIELDS, UNSET, AgentDefinition, Unset
from membrane.agents.skills import Skill
from membrane.config.model_names import check_allowed, plan_model
from membrane.config.values import Settings
from membrane.errors import ToolChoiceInvalid
from membrane.extensions.select import (
    ExtensionPaths,
    ExtensionSelection,
    extension_of,
    select_extensions,
)
from membrane.limits import check_depth
from membrane.resolve.ceiling import Ceiling, ceiling_label, definition_read_roots, lower_mode
from membrane.resolve.guidance import SCHEDULE_ACTION, cli_guidance, write_boundary
from membrane.resolve.invocation import (
    CallParams,
    Checkout,
    Sourced,
    agent_depth,
    resolve_checkout,
    resolve_invocation,
)
from membrane.resolve.permissions import Permissions, permission_mode, resolve_permissions
from membrane.resolve.preload import preloaded_skills
from membrane.resolve.product_rules import product_ceiling
from membrane.resolve.prompt import (
    DelegationEntry,
    MemoryNote,
    PromptSection,
    TranscriptEntry,
    compose_system_prompt,
    persona_section,
    render_parent_context,
)
from membrane.resolve.tools import (
    DefinitionRestriction,
    Selector,
    ToolPlan,
    delegation_placeholder,
    describe_tools,
    plan_tools,
)
from membrane.tools.argument_rules import settings_rules
from membrane.tools.spec import Tool, ToolGate
from membrane.vocabulary import (
    ASK_PARENT_TOOL,
    ASSIGNABLE_TOOLS,
    DELEGATION_TOOLS,
    INHERIT_DENY_TOOLS,
    TOOL_CHOICE_MODES,
    WRITE_TOOLS,
)

__all__ = [
    "Deployment",
    "EffectiveAuthority",
    "ParentContext",
    "ToolAdmission",
    "definition_fields",
    "mcp_server_of",
    "resolve",
]


class ToolAdmission(Protocol):
    """Anything that admits or refuses a global tool (a ``Restriction``, a role's predicate)."""

    def admits(self, tool: Tool) -> bool: ...


@dataclass(frozen=True, slots=True)
class ParentContext:
    """The agent that delegates. ``tools`` is its catalog, deferred MCP/plugin tools included.

    ``live``/``live_stamp`` make ``inherit`` follow the parent's catalog as it changes: the
    restriction calls ``live()`` (default: ``tools``) and caches by ``live_stamp()``.
    """

    tools: Mapping[str, Tool] = field(default_factory=dict)
    system_prompt: str = ""
    model: str | None = None
    transcript: tuple[TranscriptEntry, ...] = ()
    permission_mode: str = "default"
    depth: int = 0
    cwd: str | None = None
    live: Callable[[], Mapping[str, Tool]] | None = None
    live_stamp: Callable[[], Hashable] | None = None
    #: The parent's ``# Skills`` catalog (name -> description); ``None``: the deployment's.
    skills: Mapping[str, str] | None = None
    #: The parent's permission gate: an inheriting child is held to it as well.
    call_gate: ToolGate | None = None
    #: What the parent and its ancestors (or the host) took away (DESIGN rule 13).
    ceiling: Ceiling = field(default_factory=Ceiling)

    def __post_init__(self) -> None:
        check_depth(self.depth, what="parent.depth", exact=True)


@dataclass(frozen=True, slots=True)
class Deployment:
    """What the deployment contributes.

    ``extensions`` maps each discovered extension (MCP servers included) to its tool names;
    ``memory`` maps a memory scope (``project``, ``local``, ``user``) to the agent's
    ``MEMORY.md`` text; ``subagents`` are the catalog's definitions, for the delegation
    catalog; ``skills`` maps installed skill names to descriptions, and ``skill_files`` maps
    them to the discovered skills (what a child's ``Skill`` tool loads). ``project_subfolder`` is
    the project's place inside its Git repository (``git rev-parse --show-prefix``; empty at
    the top): a worktree holds the whole repository, so a child works in that subfolder of it.
    """

    settings: Settings = field(default_factory=Settings)
    registry_tools: Mapping[str, Tool] = field(default_factory=dict)
    extensions: Mapping[str, frozenset[str]] = field(default_factory=dict)
    extension_prompts: Mapping[str, str] = field(default_factory=dict)
    memory: Mapping[str, str] = field(default_factory=dict)
    project: str | None = None
    environment: str = ""
    home: str | None = None
    #: Claude Code's user folder (``~/.claude``): a Claude Code file's ``memory: user`` is there.
    claude_home: str | None = None
    subagents: Mapping[str, AgentDefinition] = field(default_factory=dict)
    skills: Mapping[str, str] = field(default_factory=dict)
    skill_files: Mapping[str, Skill] = field(default_factory=dict)
    #: The instructions of the skills the definition being resolved preloads (a Claude Code or
    #: pi ``skills`` list), read by the caller (``membrane.agents.skills.preload_texts``).
    skill_texts: Mapping[str, str] = field(default_factory=dict)
    #: Every skill root, nearest first: what a launched child gets in MEMBRANE_AGENT_SKILLS_DIRS.
    skill_roots: tuple[str, ...] = ()
    project_subfolder: str = ""
    #: The extension paths named in ``extensions`` lists, as loaded (``ExtensionPaths``).
    extension_paths: ExtensionPaths = field(default_factory=ExtensionPaths)


@dataclass(frozen=True, slots=True)
class EffectiveAuthority:
    """The resolved child. ``callable``/``left_out`` are ``restriction`` applied to the known
    tools (the parent's catalog, the registry and the delegation tools), so the view a child
    runs with is the one explain shows.

    ``delegation_tools`` are the nested tools the runtime adds to the child's scope (visible
    at the depth cap too, unless the deployment hides them). ``inherited_local_tools`` are
    inherited names that exist only in the parent's catalog, not in the registry: the runtime
    adds the parent's ``Tool`` objects as child-local tools.
    """

    definition: AgentDefinition
    invocation: Mapping[str, Sourced[object]]
    extensions_loaded: tuple[str, ...]
    extensions_excluded: tuple[str, ...]
    callable: tuple[str, ...]
    left_out: Mapping[str, str]
    restriction: DefinitionRestriction
    may_delegate: bool
    prompt_mode: str
    system_prompt: str
    task_prefix: str
    checkout: Checkout
    warnings: tuple[str, ...]
    depth: int = 1
    delegation_tools: tuple[str, ...] = ()
    inherited_local_tools: tuple[str, ...] = ()
    prompt_sections: tuple[PromptSection, ...] = ()
    #: The skills the child's ``Skill`` tool loads and its ``# Skills`` section lists (name ->
    #: description); ``None`` when ``Skill`` is not callable. ``skills_left_out`` gives the
    #: reason for every known skill the child does not get.
    skills: Mapping[str, str] | None = None
    skills_left_out: Mapping[str, str] = field(default_factory=dict)
    #: Whether the runtime adds the child's ``AskParent`` tool (``may_ask_parent: true``, and
    #: no filter of the child's took it away).
    ask_parent: bool = False
    #: The skills whose instructions the system prompt carries from the start (a Claude Code or
    #: pi file's ``skills`` list), in the file's order.
    skills_preloaded: tuple[str, ...] = ()
    #: The permission mode and the rules of each callable tool (what the child's gate holds).
    permissions: Permissions = field(default_factory=Permissions)
    #: The ceiling the child runs under (its parent's), and whether its sandboxed commands
    #: may use the network: by its own ``network: true`` or the deployment's
    #: ``sandbox_network``, never once an ancestor wrote ``network: false`` (the ceiling).
    ceiling: Ceiling = field(default_factory=Ceiling)
    network: Sourced[bool] = field(default_factory=lambda: Sourced(False, "default"))
    #: The folders it reads besides its checkout and the system's (real paths): the settings'
    #: ``read_paths`` (source ``settings``) and its definition's own that the ceiling holds
    #: (``read_roots_left_out``: the others, each with the ``ceiling:<source>`` that held it).
    read_roots: tuple[Sourced[str], ...] = ()
    read_roots_left_out: Mapping[str, str] = field(default_factory=dict)
    #: Whether the working folder is writable (a file-writing tool is callable): the prompt's
    #: tool guidance, the sandbox's writable set and explain all follow this one value.
    writes: bool = False
    _inputs: tuple[Any, ...] = field(default=(), repr=False, compare=False)

    @property
    def own_read_roots(self) -> tuple[Path, ...]:
        """The read roots its definition adds (held under the ceiling), the settings' left out:
        what its tool context and sandbox add to the deployment's."""
        return tuple(Path(r.value) for r in self.read_roots if r.source != "settings")

    def with_filters(
        self, *, tool_filter: ToolAdmission | None = None, role: ToolAdmission | None = None
    ) -> EffectiveAuthority:
        """The same resolution with the start request's ``toolFilter`` and the caller's role
        layered on (reasons ``toolFilter`` and ``role``); guidance follows the narrower set."""
        definition, call, parent, deployment, persona, depth = self._inputs
        return resolve(
            definition,
            call,
            parent,
            deployment,
            persona=persona,
            tool_filter=tool_filter,
            role=role,
            depth=depth,
        )

    def to_json(self) -> dict[str, Any]:
        """The ``membrane explain --json`` contract: exactly these eight keys."""
        return {
            "definition": {
                "name": self.definition.name,
                "root": self.definition.root,
                "path": self.definition.path,
                "dialect": self.definition.dialect,
                "fields": definition_fields(self.definition),
            },
            "invocation": {
                name: {"value": sourced.value, "source": sourced.source}
                for name, sourced in self.invocation.items()
            },
            "prompt": {
                "mode": self.prompt_mode,
                "system": self.system_prompt,
                "task_prefix": self.task_prefix,
            },
            "extensions": {
                "loaded": list(self.extensions_loaded),
                "excluded": list(self.extensions_excluded),
            },
            "tools": {
                "callable": list(self.callable),
                "left_out": dict(sorted(self.left_out.items())),
                "skills": {
                    "selected": None if self.skills is None else dict(sorted(self.skills.items())),
                    "left_out": dict(sorted(self.skills_left_out.items())),
                    "preloaded": list(self.skills_preloaded),
                },
                # The MCP server of each ``mcp__SERVER__TOOL`` name above.
                "servers": {
                    name: server
                    for name in sorted({*self.callable, *self.left_out})
                    if (server := mcp_server_of(name)) is not None
                },
            },
            "checkout": {
                "kind": self.checkout.kind,
                "path": self.checkout.path,
                "read_roots": [{"path": r.value, "source": r.source} for r in self.read_roots],
                "read_roots_left_out": dict(self.read_roots_left_out),
            },
            "permissions": {**self.permissions.to_json(), "ceiling": self.ceiling.to_json()},
            "warnings": list(self.warnings),
        }


def mcp_server_of(name: str) -> str | None:
    """``SERVER`` of a name ``mcp__SERVER__TOOL`` (or ``mcp__SERVER__*``), else ``None``."""
    parts = name.split("__", 2)
    if name.startswith("mcp__") and len(parts) == 3 and parts[1] and parts[2]:
        return parts[1]
    return None


def definition_fields(definition: AgentDefinition) -> dict[str, Any]:
    """Every field the file sets: its value, who set it (``frontmatter`` or ``dialect:NAME``),
    the key it was written as and its line."""
    data = definition.to_json()
    out: dict[str, Any] = {}
    for name in FIELDS:
        if name == "name" or name not in data:
            continue
        out[name] = {
            "value": data[name],
            "source": definition.source_of(name),
            "key": definition.keys.get(name, name),
            "line": definition.lines.get(name),
        }
    return out


def _ceiling_source(source: str | None) -> str:
    return ceiling_label(source) or "ceiling"


def _network(definition: AgentDefinition, ceiling: Ceiling, settings: Settings) -> Sourced[bool]:
    """Whether the child's sandboxed commands may use the network: never once an ancestor
    wrote ``network: false`` (``ceiling:<source>``), whatever the deployment or its own file
    says; else by its own ``network: true``, or by the deployment's ``sandbox_network``."""
    if not ceiling.network:
        return Sourced(False, _ceiling_source(ceiling.network_source))
    if definition.network is True:
        return Sourced(True, definition.source_of("network"))
    if settings.sandbox_network:
        return Sourced(True, "settings")
    if definition.network is UNSET:
        return Sourced(False, "default")
    return Sourced(False, definition.source_of("network"))


def _read_roots(
    definition: AgentDefinition, ceiling: Ceiling, settings: Settings
) -> tuple[tuple[Sourced[str], ...], dict[str, str]]:
    """The settings' read roots, then the definition's own that ``ceiling`` holds (a root
    inside one its ancestors' definitions named; any root at the top of the tree), and the
    definition's roots it holds out."""
    named = settings.read_path_sources
    roots = [
        Sourced(
            os.path.realpath(os.path.expanduser(p)),
            f"settings:{named[p]}" if p in named else "settings",
        )
        for p in settings.read_paths
    ]
    left_out: dict[str, str] = {}
    source = definition.source_of("read_paths")
    for root in definition_read_roots(definition):
        if ceiling.holds_read_root(root):
            roots.append(Sourced(root, source))
        else:
            left_out[root] = _ceiling_source(ceiling.read_roots_source)
    return tuple(dict.fromkeys(roots)), left_out


def _memory_path(
    scope: str, agent: str, deployment: Deployment, *, dialect: str = "membrane"
) -> str | None:
    if dialect == "claude-code":
        # Claude Code's own folders: .claude/agent-memory(-local)/<agent>/, ~/.claude/agent-memory.
        if scope == "user":
            home = deployment.claude_home or "~/.claude"
            return str(PurePosixPath(home) / "agent-memory" / agent / "MEMORY.md")
        if deployment.project is None:
            return None
        folder = "agent-memory-local" if scope == "local" else "agent-memory"
        return str(PurePosixPath(deployment.project) / ".claude" / folder / agent / "MEMORY.md")
    if scope == "user":
        home = deployment.home or "~/.membrane"
        return str(PurePosixPath(home) / "memory" / agent / "MEMORY.md")
    if deployment.project is None:
        return None
    folder = "memory.local" if scope == "local" else "memory"
    return str(PurePosixPath(deployment.project) / ".membrane" / folder / agent / "MEMORY.md")


def _main_agent_only(definition: AgentDefinition) -> bool:
    """A Claude Code file whose ``allowed_subagents`` came from ``Agent(...)`` in ``tools``."""
    from_tools = definition.keys.get("allowed_subagents") == "tools"
    return definition.dialect == "claude-code" and from_tools


def _delegation_state(
    allowed: tuple[str, ...], *, isolated: bool, at_cap: bool, depth: int, hide: bool
) -> tuple[str | None, list[str]]:
    """Step 5: ``None`` when the delegation tools are visible, else why not (``off`` without
    ``allowed_subagents``). At the cap they stay visible unless the deployment hides them."""
    if not allowed:
        return "off", []
    if isolated:
        return "isolated", ["isolated: true never admits the delegation tools (allowed_subagents)"]
    if at_cap and hide:
        return "depth cap", []
    if at_cap:
        return None, [
            f"the child runs at depth {depth} = max_depth: its delegation tools stay visible, "
            "but every start it attempts is rejected"
        ]
    return None, []


def _classify(
    known: Mapping[str, Tool],
    restriction: DefinitionRestriction,
    *,
    global_names: Collection[str],
    tool_filter: ToolAdmission | None,
    role: ToolAdmission | None,
    ceiling: Ceiling,
) -> tuple[dict[str, Tool], dict[str, str]]:
    """The one computation behind ``callable``/``left_out``: the definition's reason first,
    then the ceiling (every tool, scope-local ones too: ``ceiling:<source>``), then the start
    request's filter and the caller's role (global tools only)."""
    callable_tools: dict[str, Tool] = {}
    left_out: dict[str, str] = {}
    for name in sorted(known):
        tool = known[name]
        why = restriction.reason(tool)
        is_global = name in global_names
        if why is None:
            why = ceiling.reason(tool, is_global=is_global)
        if why is None and is_global and tool_filter is not None and not tool_filter.admits(tool):
            why = "toolFilter"
        if why is None and is_global and role is not None and not role.admits(tool):
            why = "role"
        if why is None:
            callable_tools[name] = tool
        else:
            left_out[name] = why
    return callable_tools, left_out


def _unknown_servers(
    selectors: Collection[Selector], known: Collection[str], left_out: dict[str, str], field: str
) -> list[str]:
    """A ``mcp__SERVER__...`` selector naming no configured server selects nothing: say so,
    and list it in ``left_out`` with that reason (it never silently selects nothing)."""
    warnings = []
    for selector in selectors:
        if selector.text.startswith("mcp__") and selector.extension not in known:
            left_out.setdefault(selector.text, "no such MCP server")
            warnings.append(
                f"{field}: {selector.text!r} names the MCP server {selector.extension!r}, which "
                f"is not configured; it selects nothing (add [mcp_servers.{selector.extension}] "
                "to the settings)"
            )
    return warnings


def _token_warnings(named: Collection[str], known: Collection[str], *, field: str) -> list[str]:
    """``field`` is where the tokens were written: ``tools`` or ``default_tools``."""
    hint = "; use inherit to share the parent's tools" if field == "tools" else ""
    warnings = []
    for token in sorted(named):
        if token in known or token in INHERIT_DENY_TOOLS:
            warnings.append(
                f"{field}: {token!r} is not assignable to a subagent (assignable: "
                f"{', '.join(ASSIGNABLE_TOOLS)}{hint})"
            )
        else:
            warnings.append(f"{field}: {token!r} is not a builtin tool or a selector; ignored")
    return warnings


def _skills(
    definition: AgentDefinition,
    deployment: Deployment,
    parent: ParentContext,
    *,
    inherited: bool,
    isolated: bool,
) -> tuple[dict[str, str], dict[str, str]]:
    """The selected skills and a reason for every other known one.

    ``skills`` omitted means every discovered skill, ``false`` none, a list names them;
    ``isolated: true`` gives none. A child that receives ``Skill`` through ``inherit`` starts
    from its parent's catalog, exactly (seed 000); its own ``skills`` field can only narrow it.
    """
    base = dict(parent.skills if inherited and parent.skills is not None else deployment.skills)
    known = {**deployment.skills, **base}
    wanted = definition.skills
    if isolated:
        return {}, {name: "isolated" for name in known}
    if wanted is False:
        return {}, {name: "skills: false" for name in known}
    chosen = (
        base
        if wanted is UNSET or wanted is True or "*" in wanted
        else {n: d for n, d in base.items() if n in wanted}
    )
    reasons = {}
    for name in known:
        if name in chosen:
            continue
        if name not in base:
            reasons[name] = "not in the parent's catalog"
        else:
            reasons[name] = "not selected by skills"
    return chosen, reasons


def _tool_choice(
    chosen: Sourced[object], callable_tools: Mapping[str, object], definition: AgentDefinition
) -> Sourced[object]:
    """``tool_choice`` as the model will be asked: ``auto``, ``required``, ``none`` (any case)
    or the name of a tool the agent can call (exact, else its one case-insensitive match).
    A name the agent cannot call is ``ToolChoiceInvalid``, naming only what was asked for."""
    value = chosen.value
    if not isinstance(value, str):
        return chosen
    if value.strip().lower() in TOOL_CHOICE_MODES:
        return Sourced(value.strip().lower(), chosen.source)
    if value in callable_tools:
        return chosen
    folded = [name for name in callable_tools if name.lower() == value.lower()]
    if len(folded) == 1:
        return Sourced(folded[0], chosen.source)
    where = (
        f" ({definition.path}:{definition.lines['tool_choice']})"
        if "tool_choice" in (definition.lines)
        else f" ({definition.path})"
    )
    raise ToolChoiceInvalid(
        f"tool_choice: {value!r}{where} is not a tool {definition.name!r} can call here; use "
        "auto, required, none or the name of one of its tools (membrane explain lists them)",
        agent=definition.name,
        tool_choice=value,
    )


def _catalog(allowed: tuple[str, ...], deployment: Deployment) -> list[DelegationEntry]:
    entries = []
    for name in allowed:
        sub = deployment.subagents.get(name)
        if sub is None:
            entries.append(DelegationEntry(name, "unknown (not in the catalog)"))
        else:
            about = sub.description if sub.description is not UNSET else ""
            entries.append(DelegationEntry(name, describe_tools(sub, deployment.settings), about))
    return entries


def resolve(
    definition: AgentDefinition,
    call: CallParams,
    parent: ParentContext,
    deployment: Deployment,
    *,
    persona: str | Unset | None = UNSET,
    tool_filter: ToolAdmission | None = None,
    role: ToolAdmission | None = None,
    depth: int | None = None,
) -> EffectiveAuthority:
    """Resolve one delegation. Never raises for a usable definition: problems become warnings.

    ``persona`` is the start request's persona: a child-scoped ``deployment:persona`` section
    (``""`` shadows the deployment persona with an empty section; ``None``/``UNSET`` keep it).
    ``tool_filter`` and ``role`` are the other two restrictions the runtime installs; they
    only narrow, and their reasons appear in ``left_out``. ``depth`` is the agent's depth when
    the caller knows it (``0`` for a top-level agent a host starts directly); ``None`` means a
    child of ``parent``, at ``parent.depth + 1``. A depth that is not a non-negative safe
    integer raises ``InvalidDepth``; an ``extensions`` path that is not an extension raises
    ``ExtensionError``.
    """
    settings = deployment.settings
    warnings = [str(w) for w in definition.warnings]
    invocation, permission, ceiling = _invocation(definition, call, parent, settings, warnings)
    isolated = invocation["isolated"].value is True
    live = parent.live or (lambda: parent.tools)
    parent_now = dict(live())
    selection, discovered = _extensions(definition, deployment, isolated, warnings)
    depth, cap, allowed, delegation = _delegation(
        definition, parent, depth, settings, isolated=isolated, warnings=warnings
    )
    at_cap = cap is not None and depth >= cap
    memory_scope = definition.memory if definition.memory is not UNSET else None
    plan, more = plan_tools(
        definition,
        settings=settings,
        extensions=selection,
        isolated=isolated,
        delegation=delegation,
        has_memory=memory_scope is not None,
        parent_tools=parent_now,
        plan_mode=permission == "plan",
    )
    warnings += more
    restriction = DefinitionRestriction(plan, parent_tools=live, parent_stamp=parent.live_stamp)
    callable_tools, left_out = _callable(
        plan,
        restriction,
        parent_now,
        deployment,
        allowed=allowed,
        tool_filter=tool_filter,
        role=role,
        ceiling=ceiling,
        warnings=warnings,
    )
    via_parent = {e for t in parent_now.values() if (e := extension_of(t))} if plan.inherit else ()
    loaded = selection.loaded(via_parent)
    warnings += _unknown_servers(plan.selectors, discovered | set(via_parent), left_out, plan.field)
    if definition.tools == () and not isolated and _loads_tools(callable_tools, loaded):
        warnings.append(
            "tools: none still lets tools of loaded extensions through; set extensions: false "
            "to remove them"
        )
    delegation_tools = tuple(n for n in DELEGATION_TOOLS if n in callable_tools)
    invocation["tool_choice"] = _tool_choice(invocation["tool_choice"], callable_tools, definition)
    checkout, folder = resolve_checkout(
        invocation["isolation"].value,
        # DESIGN rule 13: under an ancestor's worktree, the main checkout is that worktree.
        project=ceiling.root or deployment.project,
        cwd=parent.cwd,
        subfolder=deployment.project_subfolder,
    )
    if checkout.kind == "worktree" and deployment.project is None:
        warnings.append(
            "isolation: worktree needs a project to create the worktree in; without one the "
            "start fails with worktree-unavailable"
        )

    # The one decision the prompt, the sandbox's writable set and explain follow: the working
    # folder is writable exactly when a file-writing tool is callable.
    writes = not WRITE_TOOLS.isdisjoint(callable_tools)
    memory_note = None
    if memory_scope is not None:
        memory_note = MemoryNote(
            scope=memory_scope,
            path=_memory_path(
                memory_scope, definition.name, deployment, dialect=definition.dialect
            ),
            text=deployment.memory.get(memory_scope, ""),
            # Claude Code's user folder lies outside every checkout: no child writes there.
            read_only=not writes
            or (definition.dialect == "claude-code" and memory_scope == "user"),
        )
    if "Skill" in callable_tools:
        inherited = plan.inherit and "Skill" in parent_now
        skills, skills_left_out = _skills(
            definition, deployment, parent, inherited=inherited, isolated=isolated
        )
    else:
        skills = None
        skills_left_out = {name: "Skill is not callable" for name in deployment.skills}
    preloaded, more = preloaded_skills(
        definition,
        installed=deployment.skill_files,
        texts=deployment.skill_texts,
        isolated=isolated,
    )
    warnings += more
    mode = "append" if definition.prompt_mode == "append" else "replace"
    system, sections = compose_system_prompt(
        mode=mode,
        agent=definition.name,
        description=definition.description if definition.description is not UNSET else "",
        body=definition.body,
        parent_system_prompt=parent.system_prompt,
        working_folder=folder,
        environment=_environment(depth, cap, invocation["permission"].value, deployment),
        persona=persona_section(settings.persona, persona),
        callable_tools={n: t.mutating for n, t in callable_tools.items()},
        skills=skills,
        preloaded=preloaded,
        delegation=_catalog(allowed, deployment) if "Task" in delegation_tools else None,
        at_cap=at_cap,
        max_depth=cap,
        memory=memory_note,
        extension_prompts={n: t for n, t in deployment.extension_prompts.items() if n in loaded},
        cli_guidance=_cli_guidance(callable_tools),
        write_boundary=write_boundary(folder) if checkout.kind == "worktree" else "",
        writes=writes,
    )
    inherit_context = invocation["inherit_context"].value is True
    read_roots, read_roots_left_out = _read_roots(definition, ceiling, settings)
    return EffectiveAuthority(
        definition=definition,
        invocation=invocation,
        extensions_loaded=loaded,
        extensions_excluded=selection.excluded_names(via_parent),
        callable=tuple(callable_tools),
        left_out=left_out,
        restriction=restriction,
        may_delegate=bool(allowed) and not at_cap and "Task" in callable_tools,
        prompt_mode=mode,
        system_prompt=system,
        task_prefix=render_parent_context(parent.transcript) if inherit_context else "",
        checkout=checkout,
        warnings=tuple(dict.fromkeys(warnings)),
        depth=depth,
        delegation_tools=delegation_tools,
        inherited_local_tools=tuple(
            n
            for n in callable_tools
            if n in parent_now
            and n not in deployment.registry_tools
            and n not in DELEGATION_TOOLS
            and n != ASK_PARENT_TOOL
        ),
        ask_parent=ASK_PARENT_TOOL in callable_tools,
        prompt_sections=sections,
        skills=skills,
        skills_left_out=skills_left_out,
        skills_preloaded=tuple(preloaded),
        permissions=resolve_permissions(
            plan,
            (*definition.rules, *settings_rules(settings.rules)),
            callable_tools,
            mode=permission,
        ),
        ceiling=ceiling,
        network=_network(definition, ceiling, settings),
        read_roots=read_roots,
        read_roots_left_out=read_roots_left_out,
        writes=writes,
        _inputs=(definition, call, parent, deployment, persona, depth),
    )


def _invocation(
    definition: AgentDefinition,
    call: CallParams,
    parent: ParentContext,
    settings: Settings,
    warnings: list[str],
) -> tuple[dict[str, Sourced[object]], str, Ceiling]:
    """The spawn-time fields, the permission mode and the ceiling the child runs under
    (its parent's, met with the products' settings files' rules: rule 13), the mode lowered to
    it and the model a planning mode names."""
    invocation, more = resolve_invocation(
        definition,
        call,
        parent_model=parent.model,
        parent_permission=parent.permission_mode,
        settings=settings,
    )
    warnings += more
    permission, more = permission_mode(invocation["permission"].value)
    warnings += more
    products, held = product_ceiling(settings)
    warnings += held
    ceiling = parent.ceiling if products.empty else parent.ceiling.meet(products)
    permission, lowered_by = lower_mode(permission, ceiling)
    if lowered_by is not None:
        # DESIGN rule 13: never more than an ancestor (or the host) allowed.
        invocation = {**invocation, "permission": Sourced(permission, _ceiling_source(lowered_by))}
    model = invocation["model"]
    # (An alias was replaced already; a [models] entry of the name wins.)
    chosen_model = None if model.value in settings.models else model.value
    planned = plan_model(chosen_model, planning=permission == "plan")
    if planned is not None:
        # Claude Code's opusplan: Opus while the agent plans, Sonnet otherwise.
        invocation = {**invocation, "model": Sourced(planned, model.source)}
    _check_allowed(invocation, settings)
    return invocation, permission, ceiling


def _check_allowed(invocation: Mapping[str, Sourced[object]], settings: Settings) -> None:
    """Refuse (``model-not-allowed``) a child whose model, or one of its fallbacks, is outside
    the settings' ``allowed_models``; no model named: the deployment's ``default_model``."""
    if settings.allowed_models is None:
        return
    chosen = invocation["model"].value
    fallbacks = invocation.get("fallback_models")
    specs = [chosen if isinstance(chosen, str) else settings.default_model]
    if fallbacks is not None and isinstance(fallbacks.value, tuple):
        specs += fallbacks.value
    for spec in specs:
        if isinstance(spec, str):
            check_allowed(
                spec,
                settings.allowed_models,
                models=settings.models,
                aliases=settings.model_aliases,
            )


def _extensions(
    definition: AgentDefinition, deployment: Deployment, isolated: bool, warnings: list[str]
) -> tuple[ExtensionSelection, set[str]]:
    """The extensions (and MCP servers) the definition selects, and every one it could
    have named."""
    settings = deployment.settings
    chosen, hidden, more = deployment.extension_paths.choose(
        None if definition.extensions is UNSET else definition.extensions,
        project=deployment.project,
        foreign=definition.dialect != "membrane",
    )
    warnings += more
    discovered = {*deployment.extensions, *settings.mcp_servers} - hidden
    discovered |= {e for t in deployment.registry_tools.values() if (e := extension_of(t))} - hidden
    own_servers = definition.mcp_servers if isinstance(definition.mcp_servers, Mapping) else {}
    # A definition's inline servers exist for it; the ones it names join ``extensions: [...]``.
    discovered |= {name for name, spec in own_servers.items() if spec is not None}
    exclude = () if definition.exclude_extensions is UNSET else definition.exclude_extensions
    if definition.dialect == "pi":  # pi matches the names case-insensitively
        folded = {name.lower() for name in exclude}
        exclude = (*exclude, *sorted(n for n in discovered if n.lower() in folded))
    selection, more = select_extensions(
        chosen,
        exclude=exclude,
        discovered=discovered,
        isolated=isolated,
    )
    if selection.mode == "named" and own_servers:
        selection = replace(selection, named=selection.named | set(own_servers))
    warnings += more
    return selection, discovered


def _delegation(
    definition: AgentDefinition,
    parent: ParentContext,
    depth: int | None,
    settings: Settings,
    *,
    isolated: bool,
    warnings: list[str],
) -> tuple[int, int | None, tuple[str, ...], str | None]:
    """The child's depth, the cap, the agents it may start and whether the delegation
    tools are visible (``None``) or why not."""
    depth = agent_depth(parent.depth, depth)
    cap = settings.max_depth if isinstance(settings.max_depth, int) else None
    at_cap = cap is not None and depth >= cap
    if cap is not None and depth > cap:
        warnings.append(
            f"this child would run at depth {depth}, beyond max_depth = {cap}: "
            "the runtime rejects the start"
        )
    allowed = definition.allowed_subagents if definition.allowed_subagents is not UNSET else ()
    if allowed and depth > 0 and _main_agent_only(definition):
        allowed = ()
        warnings.append(
            "`tools` names Agent/Task, which in Claude Code lets only the main agent start "
            "subagents and has no effect in a subagent: this child gets no delegation tools"
        )
    delegation, more = _delegation_state(
        allowed, isolated=isolated, at_cap=at_cap, depth=depth, hide=settings.hide_delegation_at_cap
    )
    warnings += more
    return depth, cap, allowed, delegation


def _callable(
    plan: ToolPlan,
    restriction: DefinitionRestriction,
    parent_now: Mapping[str, Tool],
    deployment: Deployment,
    *,
    allowed: tuple[str, ...],
    tool_filter: ToolAdmission | None,
    role: ToolAdmission | None,
    ceiling: Ceiling,
    warnings: list[str],
) -> tuple[dict[str, Tool], dict[str, str]]:
    """Every tool the child could know, through the three filters and the ceiling:
    what it may call, and why each other one is left out."""
    # Reserved tools (``run_code``) are scope-local protocol tools outside every filter; they are
    # neither classified nor inherited here. No run_code tool is installed by default: a host
    # that wants Code Mode uses the child's view (``ToolView.code_sdk()``) or adds one itself.
    known: dict[str, Tool] = {
        name: tool
        for name, tool in {**parent_now, **deployment.registry_tools}.items()
        if not tool.reserved
    }
    if allowed:
        # The child's own delegation tools, never its parent's (rule 4: never inherited).
        for name in DELEGATION_TOOLS:
            known[name] = delegation_placeholder(name)
    if plan.ask_parent:
        known[ASK_PARENT_TOOL] = delegation_placeholder(ASK_PARENT_TOOL)
    host_named = {n for n in plan.named if n in known and known[n].origin == "host"}
    warnings += _token_warnings(plan.named - host_named, known, field=plan.field)
    return _classify(
        known,
        restriction,
        global_names=deployment.registry_tools.keys(),
        tool_filter=tool_filter,
        role=role,
        ceiling=ceiling,
    )


def _loads_tools(callable_tools: Mapping[str, Tool], loaded: Collection[str]) -> bool:
    """Whether any callable tool comes from a loaded extension."""
    return any(extension_of(tool) in loaded for tool in callable_tools.values())


def _environment(
    depth: int, cap: int | None, permission: object, deployment: Deployment
) -> list[str]:
    """The prompt's environment lines: the depth (and cap), the permission mode and what the
    deployment adds."""
    environment = [
        f"- Delegation depth: {depth}" + (f" of at most {cap}" if cap is not None else ""),
        f"- Permission mode: {permission}",
    ]
    if deployment.environment.strip():
        environment.append(deployment.environment.strip())
    return environment


def _cli_guidance(callable_tools: Mapping[str, Tool]) -> str:
    """How to reach Membrane from a shell, for an agent that can run one."""
    if "Bash" not in callable_tools:
        return ""
    return cli_guidance(can_schedule=SCHEDULE_ACTION in callable_tools)
