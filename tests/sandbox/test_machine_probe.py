"""What the machine offers: the ``bwrap`` probe, run for real against stand-in executables on
``PATH``, and the ``PATH`` search it uses, against ``shutil.which``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from membrane.sandbox.executables import which

#: Prints what this interpreter's machine probe finds, as ``membrane explain`` shows it.
PROBE = """
import json
from membrane.sandbox import machine_support
print(json.dumps(machine_support().to_json()["bubblewrap"]))
"""


def probed(path: str, *, seconds: float | None = None) -> dict[str, object]:
    """The probe's verdict on bubblewrap in a fresh interpreter whose ``PATH`` is ``path``
    (with a deadline of ``seconds`` instead of the probe's own, when given)."""
    shorter = "" if seconds is None else f"machine._PROBE_SECONDS = {seconds!r}\n"
    done = subprocess.run(
        [sys.executable, "-c", f"from membrane.sandbox import machine\n{shorter}{PROBE}"],
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    verdict: dict[str, object] = json.loads(done.stdout)
    return verdict


def stand_in(folder: Path, script: str, *, name: str = "bwrap") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


def test_a_bwrap_that_runs_the_probe_is_available(tmp_path: Path) -> None:
    record = tmp_path / "argv"
    found = stand_in(tmp_path / "bin", f"printf '%s\\n' \"$@\" > {record}\nexit 0")
    assert probed(str(found.parent)) == {"available": True, "detail": f"{found} works here"}
    # The probe builds a real sandbox: a user namespace without capabilities, the whole file
    # system read-only, its own PID namespace, no further user namespace.
    assert record.read_text().split() == [
        "--unshare-user",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--unshare-pid",
        "--die-with-parent",
        "--disable-userns",
        "true",
    ]


def test_a_bwrap_without_disable_userns_is_available_without_the_lock(tmp_path: Path) -> None:
    record = tmp_path / "argv"
    script = (
        'for a in "$@"; do [ "$a" = --disable-userns ] && '
        "{ echo 'bwrap: Unknown option --disable-userns' >&2; exit 1; }; done\n"
        f"printf '%s\\n' \"$@\" > {record}\nexit 0"
    )
    found = stand_in(tmp_path / "bin", script)
    assert probed(str(found.parent)) == {"available": True, "detail": f"{found} works here"}
    assert "--disable-userns" not in record.read_text().split()
    assert record.read_text().split()[:3] == ["--unshare-user", "--cap-drop", "ALL"]


def test_a_bwrap_that_cannot_build_a_sandbox_says_why(tmp_path: Path) -> None:
    found = stand_in(
        tmp_path / "bin",
        "echo 'bwrap: No permissions to create new namespace' >&2\necho 'not this' \nexit 1",
    )
    assert probed(str(found.parent)) == {
        "available": False,
        "detail": f"{found} cannot build a sandbox here: "
        "bwrap: No permissions to create new namespace",
    }
    silent = stand_in(tmp_path / "silent", "exit 3")
    assert probed(str(silent.parent))["detail"] == (f"{silent} cannot build a sandbox here: exit 3")


@pytest.mark.parametrize(
    "script",
    ["exec /bin/sleep 60", "exec 2>&-\nexec /bin/sleep 60"],
    ids=["stderr-open", "stderr-closed"],
)
def test_a_bwrap_that_hangs_is_killed_at_the_deadline(tmp_path: Path, script: str) -> None:
    # Whether it keeps its stderr open or closes it first, a probe that does not finish is
    # killed once the deadline passes, and bubblewrap is reported unavailable.
    found = stand_in(tmp_path / "bin", script)
    assert probed(str(found.parent), seconds=0.5) == {
        "available": False,
        "detail": f"{found} cannot run here: it did not finish in 0.5 seconds",
    }


def test_a_bwrap_that_cannot_be_executed_is_not_available(tmp_path: Path) -> None:
    broken = tmp_path / "bin" / "bwrap"
    broken.parent.mkdir()
    broken.write_bytes(b"\x7fELF not really")
    broken.chmod(0o755)
    verdict = probed(str(broken.parent))
    assert verdict["available"] is False
    assert str(verdict["detail"]).startswith(f"{broken} cannot run here: ")


def test_no_bwrap_on_path_is_not_available(tmp_path: Path) -> None:
    assert probed(str(tmp_path)) == {
        "available": False,
        "detail": "no `bwrap` on PATH (install the bubblewrap package)",
    }


@pytest.mark.parametrize(
    "entries",
    [
        ["a", "b"],
        ["b", "a"],
        ["missing", "a", "a"],
        ["plain", "a"],
        ["folder", "b"],
        ["", "a"],
        [],
    ],
)
def test_the_path_search_finds_what_shutil_which_finds(
    entries: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in(tmp_path / "a", "exit 0", name="tool")
    stand_in(tmp_path / "b", "exit 0", name="tool")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "tool").write_text("not executable")
    (tmp_path / "folder" / "tool").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a")  # an empty entry is the current folder
    path = os.pathsep.join(str(tmp_path / e) if e else "" for e in entries)
    monkeypatch.setenv("PATH", path)
    for name in ("tool", "absent", str(tmp_path / "b" / "tool"), "./tool"):
        assert (name, which(name)) == (name, shutil.which(name))
    monkeypatch.delenv("PATH")
    assert which("sh") == shutil.which("sh")
