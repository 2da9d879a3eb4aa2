"""One token ledger, charged from two real processes on one SQLite state file (DESIGN rule 12):
the charges serialize on the stored ledger, which ends exactly equal to the usage the runs
recorded; the overspend stays within the documented bound (one response per run of another
process, the one it had in flight); and a run of one process that is between two requests when
the other process empties the ledger sends no further request."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from membrane import SQLiteStore, SubagentRuntime, SubagentStartRequest
from membrane.models import ModelResponse
from membrane.testing import FunctionModel

from .conftest import write_agents

HELPER = Path(__file__).with_name("ledger_process.py")
#: A bound for the helper processes to finish, never a threshold of the behaviour under test.
BOUND = 180


def _lead(root: Path, state: Path, limit: int) -> str:
    """The stored lead whose ledger the processes share (it has ended; its budget stays)."""
    model = FunctionModel(lambda request: ModelResponse(text="split"))  # type: ignore[arg-type,return-value]

    async def run() -> str:
        async with SubagentRuntime.open(root, model=model, state=state) as runtime:
            request = SubagentStartRequest("lead", "split", budget={"tokens": limit})
            return (await runtime.run(request)).run_id

    return anyio.run(run)


def _spawn(
    root: Path, state: Path, lead: str, signals: Path, role: str, workers: int
) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        str(HELPER),
        str(root),
        str(state),
        lead,
        str(signals),
        role,
        str(workers),
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _rows(proc: subprocess.Popen[str]) -> list[dict[str, object]]:
    out, err = proc.communicate(timeout=BOUND)
    assert proc.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


def _ledger(state: Path, lead: str) -> tuple[int, int]:
    """The ledger's stored tokens and the tokens of every usage event, side by side."""
    store = SQLiteStore(state)
    try:
        spent = sum(
            event.data["input_tokens"] + event.data["output_tokens"]
            for event in store.events()
            if event.kind == "usage"
        )
        header = store.get_header(lead)
        assert header is not None
        return int(header.meta["budget"]["used"]["tokens"]), spent
    finally:
        store.close()


@pytest.fixture
def shared(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "team"
    write_agents(root, {"lead": "allowed_subagents: [worker, waiter]\n", "worker": ""})
    (root / ".membrane" / "agents" / "waiter.md").write_text(
        "---\nname: waiter\ndescription: Waits.\ntools: Read, hold\n---\nWait.\n"
    )
    (root / "notes.txt").write_text("notes\n", encoding="utf-8")
    return root


def test_two_processes_charging_one_ledger_stay_within_one_response_per_run(
    shared: Path, tmp_path: Path
) -> None:
    state, signals = tmp_path / "state.db", tmp_path / "signals"
    signals.mkdir()
    limit, response, workers = 600, 15, 8
    lead = _lead(shared, state, limit)
    procs = [_spawn(shared, state, lead, signals, "crowd", workers) for _ in range(2)]
    (signals / "go").touch()
    rows = [row for proc in procs for row in _rows(proc)]

    used, spent = _ledger(state, lead)
    assert used == spent  # no charge lost or doubled between the two processes
    assert limit <= spent <= limit + len(rows) * response
    assert len(rows) == 2 * workers
    assert {(row["status"], row["code"]) for row in rows} == {("error", "budget-exceeded")}


def test_a_run_between_requests_sends_none_once_another_process_emptied_the_ledger(
    shared: Path, tmp_path: Path
) -> None:
    state, signals = tmp_path / "state.db", tmp_path / "signals"
    signals.mkdir()
    lead = _lead(shared, state, 100)
    waiter = _spawn(shared, state, lead, signals, "waiter", 1)
    spender = _spawn(shared, state, lead, signals, "spender", 1)
    (spent_by,) = _rows(spender)
    (waited,) = _rows(waiter)

    used, spent = _ledger(state, lead)
    assert used == spent
    # The waiter charged 10, the spender 60 and then the 60 that crossed 100: nothing more.
    assert spent == 130
    assert (spent_by["code"], spent_by["requests"]) == ("budget-exceeded", 2)
    assert (waited["code"], waited["requests"]) == ("budget-exceeded", 1)
