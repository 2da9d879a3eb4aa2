"""A stand-in for a headless command-line agent, run as a real child process by the tests.

Usage: fake_agent.py MODE TASK [PERSONA]

* ``echo``: print the task, the persona (when given) and the caller identity, then exit 0;
* ``fail``: print to standard error and exit 3;
* ``hang``: start a grandchild in the same process group, write both pids to the file named by
  the task, then wait forever (to be stopped).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def main() -> int:
    mode, task = sys.argv[1], sys.argv[2]
    persona = sys.argv[3] if len(sys.argv) > 3 else None
    if mode == "echo":
        print(
            json.dumps(
                {
                    "task": task,
                    "persona": persona,
                    "run_id": os.environ.get("MEMBRANE_RUN_ID"),
                    "depth": os.environ.get("MEMBRANE_DEPTH"),
                    "cwd": os.getcwd(),
                }
            )
        )
        return 0
    if mode == "fail":
        print("the agent could not do it", file=sys.stderr)
        return 3
    if mode == "hang":
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(task + ".tmp", "w", encoding="utf-8") as handle:
            json.dump({"child": os.getpid(), "grandchild": grandchild.pid}, handle)
        os.replace(task + ".tmp", task)
        while True:
            time.sleep(60)
    print(f"unknown mode {mode!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
