from __future__ import annotations

from collections.abc import Iterator

import pytest
from server_support import Running, make_project, register, serve, stop


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """One real ``membrane serve`` for a module's tests, its project opened by the owner
    (callers without the owner's token or a run's token: ``external``)."""
    base = tmp_path_factory.mktemp("serve")
    home = base / "home"
    home.mkdir()
    project = make_project(base / "project")
    socket = base / "sock" / "m.sock"
    proc = serve(socket, home)
    try:
        register(socket, home, project)
        yield Running(socket=socket, home=home, project=project, pid=proc.pid)
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def ops_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A runtime launched with ``--role ops``: the owner's callers get what an in-process run
    gets for the reader (Read and Bash)."""
    base = tmp_path_factory.mktemp("ops-runs")
    home = base / "home"
    home.mkdir()
    project = make_project(base / "project")
    socket = base / "sock" / "m.sock"
    proc = serve(socket, home, "--role", "ops")
    try:
        register(socket, home, project)
        yield Running(socket=socket, home=home, project=project, pid=proc.pid)
    finally:
        stop(proc)
