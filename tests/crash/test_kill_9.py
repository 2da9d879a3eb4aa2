"""``make test-crash``: kill -9 at random points of a delegation, in an in-process Python host
and in ``membrane serve``, then recovery, then the invariants of ``delegation.check``.

Opt-in (the ``crash`` marker, left out of ``make test``): about ten minutes here. The count of
kills on each side is ``MEMBRANE_CRASH_HOST_KILLS`` (default 150) and
``MEMBRANE_CRASH_SERVER_KILLS`` (default 60); ``MEMBRANE_CRASH_SEED`` fixes the draw. Each test
prints one summary line.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import anyio
import pytest

from membrane.store import SQLiteStore

from . import delegation, host_series, server_series

pytestmark = [pytest.mark.crash, pytest.mark.anyio]

SEED = int(os.environ.get("MEMBRANE_CRASH_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)


def _kills(name: str, default: int) -> int:
    return int(os.environ.get(name, str(default)))


async def test_a_python_host_killed_at_random_commits_recovers_with_every_invariant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kills = _kills("MEMBRANE_CRASH_HOST_KILLS", 150)
    rng = random.Random(SEED)
    status = await anyio.to_thread.run_sync(host_series.forked, tmp_path / "uncut", 0)
    assert status == 0
    commits = int((tmp_path / "uncut" / "commits").read_text())
    with SQLiteStore(tmp_path / "uncut" / "state.db") as store:
        delegation.check(store, "uncut")
    totals: Counter[str] = Counter()
    for n in range(kills):
        folder = tmp_path / f"k{n}"
        point = rng.randint(1, commits)
        status = await anyio.to_thread.run_sync(host_series.forked, folder, point)
        totals["killed" if os.WIFSIGNALED(status) else "ended first"] += 1
        with anyio.fail_after(120):
            await host_series.recover(folder)
        with SQLiteStore(folder / "state.db") as store:
            for key, value in delegation.check(store, f"host kill {n} at commit {point}").items():
                totals[key] += value
    with capsys.disabled():
        print(
            f"\ncrash series, python host (seed {SEED}): {kills} runs killed with SIGKILL at a "
            f"random one of {commits} commits ({totals['killed']} killed, "
            f"{totals['ended first']} ended first); after recovery: {totals['sessions']} "
            f"sessions, one per request id, depths exact, {totals['deliveries']} deliveries "
            f"each once, ledgers equal to {totals['tokens']} tokens of usage events, "
            "0 runs unfinished"
        )


def test_membrane_serve_killed_at_random_moments_recovers_with_every_invariant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kills = _kills("MEMBRANE_CRASH_SERVER_KILLS", 60)
    rng = random.Random(SEED + 1)
    uncut = server_series.Case(tmp_path / "uncut").make()
    span = server_series.baseline(uncut)
    with SQLiteStore(server_series.recover(uncut)) as store:
        delegation.check(store, "uncut")
    totals: Counter[str] = Counter()
    for n in range(kills):
        case = server_series.Case(tmp_path / f"s{n}").make()
        delay = server_series.draw(rng, span)
        server_series.kill_once(case, delay)
        with SQLiteStore(server_series.recover(case)) as store:
            where = f"server kill {n} after {delay:.3f} s"
            for key, value in delegation.check(store, where).items():
                totals[key] += value
    with capsys.disabled():
        print(
            f"\ncrash series, membrane serve (seed {SEED}): {kills} servers killed with SIGKILL "
            f"at a random moment within 1.2 x the {span:.2f} s the delegation takes; after "
            f"restart and recovery: {totals['sessions']} sessions, one per request id, depths "
            f"exact, {totals['deliveries']} deliveries each once, ledgers equal to "
            f"{totals['tokens']} tokens of usage events, 0 runs unfinished"
        )
