"""A fleet on one machine for the tests: a project whose settings put children on the DBOS
queue, real ``membrane worker`` processes draining it, and a host (``SubagentRuntime.open``) in
the test's process. The workers and the host share one SQLite state file (and the queue's
SQLite file beside it), as nodes share a database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membrane.store import SQLiteStore

__all__ = ["Fleet", "WorkerProcess", "write_project"]

#: Short leases and sweeps, so that a lost worker's run moves within seconds.
SETTINGS = """provider = "dbos"
lease_seconds = 2
sweep_interval_seconds = 0.5
"""


def write_project(root: Path, *, turns: list[dict[str, Any]]) -> Path:
    """A project with one agent, ``helper``, and a script whose every run plays ``turns``."""
    project = root / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "helper.md").write_text(
        "---\nname: helper\ndescription: The helper.\ntools: Read\n---\nWork.\n", encoding="utf-8"
    )
    (project / ".membrane" / "config.toml").write_text(SETTINGS, encoding="utf-8")
    (project / "notes.txt").write_text("alpha\n", encoding="utf-8")
    (root / "script.json").write_text(json.dumps({"agents": {"helper": turns}}), "utf-8")
    return project


@dataclass
class WorkerProcess:
    """One ``membrane worker`` process and the notices it wrote (``--json``, on stderr)."""

    process: subprocess.Popen[bytes]
    log: Path

    def events(self) -> list[dict[str, Any]]:
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    @property
    def owner(self) -> str:
        ready = [e for e in self.events() if e["event"] == "ready"]
        assert ready, self.log.read_text(encoding="utf-8")
        return str(ready[0]["worker"])

    def drove(self) -> set[str]:
        return {str(e["run_id"]) for e in self.events() if e["event"] == "driving"}

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


@dataclass
class Fleet:
    """The workers of one test, on ``state``; ``stop()`` ends every one still running."""

    root: Path
    project: Path
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def state(self) -> Path:
        return self.root / "state.db"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def start_worker(self, *, concurrency: int = 2) -> WorkerProcess:
        log = self.root / f"worker-{len(self.workers)}.log"
        env = {**os.environ, "MEMBRANE_HOME": str(self.home)}
        argv = [sys.executable, "-m", "membrane", "worker", "--json", "--project"]
        argv += [str(self.project), "--state", str(self.state), "--concurrency", str(concurrency)]
        argv += ["--model", f"scripted:{self.root / 'script.json'}"]
        with log.open("wb") as sink:
            process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=sink, env=env)
        worker = WorkerProcess(process, log)
        self.workers.append(worker)
        return worker

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until every worker said it drains the queue."""
        deadline = time.monotonic() + timeout
        for worker in self.workers:
            while not any(e["event"] == "ready" for e in worker.events()):
                assert worker.process.poll() is None, worker.log.read_text(encoding="utf-8")
                assert time.monotonic() < deadline, "a worker never became ready"
                time.sleep(0.05)

    def store(self) -> SQLiteStore:
        return SQLiteStore(self.state, read_only=True)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
