"""Read commands open the store read-only: on a read-only folder they still read it, and on
any store they write nothing (no checkpoint, no ``-wal``/``-shm``, the file's bytes and mtime
unchanged). The tests run as root, where file modes stop no write, so the read-only folder is a
read-only bind mount in a private mount namespace (skipped where one cannot be made)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import json_lines, state_of, write

from membrane.cli.app import main

LEAD = """\
---
name: lead
description: Answers.
tools: Read
---
Answer.
"""
SCRIPT = "agents:\n  lead:\n    - text: lead is done\n"


@pytest.fixture
def stored(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, str]:
    """A project with one finished run in its store; returns the project and the run id."""
    root = tmp_path / "project"
    write(root / ".membrane" / "agents" / "lead.md", LEAD)
    script = write(tmp_path / "script.yaml", SCRIPT)
    args = ["run", "lead", "go", "--project", str(root), "--model", f"scripted:{script}"]
    assert main([*args, "--headless", "--json"]) == 0
    run_id = json_lines(capsys.readouterr().out)[-1]["run_id"]
    return root, run_id


def _reads(project: Path, run_id: str) -> list[list[str]]:
    where = ["--project", str(project)]
    return [
        ["runs", *where, "--headless", "--json"],
        ["show", run_id, *where, "--json"],
        ["outbox", "list", *where, "--json"],
        ["outbox", "list", "--dead", *where, "--json"],
    ]


def test_read_commands_leave_the_store_and_its_folder_untouched(
    stored: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    project, run_id = stored
    state = state_of(project)
    before = (state.read_bytes(), state.stat().st_mtime_ns, sorted(os.listdir(state.parent)))
    for args in _reads(project, run_id):
        assert main(args) == 0, args
    assert run_id in capsys.readouterr().out
    after = (state.read_bytes(), state.stat().st_mtime_ns, sorted(os.listdir(state.parent)))
    assert after == before
    assert not any(name.endswith(("-wal", "-shm")) for name in after[2])


def _read_only_mount_works(folder: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            _MOUNT + ' && ! touch "$1/probe" 2>/dev/null',
            "sh",
            str(folder),
        ],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


_MOUNT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"'


def test_read_commands_read_a_store_on_a_read_only_folder(
    stored: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    project, run_id = stored
    folder = state_of(project).parent
    if not _read_only_mount_works(folder):
        pytest.skip("no private mount namespace for a read-only bind mount here")
    for args in _reads(project, run_id):
        done = subprocess.run(
            [
                "unshare",
                "-m",
                "sh",
                "-c",
                _MOUNT + ' && shift && exec "$@"',
                "sh",
                str(folder),
                sys.executable,
                "-m",
                "membrane",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (args, done.stderr)
        assert "Traceback" not in done.stderr
        assert json.loads(done.stdout)
    assert (
        run_id
        in subprocess.run(
            [
                "unshare",
                "-m",
                "sh",
                "-c",
                _MOUNT + ' && shift && exec "$@"',
                "sh",
                str(folder),
                sys.executable,
                "-m",
                "membrane",
                "runs",
                "--project",
                str(project),
                "--headless",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        ).stdout
    )
