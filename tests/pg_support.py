"""A private PostgreSQL cluster for the tests: ``initdb`` into a temporary folder, ``pg_ctl
start`` listening only on a Unix socket in that folder (no TCP port), ``fsync=off``.

One cluster serves a whole test session (``tests/conftest.py``'s ``postgres`` fixture); each
test gets a schema of its own (``Cluster.fresh_url``), which costs one ``CREATE SCHEMA``.
PostgreSQL refuses to run as root, so as root the binaries run as ``nobody`` (``setpriv``)
and the folder is handed to that user. Where the binaries are missing the tests that need
the cluster skip, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

__all__ = ["Cluster", "find_bin", "start_cluster"]

#: Where Debian puts the server's binaries (``initdb`` and ``pg_ctl`` are not on PATH there).
_CANDIDATES = (
    "/usr/lib/postgresql/17/bin",
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/15/bin",
)
_USER = "membrane"


def find_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or ``None`` when PostgreSQL is absent."""
    env = os.environ.get("MEMBRANE_PG_BIN")
    found = [Path(env)] if env else []
    found += [Path(c) for c in _CANDIDATES]
    on_path = shutil.which("pg_ctl")
    if on_path:
        found.append(Path(on_path).resolve().parent)
    for folder in found:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


class Cluster:
    """A running private cluster: ``url()`` connects to its ``membrane`` database."""

    def __init__(self, bin_dir: Path, root: Path, as_user: Sequence[str]) -> None:
        self.bin_dir = bin_dir
        self.root = root
        self.data = root / "data"
        self.socket_dir = root / "sock"
        self._as_user = list(as_user)

    def url(self, *, database: str = "membrane", options: str | None = None) -> str:
        """A ``postgresql://`` URL for ``database`` over the cluster's Unix socket."""
        url = f"postgresql://{_USER}@/{database}?host={quote(str(self.socket_dir), safe='')}"
        if options:
            url += f"&options={quote(options, safe='')}"
        return url

    def fresh_url(self) -> str:
        """A URL whose tables live in a new, empty schema (one per test)."""
        import psycopg

        schema = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        return self.url(options=f"-csearch_path={schema}")

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as_user, *argv], capture_output=True, text=True, check=True, timeout=120
        )

    def stop(self) -> None:
        subprocess.run(
            [
                *self._as_user,
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> Cluster:
    """Start a private cluster in a new temporary folder; raise ``RuntimeError`` saying why
    when it cannot start."""
    bin_dir = find_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL's initdb and pg_ctl were not found (install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="membrane-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        # postgres will not run as root: hand the folder to nobody and run as nobody.
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise RuntimeError("running as root, and setpriv is missing to run postgres as nobody")
        import pwd

        nobody = pwd.getpwnam("nobody")
        os.chmod(root, 0o755)
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        as_user = [
            setpriv,
            f"--reuid={nobody.pw_uid}",
            f"--regid={nobody.pw_gid}",
            "--clear-groups",
        ]
    cluster = Cluster(bin_dir, root, as_user)
    try:
        cluster.run(
            str(bin_dir / "initdb"),
            "-D",
            str(cluster.data),
            "-U",
            _USER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        cluster.run("mkdir", str(cluster.socket_dir))
        opts = (
            f"-c listen_addresses='' -c unix_socket_directories='{cluster.socket_dir}' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200 -c shared_buffers=16MB"
        )
        cluster.run(
            str(bin_dir / "pg_ctl"),
            "-D",
            str(cluster.data),
            "-o",
            opts,
            "-l",
            str(root / "log"),
            "-w",
            "start",
        )
        import psycopg

        with psycopg.connect(cluster.url(database="postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE membrane")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        detail = getattr(exc, "stderr", "") or ""
        cluster.stop()
        raise RuntimeError(f"the private PostgreSQL cluster did not start: {exc} {detail}") from exc
    return cluster
