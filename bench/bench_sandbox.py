"""The cost of one sandboxed ``Bash`` call against the same call unsandboxed and against bare
``bwrap``.

In one run, for the command ``true`` in a git checkout, this times:

* ``Bash`` through its tool handler with the bubblewrap sandbox (boundary planned at each call,
  control paths held read-only, PID and network namespaces, private tmp);
* the same handler with the shell guard alone (no OS boundary);
* ``bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid --unshare-net --die-with-parent
  bash -c true`` run directly, the floor any bubblewrap sandbox pays;
* the Landlock backend through the same handler, where the kernel has it (a writing child's
  call: boundary planned, hard links looked for, the command started by the spawn helper);
* ``bash -c true`` run directly, the floor any command pays.

Goals: Membrane's bubblewrap call costs at most 1.5x bare ``bwrap``; its Landlock call at most
1.5x bare ``bwrap`` (where bubblewrap exists) and at most 3x a bare ``bash -c true``.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from membrane.builtin_tools.bash import bash_tool
from membrane.sandbox import SandboxPolicy, machine_support
from membrane.sandbox.process import run_process
from membrane.tools.spec import ToolContext

ROUNDS = 9
CALLS = 10
GOAL = 1.5
LANDLOCK_GOAL_BWRAP = 1.5
LANDLOCK_GOAL_EXEC = 3.0


async def _medians(calls: dict[str, Callable[[], Awaitable[object]]]) -> dict[str, float]:
    """The median, over ``ROUNDS`` rounds, of the mean time of one call of each kind.

    The kinds take turns within every round, so a machine whose load drifts during the run
    weighs on all of them alike."""
    for call in calls.values():
        await call()
    rounds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(ROUNDS):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(CALLS):
                await call()
            rounds[name].append((time.perf_counter() - start) / CALLS)
    return {name: statistics.median(times) for name, times in rounds.items()}


def _goal(what: str, target: float, measured: float | None) -> None:
    if measured is None:
        print(f"goal {what}: <= {target}x, measured n/a (missed)")
        return
    verdict = "met" if measured <= target else "missed"
    print(f"goal {what}: <= {target}x, measured {measured:.2f}x ({verdict})")


async def main() -> None:
    support = machine_support()
    if support.bwrap is None:
        print(f"bench_sandbox: skipped, {support.bwrap_reason}")
        _goal("sandboxed Bash true vs bare bwrap", GOAL, None)
        _goal("Landlock Bash true vs bare bwrap", LANDLOCK_GOAL_BWRAP, None)
        _goal("Landlock Bash true vs bare bash -c true", LANDLOCK_GOAL_EXEC, None)
        return
    shell = shutil.which("bash") or "bash"
    with tempfile.TemporaryDirectory() as tmp:
        checkout = Path(tmp) / "checkout"
        checkout.mkdir()
        subprocess.run(["git", "init", "-q", str(checkout)], check=True)
        context = ToolContext(agent="bench", cwd=checkout)
        sandboxed = bash_tool(sandbox=SandboxPolicy("bubblewrap"))
        guarded = bash_tool(sandbox=SandboxPolicy("guard"))
        bare_argv = [
            support.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--unshare-pid", "--unshare-net", "--die-with-parent", shell, "-c", "true",
        ]  # fmt: skip

        async def bare() -> object:
            return await run_process(bare_argv, cwd=checkout, timeout=30)

        async def bare_exec() -> object:
            return await run_process([shell, "-c", "true"], cwd=checkout, timeout=30)

        async def membrane_call() -> object:
            return await sandboxed.handler({"command": "true"}, context)

        async def guard_call() -> object:
            return await guarded.handler({"command": "true"}, context)

        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "bwrap": bare,
            "sandbox": membrane_call,
            "guard": guard_call,
            "exec": bare_exec,
        }
        if support.landlock_abi:
            landlocked = bash_tool(sandbox=SandboxPolicy("landlock"))

            async def landlock_call() -> object:
                return await landlocked.handler({"command": "true"}, context)

            calls["landlock"] = landlock_call
        times = await _medians(calls)
    bwrap_time, sandbox_time, guard_time = times["bwrap"], times["sandbox"], times["guard"]
    landlock_time = times.get("landlock")
    ratio = sandbox_time / bwrap_time
    print("sandbox: one Bash call running `true`, median of per-call means")
    print(f"  bare bwrap ... true           {bwrap_time * 1e3:8.2f} ms")
    print(f"  Bash, bubblewrap sandbox      {sandbox_time * 1e3:8.2f} ms")
    print(f"  Bash, shell guard only        {guard_time * 1e3:8.2f} ms")
    if landlock_time is not None:
        print(f"  Bash, Landlock sandbox        {landlock_time * 1e3:8.2f} ms")
        print(f"  Landlock / shell guard only   {landlock_time / guard_time:8.2f}x")
    print(f"  sandboxed / unsandboxed       {sandbox_time / guard_time:8.2f}x")
    print(f"  sandboxed / bare bwrap        {ratio:8.2f}x")
    print(f"  bare bash -c true             {times['exec'] * 1e3:8.2f} ms")
    _goal("sandboxed Bash true vs bare bwrap", GOAL, ratio)
    over_bwrap = None if landlock_time is None else landlock_time / bwrap_time
    over_exec = None if landlock_time is None else landlock_time / times["exec"]
    _goal("Landlock Bash true vs bare bwrap", LANDLOCK_GOAL_BWRAP, over_bwrap)
    _goal("Landlock Bash true vs bare bash -c true", LANDLOCK_GOAL_EXEC, over_exec)


if __name__ == "__main__":
    anyio.run(main)
