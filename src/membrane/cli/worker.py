"""``membrane worker``: drain the deployment's queue on this node until SIGTERM."""

from __future__ import annotations

import json
import os
import signal
from functools import partial
from pathlib import Path
from typing import Annotated, Any

from typer import Option

from membrane.cli.app import app, echo
from membrane.cli.helptext import HelpCommand
from membrane.cli.options import MODEL_HELP, STATE_OPTION
from membrane.errors import InvalidRequest, MembraneError

__all__ = ["worker"]


@app.command("worker", cls=HelpCommand)
def worker(
    state: Annotated[str | None, STATE_OPTION] = None,
    queue: Annotated[
        str | None,
        Option(help="The queue to drain (default: the settings' queue_name, else membrane)."),
    ] = None,
    concurrency: Annotated[
        int, Option(help="Runs this worker drives at once (DBOS's worker_concurrency).")
    ] = 10,
    model: Annotated[str | None, Option(help=MODEL_HELP)] = None,
    project: Annotated[Path, Option(help="The project folder.")] = Path("."),
    workspace: Annotated[Path | None, Option(help="The workspace folder.")] = None,
    as_json: Annotated[
        bool, Option("--json", help="Each notice on stderr as one JSON object.")
    ] = False,
) -> None:
    """Drive the runs hosts put on the queue (provider = "dbos"), on any node.

    Each run is driven from its stored conversation, under its lease, to its end; a run
    whose worker died or stalled past its lease goes back on the queue and on to another
    worker. Runs until SIGTERM or SIGINT. See docs/scale.md.
    """
    import anyio

    from membrane.cli.model_choice import parse_model
    from membrane.extensions.hooks import ExtensionHooks
    from membrane.runtime.options import RuntimeOptions
    from membrane.runtime.providers.dbos import queue_database
    from membrane.runtime.providers.in_process import InProcessProvider
    from membrane.runtime.runtime import SubagentRuntime
    from membrane.runtime.worker import Worker, handoff
    from membrane.runtime.workspace import Workspace
    from membrane.store.select import chosen_state

    if not 1 <= concurrency <= 10_000:
        raise InvalidRequest("--concurrency must be from 1 to 10000", field="concurrency")
    ws = Workspace.open(project, workspace=workspace)
    settings = ws.settings
    name = queue or settings.queue_name
    store = ws.open_store(state)
    location = chosen_state(state, settings_url=settings.state_url) or ws.state.path
    hooks = ExtensionHooks.from_extensions(ws.extensions.values())
    provider = InProcessProvider(parse_model(model, settings), hooks=hooks)
    url = queue_database(location)
    runtime = SubagentRuntime.on_workspace(
        ws, provider, store=store, options=RuntimeOptions(handoff=handoff(url, queue=name))
    )
    limiter = None
    if settings.queue_rate_limit is not None:
        limiter = {"limit": settings.queue_rate_limit, "period": settings.queue_rate_period}
    node = Worker(
        runtime,
        url=url,
        queue=name,
        concurrency=concurrency,
        global_concurrency=settings.queue_concurrency,
        limiter=limiter,
        on_event=partial(_notice, as_json=as_json),
    )

    failures: list[MembraneError] = []

    async def main() -> None:
        async with anyio.create_task_group() as group:

            async def drain() -> None:
                try:
                    await node.serve()
                except MembraneError as exc:  # told as the command's error, below
                    failures.append(exc)
                finally:
                    group.cancel_scope.cancel()

            group.start_soon(drain)
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    if node.draining:
                        # A second signal: leave now, as a killed worker does; the runs
                        # here go back on the queue once their leases lapse.
                        _notice({"event": "leaving", "pid": os.getpid()}, as_json=as_json)
                        os._exit(1)
                    _notice({"event": "stopping", "pid": os.getpid()}, as_json=as_json)
                    node.drain()

    try:
        anyio.run(main)
    finally:
        store.close()
    if failures:
        raise failures[0]


def _notice(event: dict[str, Any], *, as_json: bool) -> None:
    """One notice on stderr: a JSON object, or a line for a person."""
    if as_json:
        echo(json.dumps(event, ensure_ascii=False), err=True)
        return
    kind = event["event"]
    if kind == "ready":
        text = (
            f"worker {event['worker']} drains queue {event['queue']!r} at "
            f"{event['database']} ({event['concurrency']} at a time)"
        )
    elif "run_id" in event:
        rest = ", ".join(f"{k} {v}" for k, v in event.items() if k not in ("event", "run_id"))
        text = f"run {event['run_id']}: {kind}" + (f" ({rest})" if rest else "")
    else:
        text = kind + "".join(f" {k}={v}" for k, v in event.items() if k != "event")
    echo(f"membrane worker: {text}", err=True)
