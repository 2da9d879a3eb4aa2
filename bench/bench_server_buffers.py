"""Memory of ``membrane serve`` while many peers each hold a large partial request line.

150 connections each send 900 KB of one line and never finish it. Measured side by side in
the same run: a server with the default ``server_max_buffered_bytes`` (64 MiB) and one whose
limit is set out of reach (what every server was before the limit). Goal: the bounded server's
RSS grows by less than the limit plus 16 MiB, where the unbounded one grows with every peer.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scaling_support import goal

PEERS = 150
LINE = 900_000
LIMIT = 64 * 1024 * 1024
SLACK = 16 * 1024 * 1024
HEAD = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientInfo": {"pad": "'


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _serve(folder: Path, limit: int) -> tuple[subprocess.Popen[str], Path]:
    home = folder / "home"
    home.mkdir()
    (home / "config.toml").write_text(f"server_max_buffered_bytes = {limit}\n")
    path = folder / "sock" / "m.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
    env["MEMBRANE_HOME"] = str(home)
    proc = subprocess.Popen(
        [sys.executable, "-m", "membrane", "serve", "--socket", str(path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    while "listening on" not in (line := proc.stderr.readline()):
        if not line:
            raise SystemExit(f"membrane serve did not start: {proc.stderr.read()}")
    return proc, path


def _growth(limit: int) -> tuple[int, int]:
    """(RSS growth in bytes, connections still held) with ``PEERS`` partial lines sent."""
    with tempfile.TemporaryDirectory() as tmp:
        proc, path = _serve(Path(tmp), limit)
        peers: list[socket.socket] = []
        try:
            time.sleep(1.0)  # let start-up settle before the baseline
            before = _rss(proc.pid)
            for _ in range(PEERS):
                sock = socket.socket(socket.AF_UNIX)
                sock.connect(str(path))
                peers.append(sock)
                with contextlib.suppress(OSError):
                    sock.sendall(HEAD + b"x" * LINE)
            time.sleep(2.0)  # the server reads what is still in the sockets
            after = _rss(proc.pid)
            refused = sum(1 for sock in peers if _closed(sock))
            return after - before, PEERS - refused
        finally:
            for sock in peers:
                sock.close()
            proc.terminate()
            proc.wait()


def _closed(sock: socket.socket) -> bool:
    """Whether the server answered (a refusal) on ``sock``: it writes only to refuse."""
    sock.setblocking(False)
    try:
        sock.recv(65536, socket.MSG_PEEK)
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def main() -> None:
    bounded, kept = _growth(LIMIT)
    unbounded, kept_all = _growth(1 << 40)
    mib = 2**20
    goal(
        f"membrane serve RSS growth with {PEERS} peers holding {LINE // 1000} KB partial lines",
        f"under {(LIMIT + SLACK) // mib} MiB",
        f"{bounded / mib:.1f} MiB with the default limit ({kept} lines held) against "
        f"{unbounded / mib:.1f} MiB unbounded ({kept_all} held), "
        f"{bounded / max(unbounded, 1):.2f}x",
        bounded < LIMIT + SLACK,
    )


if __name__ == "__main__":
    main()
