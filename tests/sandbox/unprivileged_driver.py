"""Run as an unprivileged user by ``test_unprivileged.py``: the key sandbox attacks through the
``Bash`` tool under one backend, each outcome printed as one JSON object on the last line.

``python unprivileged_driver.py LIBRARY BACKEND CHECKOUT OUTSIDE``: ``LIBRARY`` holds a copy of
the ``membrane`` package and what it imports (this user cannot read the test's environment),
``CHECKOUT`` and ``OUTSIDE`` belong to this user; ``OUTSIDE`` holds ``keep.txt`` and is named
as a read root, so the sandbox shows it (read-only) and the file permissions would let a write
through: only the sandbox stops one.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, sys.argv[1])

import anyio

from membrane.builtin_tools.bash import bash_tool
from membrane.errors import MembraneError
from membrane.sandbox import SandboxPolicy, machine_support
from membrane.tools.spec import ToolContext


async def main(backend: str, checkout: Path, outside: Path) -> dict[str, object]:
    support = machine_support()
    if backend == "bubblewrap" and support.bwrap is None:
        return {"unavailable": support.bwrap_reason}
    if backend == "landlock" and not support.landlock_abi:
        return {"unavailable": support.landlock_reason}
    policy = SandboxPolicy(choice=backend, read_paths=(outside,))  # type: ignore[arg-type]
    tool = bash_tool(sandbox=policy)

    async def bash(command: str, *, read_only: bool = False) -> dict[str, object]:
        context = ToolContext(agent="a", cwd=checkout, read_only=read_only)
        try:
            with anyio.fail_after(60):
                result = await tool.handler({"command": command}, context)
        except MembraneError as exc:
            return {"error": exc.code, "message": exc.message}
        assert isinstance(result, dict)
        return result

    out: dict[str, object] = {"uid": os.getuid(), "root": support.root}
    out["status"] = await bash("cat /proc/self/status")
    out["wrote_checkout"] = await bash("echo changed > notes.txt && echo WROTE")
    notes = (checkout / "notes.txt").read_text()
    (checkout / "notes.txt").write_text("notes\n")
    out["notes_after_writer"] = notes
    out["read_only_write"] = await bash("echo changed > notes.txt", read_only=True)
    out["notes_after_reader"] = (checkout / "notes.txt").read_text()
    for name, command in {
        "outside": f"cat {outside}/keep.txt; echo changed > {outside}/keep.txt",
        "git_config": "echo '[core] hooksPath = /x' >> .git/config",
        "remount": f"mount -o remount,rw,bind {checkout}/.git; echo x >> .git/config",
        "nested_userns": f"unshare -Urm sh -c 'mount -o remount,rw,bind {outside}; "
        f"echo changed > {outside}/keep.txt'",
    }.items():
        out[name] = await bash(command)
    out["outside_after"] = (outside / "keep.txt").read_text()
    out["git_config_hooks"] = "hooksPath" in (checkout / ".git" / "config").read_text()
    os.link(outside / "keep.txt", checkout / "linked.txt")
    out["hard_link"] = await bash("echo changed > linked.txt")
    os.unlink(checkout / "linked.txt")
    out["outside_after_link"] = (outside / "keep.txt").read_text()
    # A socket of this user's outside the sandbox (its session bus, say): never reached.
    folder = Path(tempfile.mkdtemp())
    with socket.socket(socket.AF_UNIX) as bus:
        bus.bind(str(folder / "bus"))
        bus.listen(1)
        bus.settimeout(0)
        connect = f"import socket; socket.socket(socket.AF_UNIX).connect('{folder / 'bus'}')"
        out["unix_socket"] = await bash(f'{sys.executable} -c "{connect}"')
        try:
            bus.accept()[0].close()
            out["unix_socket_reached"] = True
        except BlockingIOError:
            out["unix_socket_reached"] = False
    return out


if __name__ == "__main__":
    backend, checkout, outside = sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
    print(json.dumps(anyio.run(main, backend, checkout, outside)))
