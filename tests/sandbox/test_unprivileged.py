"""The key sandbox attacks, run by an unprivileged user (``nobody``, through ``setpriv``) where
the tests run as root, as CI does: the same boundary must hold whoever starts Membrane.

The test's own environment may lie where that user cannot read (a checkout or an interpreter
in root's private home folder), so the ``membrane`` package and the few libraries the
``Bash`` tool imports are copied to a temporary folder that user can read, and the driver runs
on this interpreter if that user can start it, else on a system interpreter of the same
version. Skipped, with the reason, where none of this can be had.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import membrane

NOBODY = 65534
DRIVER = Path(__file__).with_name("unprivileged_driver.py")
#: What ``membrane.builtin_tools.bash`` and the sandbox import beyond the standard library.
LIBRARIES = ("anyio", "sniffio", "typing_extensions")


def _as_nobody(*argv: str) -> list[str]:
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    ids = ["--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]
    return [setpriv, *ids, "--inh-caps=-all", "--bounding-set=-all", *argv]


def _interpreter() -> str | None:
    """An interpreter of this Python version that ``nobody`` can start."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, shutil.which(version), f"/usr/bin/{version}"):
        if candidate and os.path.exists(candidate):
            # Started by nobody's own process too (the sandbox starts its helper so).
            again = "import subprocess, sys; subprocess.run([sys.executable, '-c', ''], check=True)"
            probe = subprocess.run(
                _as_nobody(candidate, "-c", again), capture_output=True, timeout=60
            )
            if probe.returncode == 0:
                return candidate
    return None


@pytest.fixture(scope="module")
def library() -> Iterator[tuple[str, Path]]:
    if os.geteuid() != 0:
        pytest.skip("the tests run unprivileged already: no other user to switch to")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is missing, so no command can run as nobody")
    python = _interpreter()
    if python is None:
        pytest.skip(f"nobody can start no interpreter of Python {sys.version.split()[0][:4]}")
    # Not under pytest's own temporary folder: its /tmp/pytest-of-root is private to root.
    base = Path(tempfile.mkdtemp(prefix="unprivileged-"))
    base.chmod(0o755)
    folder = base / "library"
    shutil.copytree(
        Path(membrane.__file__).parent,
        folder / "membrane",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in LIBRARIES:
        module = __import__(name)
        source = Path(module.__file__ or "")
        if source.name == "__init__.py":
            shutil.copytree(
                source.parent, folder / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(source, folder / source.name)
    shutil.copy2(DRIVER, folder / DRIVER.name)
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    yield python, folder
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def places(library: tuple[str, Path]) -> Iterator[tuple[Path, Path]]:
    """A checkout (a git repository) and an outside folder, both owned by nobody, in a folder
    nobody can reach."""
    base = Path(tempfile.mkdtemp(prefix="places-", dir=library[1].parent))
    base.chmod(0o755)
    checkout = base / "checkout"
    checkout.mkdir()
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    (checkout / "notes.txt").write_text("notes\n")
    outside = base / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    for folder in (checkout, outside):
        for path in (folder, *folder.rglob("*")):
            os.lchown(path, NOBODY, NOBODY)
    yield checkout, outside
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_the_sandbox_holds_for_an_unprivileged_user(
    backend: str, library: tuple[str, Path], places: tuple[Path, Path]
) -> None:
    python, folder = library
    checkout, outside = places
    argv = [python, "-s", str(folder / DRIVER.name), str(folder), backend]
    done = subprocess.run(
        _as_nobody(*argv, str(checkout), str(outside)),
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": os.environ.get("PATH", os.defpath), "HOME": str(checkout)},
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if "unavailable" in out:
        pytest.skip(f"{backend} is not available to nobody here: {out['unavailable']}")
    assert out["uid"] == NOBODY and out["root"] is False
    text = out["status"].get("stdout", "")
    status = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    assert status, out["status"]
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[key], 16) == 0, (key, status[key])
    assert status["NoNewPrivs"].strip() == "1"
    # A writing child writes its checkout; a read-only one does not.
    assert "WROTE" in out["wrote_checkout"]["stdout"], out["wrote_checkout"]
    assert out["notes_after_writer"] == "changed\n"
    assert out["notes_after_reader"] == "notes\n", out["read_only_write"]
    # Nothing outside the checkout changes, nor .git/config, whatever the command tries.
    assert out["outside"]["stdout"] == "keep\n", out["outside"]
    assert out["outside_after"] == "keep\n", out
    assert out["git_config_hooks"] is False, out
    assert out["hard_link"].get("error") == "hard-link-refused", out["hard_link"]
    assert out["outside_after_link"] == "keep\n"
    assert out["unix_socket_reached"] is False, out["unix_socket"]
