"""``membrane doctor``: what this machine and project offer, and what to do about what is missing.

Sections: the runtime (the resolved socket, and whether a runtime answers there with its
``runtimeInfo``), the caller (its role, from trusted sources only), the project (its id and state
file, checked read only with ``PRAGMA quick_check``), the sandbox (what the machine offers and
what the settings choose), MCP servers configured, external agent CLIs detected, and the skill
roots. It exits 1 when something a command needs is missing (a sandbox the settings name that
this machine lacks, broken settings, a state file that fails its check),
and says what to do.

``membrane doctor --model NAME`` checks one model instead: it sends one tiny request (no tools,
one attempt, at most ``PROBE_TOKENS`` tokens of reply) to what NAME names (a ``[models]`` entry,
an alias or a spec) and reports the provider, base URL, model id, latency and the reply text or
the error with its code; it exits 1 when the request failed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

from typer import Exit, Option

from membrane.cli.app import app, echo, safe_text, warning_json
from membrane.cli.helptext import HelpCommand

_JSON = Option("--json", help="Print one JSON document.")
_PROJECT = Option("--project", help="The project directory (default: the current directory).")
_MODEL = Option(
    "--model",
    help="Check this model instead (a [models] entry, an alias or a spec): send it one tiny "
    "request and report what came back.",
)

#: The reply a model probe asks for is at most this many tokens.
PROBE_TOKENS = 16


async def _runtime_info(path: Path) -> dict[str, Any] | None:
    import anyio

    from membrane.server.client import Client
    from membrane.server.transport import probe_socket

    if not path.exists() or not probe_socket(path):
        return None
    try:
        with anyio.fail_after(5):
            async with Client.connect(path) as client:
                reply = await client.request(
                    "initialize", {"clientInfo": {"name": "membrane-doctor"}}
                )
    except Exception:
        return None
    return dict(reply.get("runtimeInfo", {})) if isinstance(reply, dict) else None


def report(
    project: Path, *, queue_state: str | None = None
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The doctor's document and the problems (each ``{problem, fix}``); ``queue_state``: the
    shared state whose queue is checked (``provider = "dbos"``), else the project's."""
    import anyio

    from membrane.agents.skills import discover_skills, skill_roots
    from membrane.config.load import load_settings, membrane_home
    from membrane.errors import MembraneError
    from membrane.runtime.providers.clis import detect_clis
    from membrane.sandbox.machine import (
        backend_confines,
        choose_backend,
        landlock_user_namespace,
        machine_support,
        root_note,
    )
    from membrane.server.transport import default_socket_path
    from membrane.store.location import locate_state, project_id
    from membrane.store.sqlite import check_file

    problems: list[dict[str, str]] = []
    home = membrane_home()
    socket_path = default_socket_path()
    info = anyio.run(_runtime_info, socket_path)
    doc: dict[str, Any] = {
        "runtime": {
            "socket": str(socket_path),
            "answers": info is not None,
            "runtimeInfo": info,
            "note": None
            if info is not None
            else "no runtime answers; runtime-backed commands start `membrane serve` themselves",
        }
    }
    try:
        settings = load_settings(project=project, home=home)
    except MembraneError as exc:
        problems.append({"problem": f"{exc.code}: {exc.message}", "fix": "fix the settings file"})
        settings = None
    token = os.environ.get("MEMBRANE_TOKEN")
    from membrane.server.owner import read_owner_token

    is_owner = not token and read_owner_token(home) is not None
    owner_role = settings.default_role if settings is not None else None
    doc["caller"] = {
        "role": (
            "the role of the run that minted MEMBRANE_TOKEN (checked by the runtime)"
            if token
            else (os.environ.get("MEMBRANE_ROLE") or owner_role if is_owner else "external")
        ),
        "source": "token"
        if token
        else ("owner token" if is_owner else "no proof (a caller without a token)"),
        "owner": is_owner,
        "claimed_role": os.environ.get("MEMBRANE_ROLE"),
    }
    state = locate_state(project, home=home)
    # The state file is checked read only (its write-ahead log, its application id and
    # ``PRAGMA quick_check``); a missing one is not created.
    damage = check_file(state.path) if state.exists else []
    doc["project"] = {
        "root": str(project),
        "id": project_id(project),
        "state": str(state.path),
        "state_exists": state.exists,
        "state_check": None if not state.exists else (damage or "ok"),
    }
    if damage:
        problems.append(
            {
                "problem": f"store-damaged: {state.path} fails its check: {'; '.join(damage[:3])}",
                "fix": "restore the state file from a copy, or move it aside (with its -wal and "
                "-shm files) to start a new store (docs/durability.md)",
            }
        )
    if settings is not None and settings.provider == "dbos":
        doc["queue"] = _queue(settings, queue_state or state.path, problems)
    support = machine_support()
    machine = {**support.to_json(), "landlock_userns": landlock_user_namespace()}
    sandbox: dict[str, Any] = {"machine": machine, "as_root": root_note(support)}
    if settings is not None:
        sandbox["setting"] = settings.sandbox
        try:
            sandbox["in_force"] = choose_backend(settings.sandbox, support)
            sandbox["confines"] = backend_confines(sandbox["in_force"])
        except MembraneError as exc:
            sandbox["in_force"] = None
            problems.append(
                {
                    "problem": f"{exc.code}: {exc.message}",
                    "fix": "install bubblewrap (apt-get install bubblewrap) or set "
                    'sandbox = "auto" in config.toml',
                }
            )
        if sandbox.get("in_force") == "guard":
            sandbox["advice"] = "no OS sandbox here: install bubblewrap for the strongest boundary"
    doc["sandbox"] = sandbox
    servers = settings.mcp_servers if settings is not None else {}
    doc["mcp_servers"] = {
        name: {"command": getattr(spec, "command", None), "url": getattr(spec, "url", None)}
        for name, spec in sorted(servers.items())
    }
    doc["external_clis"] = [cli.to_dict() for cli in detect_clis()]
    catalog = discover_skills(skill_roots(project=project, home=home))
    doc["skills"] = {
        "roots": [str(root) for root in catalog.roots],
        "skills": sorted(catalog.skills),
        "warnings": [warning_json(p) for p in catalog.problems],
    }
    doc["problems"] = problems
    return doc, problems


async def _probe(name: str, project: Path) -> dict[str, Any]:
    """One tiny request to the model ``name`` names: what was asked of whom, and what came
    back (``reply``) or went wrong (``error``: ``{code, message}``)."""
    from membrane.config.load import load_settings, membrane_home
    from membrane.errors import MembraneError
    from membrane.models.base import Message, ModelRequest
    from membrane.models.retry import RetryPolicy
    from membrane.models.sdk import SdkModel
    from membrane.models.specs import build_model, resolve_spec

    settings = load_settings(project=project, home=membrane_home())
    choice = resolve_spec(name, models=settings.models, aliases=settings.model_aliases)
    doc: dict[str, Any] = {**choice.to_dict(), "ok": False, "latency_ms": None}
    doc["reply"] = doc["error"] = None
    request = ModelRequest(
        agent="doctor",
        run_id="doctor",
        system="You are being checked. Reply with the single word: ok",
        messages=(Message(role="user", content="Reply with the single word: ok"),),
    )
    started = time.monotonic()
    try:
        model = build_model(choice)
        if isinstance(model, SdkModel):
            # One attempt: the doctor reports what the server answers, not what retries hide.
            model.retry = RetryPolicy(max_retries=0)
            model.max_tokens = PROBE_TOKENS
            doc["base_url"] = model.base_url
        try:
            response = await model.request(request)
        finally:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()
    except MembraneError as exc:
        doc["error"] = {"code": exc.code, "message": exc.message}
    else:
        doc["ok"] = True
        doc["reply"] = response.text
    doc["latency_ms"] = round((time.monotonic() - started) * 1000)
    return doc


def _model_check(name: str, project: Path, *, as_json: bool) -> None:
    import anyio

    checked = anyio.run(_probe, name, project)
    if as_json:
        echo(safe_text(json.dumps({"model": checked}, indent=2)))
    else:
        lines = [
            f"model:    {checked['spec']} ({checked['via']})",
            f"provider: {checked['provider']}",
            f"base_url: {checked['base_url'] or '(the provider default)'}",
            f"model id: {checked['model']}",
            f"latency:  {checked['latency_ms']} ms",
        ]
        if checked["ok"]:
            lines.append(f"reply:    {checked['reply']!r}")
        else:
            error = checked["error"]
            lines.append(f"error:    {error['code']}: {error['message']}")
        echo(safe_text("\n".join(lines)))
    if not checked["ok"]:
        raise Exit(1)


def _queue(settings: Any, state: str | Path, problems: list[dict[str, str]]) -> dict[str, Any]:
    """The queue of ``provider = "dbos"``: its database, its children and its workers."""
    from membrane.runtime.providers.dbos import queue_database, queue_report
    from membrane.store.select import chosen_state

    where = chosen_state(state, settings_url=settings.state_url) or state
    report = queue_report(queue_database(where), queue=settings.queue_name)
    if "error" in report:
        problems.append(
            {
                "problem": f"queue-unavailable: queue {report['queue']!r} at "
                f"{report['database']}: {report['error']}",
                "fix": "start `membrane worker` on this state (it prepares the queue), or bring "
                "its database back (docs/scale.md)",
            }
        )
    for worker in report.get("workers", ()):
        if worker["state"] == "gone":
            problems.append(
                {
                    "problem": f"{worker['runs']} run(s) on the queue were taken by worker "
                    f"{worker['worker']}, which no longer runs",
                    "fix": "keep a `membrane worker` running: each one queues such runs again "
                    "at its next sweep (docs/scale.md)",
                }
            )
    return report


@app.command("doctor", cls=HelpCommand)
def doctor(
    as_json: Annotated[bool, _JSON] = False,
    project: Annotated[Path | None, _PROJECT] = None,
    model: Annotated[str | None, _MODEL] = None,
    state: Annotated[
        str | None,
        Option(
            "--state",
            help="The shared state whose queue is checked when the settings say provider = "
            '"dbos": a file or a postgresql:// URL (default: the project\'s state).',
        ),
    ] = None,
) -> None:
    """What this machine and project offer, and what to do about anything missing.

    With --model NAME: send that model one tiny request and report what came back (exit 1 when
    it failed)."""
    from membrane.workspace import require_folder

    folder = require_folder("--project", project or Path.cwd())
    if model is not None:
        _model_check(model, folder, as_json=as_json)
        return
    doc, problems = report(folder, queue_state=state)
    if as_json:
        echo(safe_text(json.dumps(doc, indent=2)))
    else:
        runtime = doc["runtime"]
        lines = [
            f"socket:      {runtime['socket']}",
            "runtime:     "
            + (
                f"answers (pid {runtime['runtimeInfo'].get('pid')}, "
                f"version {runtime['runtimeInfo'].get('version')})"
                if runtime["answers"]
                else runtime["note"]
            ),
            f"caller role: {doc['caller']['role']} ({doc['caller']['source']})",
            f"project:     {doc['project']['root']}",
            f"state:       {doc['project']['state']}"
            + (
                f" (check: {'ok' if doc['project']['state_check'] == 'ok' else 'damaged'})"
                if doc["project"]["state_exists"]
                else " (not created yet)"
            ),
            f"sandbox:     {doc['sandbox'].get('in_force')} "
            f"(setting {doc['sandbox'].get('setting')}; machine offers "
            f"{doc['sandbox']['machine']['strongest']})",
            *(
                [f"confines:    {doc['sandbox']['confines']}"]
                if doc["sandbox"].get("confines")
                else []
            ),
            *(
                [f"as root:     {doc['sandbox']['as_root']}"]
                if doc["sandbox"].get("as_root")
                else []
            ),
            "mcp servers: " + (", ".join(doc["mcp_servers"]) or "none configured"),
            "agent CLIs:  "
            + (
                ", ".join(
                    f"{c['id']} {c['version'] or ''}".strip()
                    for c in doc["external_clis"]
                    if c["status"] == "installed"
                )
                or "none found on PATH"
            ),
        ]
        lines += [
            f"             {c['id']}: {c['status']} ({c['detail']})"
            for c in doc["external_clis"]
            if c["status"] in ("failed", "timeout")
        ]
        lines.append("skill roots: " + (", ".join(doc["skills"]["roots"]) or "none"))
        if "queue" in doc:
            queue = doc["queue"]
            lines.append(
                f"queue:       {queue['queue']} at {queue['database']}: "
                + (
                    f"{queue['waiting']} waiting, {queue['running']} running on "
                    f"{len(queue['workers'])} worker(s)"
                    if "waiting" in queue
                    else "unavailable"
                )
            )
            lines += [
                f"             {w['worker']}: {w['runs']} run(s), {w['state']}"
                for w in queue.get("workers", ())
            ]
        for problem in problems:
            lines.append(f"problem:     {problem['problem']}\n  fix:       {problem['fix']}")
        echo(safe_text("\n".join(lines)))
    if problems:
        raise Exit(1)
