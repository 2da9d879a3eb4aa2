"""Model adapters: Membrane's own cost per turn on a real SDK, against the SDK call made directly.

Both sides talk to the same loopback replay server (``tests/models/replay.py``), which answers
every request with the same recorded streamed reply (text, or two parallel tool calls with
fragmented arguments), so the network and the server cost the same on both sides.

* direct: ``AsyncOpenAI.chat.completions.create(..., stream=True)`` (and
  ``AsyncAnthropic.messages.create(..., stream=True)``), iterating every chunk, on a body built
  once by hand;
* Membrane: ``OpenAIModel.request()`` / ``AnthropicModel.request()`` (conversion of the
  conversation, the retry wrapper, chunk assembly, the response converter) and one whole
  ``AgentLoop`` turn on ``OpenAIModel`` (view, request, usage event, final answer).

Samples are interleaved (direct, adapter, loop, direct, ...) so that load on the machine hits
every side alike; the figure is the median. Goal: each Membrane path at most 1.2x the direct
call. ``ROUNDS`` in the environment changes the number of samples.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "models"))

from replay import ReplayServer, load

from membrane.loop.agent_loop import AgentLoop
from membrane.models.anthropic import AnthropicModel
from membrane.models.base import Message, ModelRequest
from membrane.models.convert import to_anthropic_messages, to_openai_messages
from membrane.models.openai import OpenAIModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext

ROUNDS = int(os.environ.get("ROUNDS", "200"))
WARMUP = 20
GOAL = 1.2
KEY = "sk-bench-0000000000"
GREP = {"name": "Grep", "description": "Search.", "input_schema": {"type": "object"}}
HISTORY = tuple(
    Message("user" if i % 2 == 0 else "assistant", f"message {i} " * 20) for i in range(12)
)
REQUEST = ModelRequest(
    agent="bench", run_id="r", system="Be brief.", messages=HISTORY, tools=(GREP,)
)

Sample = Callable[[], Awaitable[object]]


async def _median(samples: dict[str, Sample]) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in samples}
    for round_ in range(WARMUP + ROUNDS):
        for name, sample in samples.items():
            start = time.perf_counter()
            await sample()
            if round_ >= WARMUP:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


async def openai_side(url: str) -> dict[str, float]:
    model = OpenAIModel("gpt-4o", api_key=KEY, base_url=url + "/v1")
    client = model.client()
    body = {**to_openai_messages(REQUEST), "model": "gpt-4o"}

    async def direct() -> object:
        stream = await client.chat.completions.create(
            **body, stream=True, stream_options={"include_usage": True}
        )
        return [chunk async for chunk in stream]

    async def adapter() -> object:
        return await model.request(REQUEST)

    async def loop_turn() -> object:
        loop = AgentLoop(
            model=model,
            scope=Scope(ToolRegistry(), name="bench"),
            agent="bench",
            run_id="r",
            system="Be brief.",
            task="",
            messages=HISTORY,
            context=ToolContext(agent="bench", run_id="r"),
            max_turns=1,
        )
        return await loop.run()

    try:
        return await _median({"direct": direct, "adapter": adapter, "loop": loop_turn})
    finally:
        await model.aclose()


async def anthropic_side(url: str) -> dict[str, float]:
    model = AnthropicModel("claude-sonnet-4-6", api_key=KEY, base_url=url)
    client = model.client()
    body: dict[str, Any] = {
        **to_anthropic_messages(REQUEST),
        "model": "claude-sonnet-4-6",
        "max_tokens": 8192,
    }

    async def direct() -> object:
        stream = await client.messages.create(**body, stream=True)
        return [event async for event in stream]

    async def adapter() -> object:
        return await model.request(REQUEST)

    try:
        return await _median({"direct": direct, "adapter": adapter})
    finally:
        await model.aclose()


def _line(what: str, ratio: float) -> str:
    verdict = "met" if ratio <= GOAL else "missed"
    return f"goal {what}: <= {GOAL}x the direct SDK call, measured {ratio:.2f}x ({verdict})"


async def main() -> None:
    with ReplayServer(load("openai", "text_stream")) as text_server:
        text_server.repeat = True
        text = await openai_side(text_server.url)
    with ReplayServer(load("anthropic", "parallel_stream")) as tool_server:
        tool_server.repeat = True
        tools = await anthropic_side(tool_server.url)
    print(f"rounds: {ROUNDS} (median, interleaved), replay server on 127.0.0.1")
    print(
        f"openai    direct {text['direct'] * 1e3:7.3f} ms  adapter {text['adapter'] * 1e3:7.3f} ms"
        f"  loop turn {text['loop'] * 1e3:7.3f} ms"
    )
    direct, adapter = tools["direct"] * 1e3, tools["adapter"] * 1e3
    print(f"anthropic direct {direct:7.3f} ms  adapter {adapter:7.3f} ms")
    print(_line("OpenAIModel.request per turn", text["adapter"] / text["direct"]))
    print(_line("AgentLoop turn on OpenAIModel", text["loop"] / text["direct"]))
    print(
        _line(
            "AnthropicModel.request per turn (parallel tool calls)",
            tools["adapter"] / tools["direct"],
        )
    )


if __name__ == "__main__":
    anyio.run(main)
