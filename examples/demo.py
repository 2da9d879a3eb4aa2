"""``make demo``: explain what each example agent would really get, before any model runs.

The runtime replaces this with a full delegation; until then the demo shows the resolver's
answer for the lead, scout and auditor in ``examples/workspace``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from membrane.cli.app import main

WORKSPACE = Path(__file__).resolve().parent / "workspace"


def run() -> int:
    for agent in ("lead", "scout", "auditor"):
        print(f"\n=== membrane explain {agent}\n", flush=True)
        code = main(["explain", agent, "--project", str(WORKSPACE)])
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(run())
