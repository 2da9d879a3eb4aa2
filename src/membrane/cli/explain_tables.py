"""``membrane explain``'s tables: what the JSON contract says, drawn for a terminal (imported
only to draw them; ``--json`` draws none)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from membrane.cli.screen import Screen, Styled, Table
from membrane.json_types import JSONDict
from membrane.resolve import EffectiveAuthority
from membrane.resolve.authority import mcp_server_of

__all__ = ["print_tables"]


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
