"""The settings and definition value classes behave as the frozen dataclasses they were: equal
by value, hashable, immutable, readable reprs, and ``dataclasses.fields``/``replace``/``asdict``,
``copy`` and ``pickle`` work on them. They are built without the ``dataclasses`` module, which
``membrane agents list`` never imports (counted in a fresh interpreter)."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from membrane import AgentDefinition, Budget, Settings
from membrane.config.values import McpServerSpec
from membrane.errors import InvalidRequest


def test_equal_values_are_equal_and_hash_alike() -> None:
    assert Budget(tokens=5, seconds=2) == Budget(tokens=5, seconds=2.0)
    assert Budget(tokens=5) != Budget(tokens=6)
    same_values: object = (5, None, None, None, None)
    assert Budget(tokens=5) != same_values
    assert hash(Budget(turns=3)) == hash(Budget(turns=3))
    assert len({Budget(turns=3), Budget(turns=3), Budget(turns=4)}) == 2


def test_a_frozen_value_cannot_change() -> None:
    budget = Budget(tokens=5)
    with pytest.raises(AttributeError, match="cannot assign to field 'tokens'"):
        budget.tokens = 6  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del budget.tokens
    with pytest.raises(AttributeError):
        budget.other = 1  # type: ignore[attr-defined]
    assert budget.tokens == 5


def test_defaults_and_factories_are_applied_per_instance() -> None:
    first, second = McpServerSpec("a", command="a"), McpServerSpec("b", command="b")
    assert first.env == {} and first.env is not second.env
    assert AgentDefinition(name="x").keys is not AgentDefinition(name="y").keys


def test_post_init_checks_and_normalises() -> None:
    assert type(Budget(seconds=3).seconds) is float
    with pytest.raises(InvalidRequest):
        Budget(turns=-1)
    with pytest.raises(InvalidRequest):
        Settings(max_concurrency=0)


def test_repr_names_every_field() -> None:
    assert repr(Budget(turns=2)) == (
        "Budget(tokens=None, turns=2, tool_calls=None, children=None, seconds=None)"
    )


def test_dataclasses_helpers_keep_working() -> None:
    budget = Budget(tokens=1, turns=2)
    assert dataclasses.is_dataclass(budget)
    assert [f.name for f in dataclasses.fields(Budget)] == [
        "tokens",
        "turns",
        "tool_calls",
        "children",
        "seconds",
    ]
    assert dataclasses.replace(budget, turns=9) == Budget(tokens=1, turns=9)
    assert dataclasses.asdict(budget) == {
        "tokens": 1,
        "turns": 2,
        "tool_calls": None,
        "children": None,
        "seconds": None,
    }
    settings = dataclasses.replace(Settings(), max_depth=2)
    assert settings.max_depth == 2 and settings == Settings(max_depth=2)
    with pytest.raises(InvalidRequest):  # replace builds through __init__: the checks run
        dataclasses.replace(budget, turns=-1)


def test_copies_and_pickles_are_equal() -> None:
    definition = AgentDefinition(name="x", budget=Budget(turns=1), keys={"name": "name"})
    assert copy.deepcopy(definition) == definition
    assert copy.copy(definition) == definition
    assert pickle.loads(pickle.dumps(definition)) == definition
    budget = Budget(tokens=4, seconds=1.5)
    assert pickle.loads(pickle.dumps(budget)) == budget


HEAVY = ("dataclasses", "inspect", "ast", "dis", "tokenize")


def test_agents_list_imports_no_dataclasses(tmp_path: Path, isolated_home: Path) -> None:
    workspace = tmp_path / "workspace"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "workspace", workspace)
    probe = (
        "import json, sys\n"
        "from membrane.cli.app import main\n"
        "code = main(['agents', 'list'])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
    )
    modules: list[set[str]] = []
    for _ in range(2):  # the first listing parses the files and fills the cache
        done = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=workspace,
            check=False,
        )
        report = json.loads(done.stderr.strip().splitlines()[-1])
        assert report["code"] == 0
        assert "scout" in done.stdout
        modules.append(set(report["modules"]))
    assert "membrane.agents.fields" in modules[0]
    # The second hits the cache: every definition, the settings and the command line are built
    # without dataclasses (nor inspect, which it imports).
    assert "membrane.agents.fields" not in modules[1]
    assert sorted(modules[1] & set(HEAVY)) == []
