"""``make demo``: the example workspace end to end, on SQLite and the scripted model.

The lead delegates to ``scout`` and ``auditor``; ``scout`` tries a tool outside its scope and is
vetoed; ``auditor`` (at the depth cap of this workspace) tries to start a grandchild and is
rejected; the results come back to the lead. Everything printed comes from the run's events.
Pass ``--json`` for one JSON event per line. The run is ``--headless``: it runs in this process
and leaves no machine runtime behind.
"""

from __future__ import annotations

import sys
from pathlib import Path

from membrane.cli.app import main

HERE = Path(__file__).resolve().parent
WORKSPACE = HERE / "workspace"
SCRIPT = HERE / "scripts" / "demo.yaml"
TASK = "Review the stockroom service: find the open markers and say which ones matter."


def demo(extra: list[str]) -> int:
    print("== membrane explain lead --top-level (what the lead gets, before any model runs)\n")
    code = main(["explain", "lead", "--top-level", "--project", str(WORKSPACE)])
    if code != 0:
        return code
    print(
        "\n== membrane run lead --headless (scripted model, state under $MEMBRANE_HOME)\n",
        flush=True,
    )
    args = ["run", "lead", TASK, "--project", str(WORKSPACE), "--model", f"scripted:{SCRIPT}"]
    args.append("--headless")
    return main([*args, *extra])


if __name__ == "__main__":
    sys.exit(demo(sys.argv[1:]))
