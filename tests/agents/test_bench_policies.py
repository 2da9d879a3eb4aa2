"""The AgentDojo benchmark's policy files (``bench/agentdojo/policies/<suite>/``) load as a user's
definitions do: no error, no warning, and each tool token and argument rule is kept. A file
that stopped loading would leave the benchmark's Membrane row without its ``assistant``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from membrane.agents.catalog import Catalog

POLICIES = Path(__file__).resolve().parents[2] / "bench" / "agentdojo" / "policies"
SUITES = sorted(p.name for p in POLICIES.iterdir() if p.is_dir())


def test_policies_exist_for_the_suites_the_benchmark_reports() -> None:
    assert {"workspace", "slack"} <= set(SUITES)


@pytest.mark.parametrize("suite", SUITES)
def test_a_suite_policy_loads_without_errors_or_warnings(suite: str, tmp_path: Path) -> None:
    agents = tmp_path / ".membrane" / "agents"
    agents.mkdir(parents=True)
    for policy in (POLICIES / suite).glob("*.md"):
        shutil.copy(policy, agents / policy.name)
    (tmp_path / "home").mkdir()
    catalog = Catalog(project=tmp_path, home=tmp_path / "home")
    assert catalog.errors == []
    assistant = catalog.get("assistant")
    assert assistant is not None
    assert assistant.warnings == ()
    assert assistant.tools and all(t.startswith(f"ext:{suite}/") for t in assistant.tools)
    assert assistant.rules, "the suite's argument rules are kept"
