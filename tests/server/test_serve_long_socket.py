"""A socket path longer than a Unix socket address holds (107 bytes): a real ``membrane serve``
under a deep ``MEMBRANE_HOME`` binds its usual socket and answers; a socket file name that no
folder descriptor can shorten enough is refused with ``socket-path-too-long``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from server_support import (
    START_BOUND,
    clean_env,
    make_project,
    owner,
    serve,
    stop,
    wait_listening,
)

from membrane.server import Client

pytestmark = pytest.mark.anyio


def _deep(root: Path, at_least: int) -> Path:
    folder = root
    while len(os.fsencode(str(folder))) < at_least:
        folder = folder / ("d" * 40)
    folder.mkdir(parents=True)
    return folder


async def test_serve_under_a_deep_home_binds_its_socket_there_and_answers(tmp_path: Path) -> None:
    home = _deep(tmp_path / "home", 120)
    project = make_project(tmp_path / "project")
    proc = subprocess.Popen(
        [sys.executable, "-m", "membrane", "serve"],
        env=clean_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = wait_listening(proc)
        socket = home / "sock" / "membrane.sock"
        assert str(socket) in line
        assert len(os.fsencode(str(socket))) > 107
        assert socket.is_socket()
        assert socket.stat().st_mode & 0o777 == 0o600
        with anyio.fail_after(START_BOUND):
            async with Client.connect(socket) as client:
                await client.request("initialize", {"identity": owner(home)})
                added = await client.request("projects/add", {"root": str(project)})
                assert added["projectId"]
    finally:
        assert stop(proc) == 0
    assert not socket.exists()


def test_a_socket_name_too_long_for_any_address_is_refused_with_its_code(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "sock").mkdir(mode=0o700)
    socket = tmp_path / "sock" / ("s" * 100)
    done = subprocess.run(
        [sys.executable, "-m", "membrane", "serve", "--socket", str(socket)],
        env=clean_env(home),
        capture_output=True,
        text=True,
        timeout=START_BOUND,
        check=False,
    )
    assert done.returncode != 0
    assert "socket-path-too-long" in done.stderr
    assert str(socket) in done.stderr
    assert "107" in done.stderr
    assert "Traceback" not in done.stderr
    assert not socket.exists()


def test_a_deep_socket_that_fits_through_its_folder_is_served(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    socket = _deep(tmp_path / "s", 200) / "m.sock"
    socket.parent.chmod(0o700)
    proc = serve(socket, home)
    try:
        assert socket.is_socket()
    finally:
        assert stop(proc) == 0
