"""The rate-limit windows a real ``membrane serve`` keeps are bounded by
``rate_limit_sessions`` per tool, and churning session ids escapes no limit: a live window is
never evicted, and once the table is full the owner's new sessions share one window (its
trusted identity), so a new session id per call gets no fresh window."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, make_project, owner, serve, stop

from membrane.errors import MembraneError
from membrane.server import Client

pytestmark = pytest.mark.anyio

#: The test project's settings (``[rate_limits.Grep]``: 3 calls an hour) hold two sessions.
SESSIONS = "rate_limit_sessions = 2\n"

GREP = {"name": "Grep", "arguments": {"pattern": "alpha"}}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path / "project")
    config = project / ".membrane" / "config.toml"
    config.write_text(SESSIONS + config.read_text())
    socket = tmp_path / "sock" / "m.sock"
    proc = serve(socket, home)
    try:
        yield socket, home, project
    finally:
        stop(proc)


async def _grep_as(socket: Path, home: Path, project: Path, session: str, times: int) -> str:
    """``times`` calls of ``Grep`` by the owner under ``session``: each ``ok`` or the error's
    code, joined by spaces."""
    outcomes = []
    async with Client.connect(socket) as client:
        await client.request("initialize", {"identity": owner(home, sessionId=session)})
        added = await client.request("projects/add", {"root": str(project)})
        for _ in range(times):
            try:
                await client.request("actions/call", {"projectId": added["projectId"], **GREP})
            except MembraneError as exc:
                outcomes.append(exc.code)
            else:
                outcomes.append("ok")
    return " ".join(outcomes)


async def test_churning_session_ids_escapes_no_rate_limit(
    served: tuple[Path, Path, Path],
) -> None:
    socket, home, project = served
    with anyio.fail_after(START_BOUND * 2):
        first = await _grep_as(socket, home, project, "chat-0", 3)
        churned = [await _grep_as(socket, home, project, f"chat-{i}", 1) for i in range(1, 7)]
        again = await _grep_as(socket, home, project, "chat-0", 1)
    assert first == "ok ok ok"
    # One more session gets a window of its own; past the table the owner's new sessions
    # share one window, which admits three calls in its hour, and the rest are refused.
    assert churned == ["ok", "ok", "ok", "ok", "rate-limited", "rate-limited"]
    # The first session's spent window was never evicted to make room.
    assert again == "rate-limited"
