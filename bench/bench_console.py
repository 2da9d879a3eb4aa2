"""The console: how late a run's event reaches the browser's tree, and how long the Runs page
takes to render a tree of 1,000 runs.

1. **Event to row.** A real ``membrane serve``, a real ``membrane console`` process and
   Debian's Chromium (headless, driven by Playwright's async API with the system's executable)
   showing the Runs page. A bare ``events/subscribe`` client (the peer: the same events with
   nothing between the runtime and the reader) listens beside it. Each round starts one
   scripted ``reader`` run from a third connection; the figure is the time from the run's
   ``published`` event (its ``at``, the runtime's wall clock when it published) to its arrival
   at the bare client, and to its row appearing in the page's DOM (a ``MutationObserver``
   stamps ``Date.now()``, the same wall clock). Goal: the browser's median at most 1.5x the
   bare client's median, in the same run.
2. **First render of a 1,000-run tree.** The console application (in this process, on the
   same runtime) with 1,000 runs in its tree (ten roots of 99 descendants, folded from
   ``published`` events as the runtime sends them); the server time of ``GET /runs``, first
   and median of 20. Goal: under 300 ms.

Run: ``.venv/bin/python bench/bench_console.py`` (``CONSOLE_ROUNDS=N``, default 30). Without
``chromium`` on PATH the first part is skipped and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

READER = "---\nname: reader\ndescription: Reads the notes.\ntools: Read\n---\nRead.\n"
SCRIPT = {
    "agents": {
        "reader": [
            {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]},
            {"text": "done"},
        ]
    }
}
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
OBSERVER = """() => {
  window.__seen = {};
  const tree = document.getElementById('tree');
  const stamp = () => {
    for (const tr of tree.querySelectorAll('tr[id^="run-"]')) {
      if (!(tr.id in window.__seen)) window.__seen[tr.id] = Date.now();
    }
  };
  stamp();
  new MutationObserver(stamp).observe(tree, {childList: true, subtree: true});
}"""


def _project(base: Path) -> tuple[Path, Path, Path]:
    home = base / "home"
    home.mkdir()
    project = base / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "agents" / "reader.md").write_text(READER)
    (project / "notes.txt").write_text("alpha\n")
    script = base / "script.json"
    script.write_text(json.dumps(SCRIPT))
    return home, project, script


def _serve(socket: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "membrane", "serve", "--socket", str(socket)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    while "listening on" not in (line := proc.stderr.readline()):
        if not line:
            raise SystemExit("membrane serve did not start")
    return proc


async def _owner(client: Any, home: Path, project: Path) -> dict[str, str]:
    token = (home / "owner.token").read_text().strip()
    await client.request("initialize", {"identity": {"ownerToken": token}})
    reply = await client.request("projects/add", {"root": str(project)})
    return {"projectId": reply["projectId"]}


async def event_to_row(
    socket: Path, home: Path, project: Path, script: Path, url: str, rounds: int
) -> tuple[list[float], list[float]]:
    """Per round: (bare client's delay, browser's delay) in seconds after ``published``."""
    from playwright.async_api import async_playwright

    from membrane.server import Client

    bare_seen: dict[str, float] = {}
    published: dict[str, float] = {}
    bare_ms: list[float] = []
    browser_ms: list[float] = []
    async with (
        async_playwright() as playwright,
        Client.connect(socket) as bare,
        Client.connect(socket) as starter,
    ):
        ids = await _owner(bare, home, project)
        await bare.request("events/subscribe", ids)
        start_ids = await _owner(starter, home, project)
        chromium = await playwright.chromium.launch(
            executable_path=shutil.which("chromium"), headless=True, args=FLAGS
        )
        page = await chromium.new_page(viewport={"width": 1280, "height": 800})
        await page.goto(url.replace("/?", "/runs?"))
        await page.evaluate(OBSERVER)

        async def listen() -> None:
            async for note in bare.notifications:
                event = note.params.get("event") or {}
                if event.get("kind") == "published":
                    bare_seen[event["run_id"]] = time.time()
                    published[event["run_id"]] = float(event["at"])

        async with anyio.create_task_group() as group:
            group.start_soon(listen)
            model = f"scripted:{script}"
            for _ in range(rounds):
                params = {**start_ids, "agent": "reader", "task": "read", "model": model}
                run = (await starter.request("runs/start", {**params, "background": True}))["run"]
                run_id = run["run_id"]
                with anyio.fail_after(60):
                    while True:
                        seen = await page.evaluate(f"window.__seen['run-{run_id}']")
                        if seen is not None and run_id in bare_seen:
                            break
                        await anyio.sleep(0.005)
                    await starter.request("runs/wait", {**start_ids, "runId": run_id})
                at = published[run_id]
                bare_ms.append(bare_seen[run_id] - at)
                browser_ms.append(seen / 1000 - at)
            group.cancel_scope.cancel()
        await chromium.close()
    return bare_ms, browser_ms


def first_render(project: Path, socket: Path) -> tuple[float, float]:
    """``GET /runs`` with 1,000 runs in the tree: (first, median of 20) seconds."""
    from starlette.testclient import TestClient

    from membrane.cli.console import console_parts
    from membrane.console import Guard, build_app

    guard = Guard(port=8765)
    app = build_app(console_parts(project, role=None, socket_path=socket), guard)
    link = app.app.state.link
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    with client:
        client.get(f"/agents?token={guard.token}")
        for root in range(10):
            parent = None
            for n in range(100):
                run_id = f"r{root}-{n}"
                link.tree.apply(
                    {"kind": "published", "run_id": run_id, "parent_id": parent,
                     "agent": "reader", "at": time.time(), "data": {"depth": min(n, 3)}}
                )  # fmt: skip
                parent = run_id if n < 3 else parent
        assert len(link.tree.rows) >= 1000
        times = []
        for _ in range(21):
            began = time.perf_counter()
            page = client.get("/runs")
            times.append(time.perf_counter() - began)
            assert page.status_code == 200 and page.text.count('id="run-') >= 1000
    return times[0], statistics.median(times[1:])


def main() -> None:
    rounds = int(os.environ.get("CONSOLE_ROUNDS", "30"))
    base = Path(tempfile.mkdtemp(prefix="bench-console-"))
    home, project, script = _project(base)
    socket = base / "sock" / "m.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
    env.update(MEMBRANE_HOME=str(home), MEMBRANE_SOCKET=str(socket))
    os.environ.update(MEMBRANE_HOME=str(home), MEMBRANE_SOCKET=str(socket))
    os.environ.pop("MEMBRANE_HEADLESS", None)
    serve = _serve(socket, env)
    console = None
    try:
        lines = []
        if shutil.which("chromium") is None:
            print("event to row: skipped, chromium is not installed")
        else:
            console = subprocess.Popen(
                [sys.executable, "-m", "membrane", "console", "--project", str(project), "--json"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            assert console.stdout is not None
            url = json.loads(console.stdout.readline())["url"]
            bare, browser = anyio.run(event_to_row, socket, home, project, script, url, rounds)
            b, w = statistics.median(bare), statistics.median(browser)
            p90 = sorted(browser)[max(0, int(rounds * 0.9) - 1)]
            print(
                f"event to row, {rounds} runs: bare events/subscribe client median "
                f"{b * 1e3:.2f} ms, browser's tree median {w * 1e3:.2f} ms (p90 {p90 * 1e3:.2f} ms)"
            )
            ratio = w / b
            verdict = "met" if ratio <= 1.5 else "missed"
            lines.append(
                f"goal event to browser row: <= 1.5x a bare events/subscribe client, "
                f"measured {ratio:.2f}x ({verdict})"
            )
        first, median = first_render(project, socket)
        print(
            f"GET /runs with 1,000 runs: first {first * 1e3:.1f} ms, median {median * 1e3:.1f} ms"
        )
        verdict = "met" if first < 0.3 else "missed"
        lines.append(
            f"goal first render of a 1,000-run tree: < 300 ms server, "
            f"measured {first * 1e3:.0f} ms ({verdict})"
        )
        print()
        for line in lines:
            print(line)
    finally:
        for proc in (console, serve):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=60)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
