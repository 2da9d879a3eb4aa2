"""A ``cost`` budget (DESIGN rule 12) in US dollars, priced per model from the settings'
``[models.NAME] price`` or the ``genai-prices`` table: 100 concurrent children on one shared
ledger overspend it by at most one response, the ledger exact to the micro-dollar; a model with
no known price under a cost budget is refused at the start (``model-price-unknown``), never
charged as zero. Through the public API on a real state file."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from membrane import SQLiteStore, SubagentRuntime, SubagentStartRequest, Usage
from membrane.errors import ModelPriceUnknown
from membrane.models import ModelRequest, ModelResponse, ToolCall
from membrane.models.prices import Prices
from membrane.testing import FunctionModel

from .conftest import write_agents

MANY = 100
#: Dollars per million tokens: 10 input tokens and 5 output tokens cost 10*2 + 5*8 = 60
#: micro-dollars a response.
PRICE = "price = {input = 2.0, output = 8.0}"
RESPONSE = Usage(input_tokens=10, output_tokens=5)
RESPONSE_COST = 60
LEAD_RESPONSE = Usage(input_tokens=8, output_tokens=2)
LIMIT = 0.003  # dollars: 50 worker responses


def _settings(root: Path, price: str = PRICE) -> None:
    (root / ".membrane" / "config.toml").write_text(
        'default_model = "cheap"\n\n[models.cheap]\nprovider = "scripted"\n'
        f'model = "cheap.yaml"\n{price}\n',
        encoding="utf-8",
    )


def _crowd_model() -> FunctionModel:
    # Every worker answers every turn with a Read after a different number of scheduling
    # rounds, so dozens of requests are in flight when the money runs out.
    waiting = anyio.Event()

    async def reply(request: ModelRequest) -> ModelResponse:
        if request.agent == "lead":
            results = [m for m in request.messages if m.role == "tool"]
            if not results:
                calls = tuple(
                    ToolCall(
                        id=f"task-{n}",
                        name="Task",
                        arguments={"agent": "worker", "task": f"part {n}", "background": True},
                    )
                    for n in range(MANY)
                )
                return ModelResponse(
                    tool_calls=calls, stop_reason="tool_calls", usage=LEAD_RESPONSE
                )
            if len(results) == MANY:
                waiting.set()
                ids = [json.loads(m.content)["run_id"] for m in results]
                wait = ToolCall(id="wait", name="TaskWait", arguments={"ids": ids})
                return ModelResponse(
                    tool_calls=(wait,), stop_reason="tool_calls", usage=LEAD_RESPONSE
                )
            return ModelResponse(text="all parts done", usage=LEAD_RESPONSE)
        await waiting.wait()
        turn = sum(1 for m in request.messages if m.role == "assistant")
        part = int(request.messages[0].content.rsplit(" ", 1)[-1])
        for _ in range((part * 7 + turn) % 5):
            await anyio.lowlevel.checkpoint()
        call = ToolCall(id=f"read-{turn}", name="Read", arguments={"file_path": "notes.txt"})
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls", usage=RESPONSE)

    # Named as the settings entry whose price it is charged at.
    return FunctionModel(reply, name="cheap")


@pytest.mark.anyio
async def test_100_concurrent_children_overspend_a_cost_budget_by_at_most_a_response(
    team: Path, tmp_path: Path
) -> None:
    _settings(team)
    state = tmp_path / "state.db"
    request = SubagentStartRequest("lead", "split the work", budget={"cost": LIMIT})
    with anyio.fail_after(600):
        async with SubagentRuntime.open(team, model=_crowd_model(), state=state) as runtime:
            result = await runtime.run(request)
            workers = [info for info in runtime.runs() if info.agent == "worker"]

    store = SQLiteStore(state)
    try:
        usages = [event.data for event in store.events() if event.kind == "usage"]
        ledger = store.get_header(result.run_id).meta["budget"]  # type: ignore[union-attr]
    finally:
        store.close()

    # Micro-dollars, at the entry's price (dollars per million tokens).
    spent = sum(2 * u["input_tokens"] + 8 * u["output_tokens"] for u in usages)
    # The ledger is exact (every response charged once, to the micro-dollar) and past the
    # limit by less than one response: the one that crossed it.
    assert round(ledger["used"]["cost"] * 1_000_000) == spent
    # Each usage event says what its response cost, in dollars.
    assert all(
        round(u["cost"] * 1_000_000) == 2 * u["input_tokens"] + 8 * u["output_tokens"]
        for u in usages
    )
    assert LIMIT * 1_000_000 <= spent < LIMIT * 1_000_000 + RESPONSE_COST
    assert len(workers) == MANY
    codes = {(info.result.error or {}).get("code") for info in workers if info.result}
    assert codes == {"budget-exceeded"}
    errors = [info.result.error or {} for info in workers if info.result]
    assert {str(error.get("data", {}).get("kind")) for error in errors} == {"cost"}


@pytest.mark.anyio
async def test_a_child_whose_model_has_no_price_is_refused_at_its_start_under_a_cost_budget(
    tmp_path: Path, isolated_home: Path
) -> None:
    root = tmp_path / "team"
    write_agents(root, {"worker": "model: openai:a-model-no-table-prices\n"})
    _settings(root)
    requests: list[ModelRequest] = []

    async def reply(request: ModelRequest) -> ModelResponse:
        requests.append(request)
        return ModelResponse(text="done", usage=RESPONSE)

    async with SubagentRuntime.open(
        root, model=FunctionModel(reply, name="cheap"), state=tmp_path / "state.db"
    ) as runtime:
        with pytest.raises(ModelPriceUnknown) as caught:
            await runtime.run(SubagentStartRequest("worker", "go", budget={"cost": 1}))
        # Without a cost budget the same child starts: nothing else needs its price.
        done = await runtime.run(SubagentStartRequest("worker", "go", budget={"tokens": 100}))
    assert caught.value.code == "model-price-unknown"
    assert caught.value.data["model"] == "openai:a-model-no-table-prices"
    assert done.status == "completed" and len(requests) == 1


def test_the_price_table_prices_a_known_model_and_the_settings_override_it() -> None:
    from membrane.config.values import ModelEntry, ModelPrice

    table = Prices({})
    usage = Usage(input_tokens=1_000, output_tokens=100, cache_read_tokens=500)
    assert table.cost("openai:gpt-4o", usage) == 2_875  # 500*2.5 + 500*1.25 + 100*10
    own = ModelEntry(provider="openai", model="gpt-4o", price=ModelPrice(input=1, output=2))
    priced = Prices({"mine": own})
    assert priced.cost("openai:gpt-4o", usage) == 1_000 + 200
    assert priced.cost("mine", usage) == 1_200
