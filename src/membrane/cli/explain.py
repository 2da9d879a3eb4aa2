"""``membrane explain AGENT``: the effective authority of a child, before any model runs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from typer import Argument, Option

from membrane.cli.app import app, echo
from membrane.cli.helptext import HelpCommand
from membrane.cli.screen import Screen, Styled, Table
from membrane.errors import InvalidRequest, WorktreeUnavailable
from membrane.json_types import JSONDict

if TYPE_CHECKING:  # for annotations; the commands import what they run
    from membrane.agents.definition import AgentDefinition
    from membrane.config.values import Settings
    from membrane.resolve import CallParams, EffectiveAuthority

__all__ = ["explain"]


def _project_subfolder(project: Path) -> tuple[str, str | None]:
    """The project's place in its Git repository, as the worktree manager computes it; or a
    warning saying why a worktree cannot be made there."""
    from membrane.runtime.worktree import WorktreeManager

    try:
        return WorktreeManager(project).prefix(), None
    except WorktreeUnavailable as exc:
        detail = str(exc.data.get("reason", "")).removeprefix("it is not inside a git work tree ")
    return "", (
        f"isolation: worktree, but {project} is not inside a Git work tree {detail}: "
        "the start will fail with worktree-unavailable"
    )


def build_authority(
    agent: str,
    *,
    project: Path,
    call: CallParams,
    parent_json: object | None = None,
    home: Path | None = None,
    workspace: Path | None = None,
    top_level: bool = False,
    role: str | None = None,
    definition: AgentDefinition | None = None,
) -> tuple[EffectiveAuthority, Settings]:
    """Everything ``explain`` reads from disk, handed to the pure resolver; and the settings
    it read.

    ``top_level``: AGENT is the root agent a host starts directly (depth 0), not a child.
    ``role``: the trusted role (``settings.roles``) its start would carry, installed as the
    runtime installs it (tools it leaves out have the reason ``role``).
    ``definition``: resolve this definition (an editor's unsaved text, parsed) in place of the
    one the catalog dispatches AGENT to.
    """
    from membrane.agents.skills import preload_texts
    from membrane.mcp.named import mounts_servers
    from membrane.models.naming import model_view
    from membrane.resolve import ParentContext, resolve
    from membrane.resolve.ceiling import Ceiling
    from membrane.runtime.depth import check_cap
    from membrane.workspace import Workspace

    if not agent.strip():
        raise InvalidRequest(
            "AGENT is empty: name the agent type to explain (membrane agents list shows them)",
            field="agent",
        )
    ws = Workspace.open(project, workspace=workspace, home=home)
    admission = None
    if role is not None:
        from membrane.resolve.roles import RoleRestriction

        spec = ws.settings.roles.get(role)
        if spec is None:
            known = ", ".join(sorted(ws.settings.roles))
            raise InvalidRequest(
                f"unknown role {role!r}; roles in settings: {known}", field="role", role=role
            )
        admission = RoleRestriction(role, spec)
    warnings: list[str] = []
    if definition is None:
        dispatch = ws.catalog.dispatch(agent, child=not top_level)
        warnings += [dispatch.note] if dispatch.note else []
        definition = dispatch.definition

    def compute() -> EffectiveAuthority:
        if parent_json is None:
            # A top-level session that sees the whole registry (with --top-level: the host
            # that starts AGENT directly).
            parent = ParentContext(
                tools=dict(ws.registry.tools()),
                permission_mode=ws.settings.permission_mode,
                cwd=str(ws.project),
                ceiling=Ceiling.from_settings(ws.settings.permission_mode),
            )
        else:
            from membrane.cli.explain_parent import parent_context  # only --parent reads it

            parent = parent_context(
                parent_json,
                registry=ws.registry,
                permission=ws.settings.permission_mode,
                cwd=ws.project,
                top_level=top_level,
            )
        deployment = replace(
            ws.deployment(),
            memory=ws.memory_for(definition),
            skill_texts=preload_texts(definition, ws.skills.skills),
        )
        depth = 0 if top_level else None
        authority = resolve(definition, call, parent, deployment, depth=depth, role=admission)
        if authority.checkout.kind == "worktree":
            subfolder, problem = _project_subfolder(ws.project)
            if problem is not None:
                warnings.append(problem)
            elif subfolder:
                deployment = replace(deployment, project_subfolder=subfolder)
                authority = resolve(
                    definition, call, parent, deployment, depth=depth, role=admission
                )
        return authority

    warnings.extend(ws.warnings)
    if mounts_servers(definition, ws.settings.mcp_servers):
        # The servers the definition asks for are started, as a run would, to list their tools,
        # unless their last listing is cached. (When none would be mounted, the MCP client is
        # not even imported: explain is a pure read.)
        import anyio

        from membrane.mcp.mount import McpServers

        async def with_servers() -> EffectiveAuthority:
            async with McpServers.of(ws) as servers:
                wanted = [n for n in servers.prepare(definition) if not servers.servers[n].cached]
                for _name, problem in sorted((await servers.ensure(wanted)).items()):
                    warnings.append(f"{problem}; its tools are not listed")
                return compute()

        authority = anyio.run(with_servers)
    else:
        authority = compute()
    # A start beyond the cap is refused (DESIGN rule 4), so explain refuses it the same way.
    cap = ws.settings.max_depth
    check_cap(authority.depth, cap if isinstance(cap, int) else None, agent=agent, parent_id=None)
    planning = authority.permissions.mode == "plan"
    problem = model_view(*_model_field(authority), ws.settings, planning=planning).get("error")
    if isinstance(problem, dict):
        warnings.append(f"{problem['message']}: the start will fail with unknown-model")
    authority = _rendered(
        authority,
        agent_type=agent,
        project=ws.project,
        settings_persona=ws.settings.persona,
        parent=parent_json,
        warnings=warnings,
    )
    return replace(authority, warnings=(*warnings, *authority.warnings)), ws.settings


#: What explain shows for a persona variable that only a start can fill.
RUN_ID_SHOWN = "<run_id>"
PARENT_ID_SHOWN = "<parent_id>"


def _rendered(
    authority: EffectiveAuthority,
    *,
    agent_type: str,
    project: Path,
    settings_persona: str | None,
    parent: object | None,
    warnings: list[str],
) -> EffectiveAuthority:
    """The authority with its persona rendered as the runtime's setup renders it (the same
    ``render_sections``), so the system prompt is the one the first request carries. A persona
    the runtime refuses (``settings.persona`` included, even where no section shows it) is
    refused here with ``invalid-persona``. ``{{run_id}}`` (and ``{{parent_id}}`` below a
    ``--parent``) exist only once a start runs: they are shown as placeholders, with a
    warning."""
    from membrane.runtime.persona import (
        PERSONA_SECTION,
        check_persona,
        join_sections,
        persona_values,
        placeholders,
        render_sections,
    )

    if settings_persona is not None:
        check_persona(settings_persona, where="settings.persona")
    model = authority.invocation["model"].value
    values = persona_values(
        agent=authority.definition.name,
        agent_type=agent_type,
        cwd=str(Path(authority.checkout.path)) if authority.checkout.path else "",
        depth=authority.depth,
        model=model if isinstance(model, str) else None,
        parent_id=None if parent is None else PARENT_ID_SHOWN,
        project=str(project),
        run_id=RUN_ID_SHOWN,
    )
    sections = render_sections(authority.prompt_sections, values)
    persona = next((s for s in authority.prompt_sections if s.name == PERSONA_SECTION), None)
    for name, shown in (("run_id", RUN_ID_SHOWN), ("parent_id", PARENT_ID_SHOWN)):
        if persona is not None and values[name] == shown and name in placeholders(persona.text):
            warnings.append(
                f"the persona names {{{{{name}}}}}, known only when the child starts; "
                f"shown as {shown}"
            )
    return replace(authority, system_prompt=join_sections(sections), prompt_sections=sections)


def _model_field(authority: EffectiveAuthority) -> tuple[object, str]:
    field = authority.invocation["model"]
    return field.value, field.source


def sandbox_view(authority: EffectiveAuthority, *, project: Path, settings: Settings) -> JSONDict:
    """The OS boundary the child's commands would run under, and what this machine offers."""
    from membrane.sandbox import SandboxPolicy, boundary_summary, machine_support

    writes = authority.writes
    policy = SandboxPolicy.from_settings(settings).for_agent(
        network=authority.network.value, read_paths=authority.own_read_roots
    )
    summary = boundary_summary(policy, project, agent=authority.definition.name, writes=writes)
    if authority.checkout.kind == "worktree":
        summary["checkout"] = authority.checkout.path
        summary["note"] = (
            "shown for the main checkout; in its worktree the child may also write that "
            "worktree's git admin folder and the repository's objects, nothing else of the "
            "repository"
        )
    summary["applies_to"] = [name for name in authority.callable if name == "Bash"]
    summary["machine"] = machine_support().to_json()
    return summary


def workflow_view(authority: EffectiveAuthority) -> dict[str, object] | None:
    """The workflow a definition opts into, as a run of it starts (``None``: none)."""
    name = authority.definition.workflow
    if not isinstance(name, str):
        return None
    from membrane.workflow.planning import builtin_workflows

    workflow = builtin_workflows().get(name)
    if workflow is None:
        return {"name": name, "error": f"unknown-workflow: Membrane ships no workflow {name!r}"}
    return workflow.definition.explain(list(authority.callable))


_CALL = Option("--call", help="Call parameters as JSON, or @FILE holding them.")
_PROJECT = Option("--project", help="The project directory (default: the current directory).")
_WORKSPACE = Option(
    "--workspace", help="The workspace holding .agents/agents (default: the project)."
)
_PARENT = Option(
    "--parent", help="The delegating parent as JSON, or @FILE (tools, model, transcript)."
)
_TOP_LEVEL = Option(
    "--top-level",
    help="Explain AGENT as the root agent a host starts directly (depth 0), not as a child.",
)
_JSON = Option("--json", help="Print the JSON contract instead of tables.")
_ROLE = Option(
    "--role",
    help="Explain AGENT as a caller with this role of the settings would start it (default: "
    "no role, the owner's own authority).",
)


@app.command("explain", cls=HelpCommand)
def explain(
    agent: Annotated[
        str, Argument(metavar="AGENT", help="The agent type to explain, as a caller would name it.")
    ],
    call: Annotated[str | None, _CALL] = None,
    project: Annotated[Path | None, _PROJECT] = None,
    workspace: Annotated[Path | None, _WORKSPACE] = None,
    parent: Annotated[str | None, _PARENT] = None,
    top_level: Annotated[bool, _TOP_LEVEL] = False,
    role: Annotated[str | None, _ROLE] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Show what AGENT would really get: fields and sources, prompt, tools, checkout.

    AGENT is explained as a child of the parent (--parent, or a top-level session), one level
    below it; --top-level explains it as the root agent instead.

    To learn the tools of the project's extensions, explain imports every module in
    <project>/.membrane/extensions and runs its setup(), as a run does: explain only projects
    whose extensions you trust.
    """
    from membrane.agents.definition import UNSET
    from membrane.config.budget import budget_view
    from membrane.models.naming import model_view
    from membrane.resolve import CallParams
    from membrane.resolve.warnings import warning_objects

    call_params = CallParams()
    parent_json: object | None = None
    if call is not None or parent is not None:
        from membrane.cli.explain_parent import read_json  # the JSON options' reader

        if call is not None:
            call_params = CallParams.from_mapping(read_json("--call", call), where="--call")
        if parent is not None:
            parent_json = read_json("--parent", parent)
    root = (project or Path.cwd()).resolve()
    authority, settings = build_authority(
        agent,
        project=root,
        call=call_params,
        parent_json=parent_json,
        workspace=None if workspace is None else workspace.resolve(),
        top_level=top_level,
        role=role,
    )
    sandbox = sandbox_view(authority, project=root, settings=settings)
    planning = authority.permissions.mode == "plan"
    model = model_view(*_model_field(authority), settings, planning=planning)
    own = authority.definition.budget
    budget = budget_view(
        {
            "definition": None if own is UNSET else own,
            "settings": settings.budget if top_level else None,
        }
    )
    gate = workflow_view(authority)
    if as_json:
        from membrane.resolve.digest import authority_digest

        payload = {**authority.to_json(), "sandbox": sandbox, "model": model, "budget": budget}
        payload["role"] = role
        # The digest the child's ``published`` event carries when it runs as explained.
        payload["authority_digest"] = authority_digest(
            authority,
            system=authority.system_prompt,
            tools=authority.callable,
            sandbox=sandbox,
            budget={k: v["limit"] for k, v in budget.items() if isinstance(v, dict)},
        )
        # Each field a settings file set, with that file (Membrane's or another product's).
        payload["settings"] = settings.sourced()
        definition = authority.definition
        payload["warnings"] = warning_objects(
            authority.warnings, definition.warnings, file=definition.path
        )
        if gate is not None:
            payload["workflow"] = gate
        echo(json.dumps(payload, indent=2))
    else:
        print_tables(
            authority,
            model=model,
            budget=budget,
            sandbox=sandbox,
            workflow=gate,
            settings=settings.sourced(),
        )


# -- the tables: what the JSON contract says, drawn for a terminal ---------------------------
def print_tables(
    authority: EffectiveAuthority,
    *,
    model: dict[str, object],
    budget: JSONDict,
    sandbox: JSONDict,
    workflow: dict[str, object] | None,
    settings: dict[str, dict[str, object]] | None = None,
) -> None:
    """The authority, its model, budget, sandbox and workflow, and each settings field a file
    set (``Settings.sourced()``), as ``explain`` without ``--json`` prints them."""
    locked = workflow.get("locked") if workflow is not None else None
    _print_main(authority, model, budget, locked if isinstance(locked, dict) else {})
    _print_sandbox(sandbox)
    if settings:
        _print_settings(settings)
    if workflow is not None:
        _print_workflow(workflow)


def _model_line(view: dict[str, object]) -> str:
    if view.get("provider") is None and "error" not in view:
        return f"{view.get('note')} (source {view['source']})"
    if "error" in view:
        return f"{view['spec']}: unknown (source {view['source']})"
    where = f" at {view['base_url']}" if view.get("base_url") else ""
    note = f"; {view['note']}" if view.get("note") else ""
    return (
        f"{view['provider']} {view['model']}{where} (spec {view['spec']}, via {view['via']}, "
        f"source {view['source']}{note})"
    )


def _print_sandbox(summary: JSONDict) -> None:
    table = Table(("", ""), title="Sandbox", show_header=False)
    for key in ("backend", "requested", "error", "writable", "read_only", "network", "note"):
        if key in summary:
            value = summary[key]
            shown = "\n".join(map(str, value)) if isinstance(value, list) else str(value)
            table.add_row(key, shown or "-")
    machine = summary.get("machine")
    if isinstance(machine, dict):
        for name in ("bubblewrap", "landlock"):
            entry = machine.get(name)
            if isinstance(entry, dict):
                table.add_row(f"machine: {name}", str(entry.get("detail")))
    Screen().table(table)


def _print_settings(settings: dict[str, dict[str, object]]) -> None:
    table = Table(("setting", "value", "source"), title="Settings")
    for name, entry in settings.items():
        value = entry["value"]
        if name == "product_hooks" and isinstance(value, list):
            shown = f"hooks of {len(value)} file(s)"
        elif isinstance(value, list):
            shown = ", ".join(map(str, value))
        else:
            shown = str(value)
        table.add_row(name, shown, str(entry["source"]))
    Screen().table(table)


def _print_workflow(view: dict[str, object]) -> None:
    screen = Screen()
    if "error" in view:
        screen.line(f"workflow {view['name']}: {view['error']}", style="red")
        return
    table = Table(("phase", "unlocks"), title=f"Workflow {view['name']}")
    for phase in view["phases"]:  # type: ignore[attr-defined]
        mark = " (starts here)" if phase["name"] == view["phase"] else ""
        table.add_row(phase["name"] + mark, ", ".join(phase["unlocks"]) or "-")
    screen.table(table)
    locked = view["locked"]
    if locked:
        for tool, phases in locked.items():  # type: ignore[attr-defined]
            screen.line(f"{tool}: locked until {' or '.join(phases)}")


def _print_main(
    authority: EffectiveAuthority,
    model: dict[str, object],
    budget: JSONDict,
    locked: Mapping[str, list[str]],
) -> None:
    screen = Screen()
    definition = authority.definition
    screen.line(f"{definition.name}  {definition.root}: {definition.path}", style="bold")

    invocation = Table(("field", "value", "source"), title="Invocation")
    for name, sourced in authority.invocation.items():
        invocation.add_row(name, json.dumps(sourced.value), sourced.source)
    screen.table(invocation)

    # A third column names the MCP server of each mcp__SERVER__TOOL, when there is one.
    from membrane.resolve.authority import mcp_server_of

    servers = {n: s for n in (*authority.callable, *authority.left_out) if (s := mcp_server_of(n))}
    tools = Table(("tool", "status", *(["server"] if servers else [])), title="Tools")
    for name in authority.callable:
        # A tool the workflow's phases lock is callable only once a phase unlocks it.
        status = (
            Styled(f"locked until {' or '.join(locked[name])}", "yellow")
            if name in locked
            else Styled("callable", "green")
        )
        tools.add_row(name, status, *([servers.get(name, "")] if servers else []))
    for name, reason in sorted(authority.left_out.items()):
        status = Styled(f"left out: {reason}", "dim")
        tools.add_row(name, status, *([servers.get(name, "")] if servers else []))
    screen.table(tools)
    _print_permissions(screen, authority)
    _print_hooks(screen, authority)

    if authority.skills is not None or authority.skills_left_out:
        skills = Table(("skill", "status"), title="Skills")
        for name in sorted(authority.skills or {}):
            skills.add_row(name, Styled("loadable with Skill", "green"))
        for name, reason in sorted(authority.skills_left_out.items()):
            skills.add_row(name, Styled(f"left out: {reason}", "dim"))
        screen.table(skills)

    facts = Table(("", ""), title="Composition", show_header=False)
    facts.add_row("extensions loaded", ", ".join(authority.extensions_loaded) or "none")
    facts.add_row("extensions excluded", ", ".join(authority.extensions_excluded) or "none")
    facts.add_row("prompt mode", authority.prompt_mode)
    facts.add_row("checkout", f"{authority.checkout.kind} ({authority.checkout.path or '-'})")
    roots = [f"{root.value} ({root.source})" for root in authority.read_roots]
    roots += [f"{path} (left out: {why})" for path, why in authority.read_roots_left_out.items()]
    facts.add_row("read roots", "\n".join(roots) or "none (the checkout and the system's folders)")
    facts.add_row("depth", str(authority.depth))
    facts.add_row("model", _model_line(model))
    limits = [
        f"{kind}={entry['limit']} ({entry['source']})"
        for kind, entry in budget.items()
        if isinstance(entry, dict)
    ]
    # A child also draws on what remains of its ancestors' budgets when it starts.
    facts.add_row("budget", ", ".join(limits) or "none of its own")
    facts.add_row("may delegate", "yes" if authority.may_delegate else "no")
    screen.table(facts)

    screen.rule("System prompt")
    screen.line(authority.system_prompt)
    if authority.task_prefix:
        screen.rule("Task prefix")
        screen.line(authority.task_prefix)
    if authority.warnings:
        screen.rule("Warnings")
        for warning in authority.warnings:
            screen.line(f"warning: {warning}", style="yellow")


def _print_permissions(screen: Screen, authority: EffectiveAuthority) -> None:
    """Each governed tool's rules, in the order they apply (the last match wins)."""

    permissions = authority.permissions
    if not permissions.tools and permissions.mode == "default":
        return
    title = (
        f"Permissions (mode {permissions.mode}; the last matching rule wins, "
        "but a matching argument rule's deny, then ask, comes first)"
    )
    table = Table(("tool", "rule", "verdict", "from"), title=title)
    for name, rules in sorted(permissions.tools.items()):
        for rule in rules:
            text = (rule.text or rule.tool) + (f" ({rule.reason})" if rule.reason else "")
            table.add_row(name, text, rule.verdict, rule.source)
        default = permissions.default(name)
        table.add_row(name, Styled("any other call", "dim"), default, "default")
    if permissions.inherits_parent:
        table.add_row("*", Styled("the parent's rules", "dim"), "-", "inherit")
    screen.table(table)


def _print_hooks(screen: Screen, authority: EffectiveAuthority) -> None:
    """The definition's command hooks, in the order they run, and who set them."""

    definition = authority.definition
    hooks = definition.hooks
    if not isinstance(hooks, tuple) or not hooks:
        return
    table = Table(("event", "matcher", "command", "timeout", "from"), title="Hooks")
    for hook in hooks:
        table.add_row(
            f"{hook.event} ({hook.point})",
            hook.matcher or "*",
            hook.command,
            f"{hook.timeout:g} s",
            definition.source_of("hooks"),
        )
    screen.table(table)
