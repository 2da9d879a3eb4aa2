"""The console's routes: a Starlette application over one project and one runtime session.

The application gets its collaborators passed in (``Parts``): how to connect to the runtime
(the CLI's runtime session), how to explain a definition and how to read a stored run (the
same functions ``membrane explain`` and ``membrane show`` print), and the doctor's report. Every
request passes the ``Guard`` first (token, host, origin); every ``POST`` also brings the page's
CSRF token. A ``MembraneError`` becomes a page with its code and an HTTP status by family.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import membrane.console.agents_html as agents_html
import membrane.console.html as html
import membrane.console.runs_html as runs_html
from membrane.agents.catalog import Catalog
from membrane.agents.definition import AgentDefinition
from membrane.console.editor import digest, edit_from_form
from membrane.console.link import RuntimeLink, Session
from membrane.console.security import CSRF_FIELD, CSRF_HEADER, Guard, GuardMiddleware
from membrane.errors import (
    ConfigError,
    DefinitionChanged,
    MembraneError,
    NotFound,
    PermissionRefused,
    UnknownAgent,
)
from membrane.json_types import JSONDict
from membrane.tools.permissions import Approver

__all__ = ["Parts", "build_app"]

STATIC = Path(__file__).parent / "static"


@dataclass(frozen=True)
class Parts:
    """What the console is made of, passed in by whoever starts it (``membrane console``)."""

    project: Path
    #: The project's catalog, read again on every call (definitions change on disk).
    catalog: Callable[[], Catalog]
    #: ``membrane explain --json`` for an agent, or for an unsaved definition of it.
    explain: Callable[[str, AgentDefinition | None], JSONDict]
    #: ``membrane show --json`` for a stored run.
    report: Callable[[str], JSONDict]
    #: ``membrane doctor --json``.
    doctor: Callable[[], JSONDict]
    #: A runtime session whose ``approval/request`` goes to the approver given.
    connect: Callable[[Approver], AbstractAsyncContextManager[Session]]
    #: ``membrane outbox list [--dead] --json``'s items: ``{"pending": [...], "dead": [...]}``.
    outbox: Callable[[], Mapping[str, list[JSONDict]]]
    #: ``membrane outbox retry ID``: the dead letter queued again.
    retry: Callable[[int], JSONDict]
    #: ``membrane lineage --json``'s roots.
    lineage: Callable[[], list[JSONDict]]
    #: ``membrane schedule list --json``'s schedules.
    schedules: Callable[[], list[JSONDict]]


def _status(exc: MembraneError) -> int:
    if isinstance(exc, PermissionRefused):
        return 403
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, DefinitionChanged):
        return 409
    if isinstance(exc, ConfigError):
        return 422
    return 400


def build_app(parts: Parts, guard: Guard) -> GuardMiddleware:
    """The console for ``parts`` behind ``guard``."""
    link = RuntimeLink()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with parts.connect(link.approve) as session:
            await link.attach(session)
            async with anyio.create_task_group() as group:
                group.start_soon(link.pump)
                yield
                group.cancel_scope.cancel()

    def render(
        request: Request, title: str, body: str, *, active: str, status: int = 200
    ) -> Response:
        text = html.page(
            title, body, csrf=guard.csrf, active=active, role=link.role, may_write=link.may_write
        )
        return HTMLResponse(text, status_code=status)

    def handled(
        active: str, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request)
            except MembraneError as exc:
                box = html.error_box(exc.code, exc.message)
                if request.headers.get("hx-request"):
                    return HTMLResponse(box, status_code=_status(exc))
                return render(request, "Refused", box, active=active, status=_status(exc))

        return endpoint

    async def form_of(request: Request) -> FormData:
        form = await request.form()
        token = form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
        guard.check_csrf(token if isinstance(token, str) else None)
        return form

    def editable(name: str) -> AgentDefinition:
        definition = parts.catalog().get(name)
        if definition is None or definition.builtin or definition.dialect != "membrane":
            raise UnknownAgent(
                f"no Membrane-dialect definition file named {name!r} to edit; the Agents page "
                "lists them",
                requested=name,
            )
        return definition

    async def explained(name: str, definition: AgentDefinition | None) -> str:
        try:
            payload = await anyio.to_thread.run_sync(parts.explain, name, definition)
        except MembraneError as exc:
            return html.error_box(exc.code, exc.message)
        return agents_html.explain_panel(payload)

    # -- agents ------------------------------------------------------------------------

    async def agents(request: Request) -> Response:
        cat = await anyio.to_thread.run_sync(parts.catalog)
        problems = [str(w) for w in cat.warnings] + [
            f"{e.data.get('path')}:{e.data.get('line') or 1}: {e.code}: {e.message}"
            for e in cat.errors
        ]
        body = agents_html.catalog(cat.definitions(), cat.shadowed, problems, project=parts.project)
        return render(request, "Agents", body, active="agents")

    async def agent(request: Request) -> Response:
        name = request.path_params["name"]
        definition = editable(name)
        text = Path(definition.path).read_text(encoding="utf-8")
        body = agents_html.editor(
            definition,
            csrf=guard.csrf,
            digest=digest(text),
            explain_html=await explained(name, None),
            saved=request.query_params.get("saved") == "1",
            project=parts.project,
        )
        return render(request, f"Agent {name}", body, active="agents")

    async def explain(request: Request) -> Response:
        name = request.path_params["name"]
        form = await form_of(request)
        try:
            edit = edit_from_form(editable(name), form)
        except ConfigError as exc:
            return HTMLResponse(html.error_box(exc.code, exc.message))
        return HTMLResponse(await explained(name, edit.definition))

    async def preview(request: Request) -> Response:
        name = request.path_params["name"]
        form = await form_of(request)
        edit = edit_from_form(editable(name), form)
        values = {key: form.getlist(key) for key in form}
        body = agents_html.preview(name, edit.diff(), values, csrf=guard.csrf)
        return render(request, f"Save {name}?", body, active="agents")

    async def save(request: Request) -> Response:
        name = request.path_params["name"]
        form = await form_of(request)
        link.require_write("save agent definitions")
        edit = edit_from_form(editable(name), form)
        edit.save(str(form.get("digest") or ""))
        return RedirectResponse(f"/agents/{name}?saved=1", status_code=303)

    # -- runs --------------------------------------------------------------------------

    def rows(query: str = "") -> str:
        q = query.strip().lower()
        chosen = [
            r
            for r in link.tree.ordered()
            if not q or q in r.agent.lower() or q in r.status.lower() or q in r.run_id
        ]
        return runs_html.tree_rows(chosen)

    async def runs(request: Request) -> Response:
        cat = await anyio.to_thread.run_sync(parts.catalog)
        body = runs_html.runs(link.tree.ordered(), sorted(cat.definitions()), csrf=guard.csrf)
        return render(request, "Runs", body, active="runs")

    async def runs_rows(request: Request) -> Response:
        return HTMLResponse(rows(request.query_params.get("q", "")))

    async def start(request: Request) -> Response:
        form = await form_of(request)
        params: JSONDict = {
            "agent": str(form.get("agent") or ""),
            "task": str(form.get("task") or ""),
            "background": True,
        }
        model = str(form.get("model") or "").strip()
        if model:
            params["model"] = model
        await link.use().call("runs/start", params)
        return RedirectResponse("/runs", status_code=303)

    async def run(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        report = await anyio.to_thread.run_sync(parts.report, run_id)
        body = runs_html.run_page(report, csrf=guard.csrf)
        return render(request, f"Run {run_id}", body, active="runs")

    def run_action(method: str, *, message: bool) -> Callable[[Request], Awaitable[Response]]:
        async def act(request: Request) -> Response:
            run_id = request.path_params["run_id"]
            form = await form_of(request)
            params: JSONDict = {"runId": run_id}
            if message:
                params["message"] = str(form.get("message") or "")
            model = str(form.get("model") or "").strip()
            if model and method == "runs/resume":
                params["model"] = model
            await link.use().call(method, params)
            return RedirectResponse(f"/runs/{run_id}", status_code=303)

        return act

    # -- inbox and live updates ---------------------------------------------------------

    def inbox_body() -> str:
        return runs_html.approvals(link.pending.values(), link.answered, csrf=guard.csrf)

    async def gated_runs() -> list[tuple[str, str, Mapping[str, Any]]]:
        """``(run_id, agent, workflow state)`` of each run whose agent opts into a workflow."""
        cat = await anyio.to_thread.run_sync(parts.catalog)
        gated = {n for n, d in cat.definitions().items() if isinstance(d.workflow, str)}
        found = []
        for row in link.tree.ordered():
            if row.agent in gated:
                reply = await link.use().call("workflow/get", {"runId": row.run_id})
                found.append((row.run_id, row.agent, reply["workflow"]))
        return found

    async def inbox(request: Request) -> Response:
        items = await anyio.to_thread.run_sync(parts.outbox)
        body = (
            runs_html.inbox(inbox_body())
            + runs_html.gates(await gated_runs(), csrf=guard.csrf)
            + runs_html.dead_letters(items["dead"], csrf=guard.csrf)
        )
        return render(request, "Inbox", body, active="inbox")

    async def gate(request: Request) -> Response:
        form = await form_of(request)
        link.require_write("answer a planning gate")
        answer = str(form.get("answer") or "")
        params: JSONDict = {"runId": request.path_params["run_id"], "answer": answer}
        value = str(form.get("value") or "")
        if value:
            params["value"] = value
        await link.use().call("workflow/answer", params)
        return RedirectResponse("/inbox", status_code=303)

    async def retry(request: Request) -> Response:
        await form_of(request)
        link.require_write("retry dead letters")
        await anyio.to_thread.run_sync(parts.retry, int(request.path_params["item_id"]))
        return RedirectResponse("/inbox", status_code=303)

    async def outbox(request: Request) -> Response:
        items = await anyio.to_thread.run_sync(parts.outbox)
        return render(request, "Outbox", runs_html.outbox(items["pending"]), active="outbox")

    async def lineage(request: Request) -> Response:
        roots = await anyio.to_thread.run_sync(parts.lineage)
        return render(request, "Lineage", runs_html.lineage(roots), active="lineage")

    async def schedules(request: Request) -> Response:
        found = await anyio.to_thread.run_sync(parts.schedules)
        return render(request, "Schedules", runs_html.schedules(found), active="schedules")

    async def answer(request: Request) -> Response:
        form = await form_of(request)
        link.answer(
            int(request.path_params["approval_id"]),
            allow=form.get("decision") == "allow",
            reason=str(form.get("reason") or ""),
        )
        return RedirectResponse("/inbox", status_code=303)

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[Mapping[str, Any]]:
            async for topic in link.listen():
                data = rows() if topic == "tree" else inbox_body()
                yield {"event": topic, "data": data}

        return EventSourceResponse(stream(), ping=15)

    async def doctor(request: Request) -> Response:
        report = await anyio.to_thread.run_sync(parts.doctor)
        return render(request, "Doctor", runs_html.doctor(report), active="doctor")

    async def home(request: Request) -> Response:
        return RedirectResponse("/agents", status_code=303)

    def route(
        path: str,
        handler: Callable[[Request], Awaitable[Response]],
        *,
        active: str,
        post: bool = False,
    ) -> Route:
        return Route(path, handled(active, handler), methods=["POST"] if post else ["GET"])

    routes = [
        route("/", home, active="agents"),
        route("/agents", agents, active="agents"),
        route("/agents/{name}", agent, active="agents"),
        route("/agents/{name}/explain", explain, active="agents", post=True),
        route("/agents/{name}/preview", preview, active="agents", post=True),
        route("/agents/{name}/save", save, active="agents", post=True),
        route("/runs", runs, active="runs"),
        route("/runs/rows", runs_rows, active="runs"),
        route("/runs/start", start, active="runs", post=True),
        route("/runs/{run_id}", run, active="runs"),
        route(
            "/runs/{run_id}/message",
            run_action("runs/message", message=True),
            active="runs",
            post=True,
        ),
        route(
            "/runs/{run_id}/stop", run_action("runs/stop", message=False), active="runs", post=True
        ),
        route(
            "/runs/{run_id}/resume",
            run_action("runs/resume", message=True),
            active="runs",
            post=True,
        ),
        route("/inbox", inbox, active="inbox"),
        route("/inbox/{approval_id:int}", answer, active="inbox", post=True),
        route("/gates/{run_id}", gate, active="inbox", post=True),
        route("/outbox", outbox, active="outbox"),
        route("/outbox/{item_id:int}/retry", retry, active="inbox", post=True),
        route("/lineage", lineage, active="lineage"),
        route("/schedules", schedules, active="schedules"),
        Route("/events", events),
        route("/doctor", doctor, active="doctor"),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.link = link
    return GuardMiddleware(app, guard)
