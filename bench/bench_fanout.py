"""Fan-out against a rate-limited endpoint: fifty children, one provider allowing 10 requests a
second, through the real ``openai`` SDK and a loopback server that answers HTTP 429 beyond its
limit (``tests/models/wire_server.RateLimitedServer``).

The lead's one turn calls ``Task`` fifty times; the children run at once and each makes one
request; the lead then answers. The deployment's lane (``[models.NAME] requests_per_minute``)
paces every request of the tree. The ideal is the total requests divided by the allowed rate,
in the same run: nothing can finish sooner without a 429. Goal: at most 1.2x the ideal, every
child finished, and the server never sees more than its limit in one second.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "models"))

from wire_server import RateLimitedServer

from membrane import SubagentRuntime, SubagentStartRequest
from membrane.models.specs import ModelRouter
from membrane.runtime import InProcessProvider
from membrane.runtime.workspace import Workspace

CHILDREN = int(os.environ.get("CHILDREN", "50"))
PER_SECOND = 10
REQUESTS_PER_MINUTE = 570  # a little under the server's 600, as users set it


def script(agent: str, turn: int, body: Mapping[str, Any]) -> dict[str, Any]:
    if agent == "kid":
        return {"text": "part done"}
    if turn == 0:
        tasks = [{"agent": "kid", "task": f"part {n}"} for n in range(CHILDREN)]
        return {"tool_calls": [{"name": "Task", "arguments": task} for task in tasks]}
    return {"text": "all parts done"}


def project(root: Path, url: str) -> Path:
    agents = root / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (root / ".membrane" / "config.toml").write_text(
        f'[models.local]\nprovider = "openai"\nmodel = "m"\nbase_url = "{url}/v1"\n'
        f'api_key_env = "MEMBRANE_BENCH_KEY"\nstream = false\n'
        f"requests_per_minute = {REQUESTS_PER_MINUTE}\n"
    )
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: Splits.\nmodel: local\nallowed_subagents: [kid]\n---\nGo.\n"
    )
    (agents / "kid.md").write_text("---\nname: kid\ndescription: A part.\nmodel: local\n---\nGo.\n")
    return root


async def main() -> None:
    os.environ["MEMBRANE_BENCH_KEY"] = "sk-bench"
    with tempfile.TemporaryDirectory() as folder:
        os.environ["MEMBRANE_HOME"] = str(Path(folder) / "home")
        with RateLimitedServer(script, per_second=PER_SECOND, flavour="vllm") as server:
            ws = Workspace.open(project(Path(folder) / "project", server.url))
            router = ModelRouter.from_settings(ws.settings)
            runtime = SubagentRuntime.on_workspace(
                ws, InProcessProvider(router), store=ws.open_store(Path(folder) / "state.db")
            )
            # Opening the runtime and the SDK's first client are not the fan-out's cost.
            router.bind("local").client()  # type: ignore[attr-defined]
            async with runtime:
                started = time.perf_counter()
                started_at = time.monotonic()
                lead = await runtime.run(SubagentStartRequest("lead", "Go."))
                elapsed = time.perf_counter() - started
            await router.aclose()
    first = server.arrivals[0] - started_at
    requests = CHILDREN + 2
    ideal = requests / PER_SECOND
    ratio = elapsed / ideal
    finished = lead.status == "completed" and server.limited == 0
    print(
        f"fan-out: {CHILDREN} children, {len(server.arrivals)} requests ({server.limited} "
        f"answered 429), busiest second {server.busiest_second()}, first request after "
        f"{first:.2f} s, all done in {elapsed:.2f} s, ideal {ideal:.2f} s"
    )
    verdict = "met" if ratio <= 1.2 and finished else "missed"
    print(
        f"goal fan-out of {CHILDREN} children on a {PER_SECOND} req/s endpoint: at most 1.2x "
        f"the ideal (requests / allowed rate), measured {ratio:.2f}x ({verdict})"
    )


if __name__ == "__main__":
    anyio.run(main)
