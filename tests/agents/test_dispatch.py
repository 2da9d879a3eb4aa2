"""Dispatch: exact, case-insensitive when unambiguous, and every fallback policy."""

from __future__ import annotations

from pathlib import Path

import pytest
from agents_support import write_agent

from membrane import Catalog, Settings
from membrane.errors import UnknownSubagent


@pytest.fixture
def catalog(project: Path, project_agents: Path) -> Catalog:
    write_agent(project_agents, "reviewer.md", "name: Reviewer")
    write_agent(project_agents, "audit-a.md", "name: auditor")
    write_agent(project_agents, "audit-b.md", "name: AUDITOR")
    write_agent(project_agents, "off.md", "name: retired\nenabled: false")
    return Catalog(project=project)


def with_fallback(catalog: Catalog, fallback: str | None) -> Catalog:
    return Catalog(project=catalog.project, settings=Settings(fallback_subagent=fallback))


def test_an_exact_name_dispatches_without_a_note(catalog: Catalog) -> None:
    result = catalog.dispatch("Reviewer")
    assert (result.definition.name, result.requested, result.note) == ("Reviewer", "Reviewer", None)
    assert not result.fallback


def test_a_unique_case_insensitive_match_dispatches_with_a_note(catalog: Catalog) -> None:
    result = catalog.dispatch("reviewer")
    assert result.definition.name == "Reviewer"
    assert result.note is not None and "case-insensitive" in result.note
    assert not result.fallback


def test_an_exact_name_wins_over_its_case_variants(catalog: Catalog) -> None:
    assert catalog.dispatch("AUDITOR").definition.name == "AUDITOR"
    assert catalog.dispatch("auditor").definition.name == "auditor"


def test_an_ambiguous_name_falls_back_to_general_purpose_with_a_note(catalog: Catalog) -> None:
    result = catalog.dispatch("Auditor")
    assert result.definition.name == "general-purpose" and result.fallback
    assert result.note is not None and "ambiguous" in result.note
    assert "`auditor`" in result.note and "`AUDITOR`" in result.note


def test_an_unknown_type_falls_back_to_general_purpose_when_the_setting_is_unset(
    catalog: Catalog,
) -> None:
    result = catalog.dispatch("no-such-agent")
    assert (result.definition.name, result.requested) == ("general-purpose", "no-such-agent")
    assert result.fallback
    assert result.note is not None and "unknown" in result.note


def test_a_disabled_type_falls_back(catalog: Catalog) -> None:
    result = catalog.dispatch("retired")
    assert result.definition.name == "general-purpose"
    assert result.note is not None and "disabled" in result.note


def test_a_named_fallback_is_used_for_unknown_types(catalog: Catalog) -> None:
    result = with_fallback(catalog, "reviewer").dispatch("nobody")
    assert result.definition.name == "Reviewer" and result.fallback
    assert "fallback_subagent" in (result.note or "")


@pytest.mark.parametrize("requested", ["nobody", "retired", "Auditor"])
def test_fallback_none_fails_closed(catalog: Catalog, requested: str) -> None:
    with pytest.raises(UnknownSubagent) as caught:
        with_fallback(catalog, "none").dispatch(requested)
    assert caught.value.code == "unknown-subagent"
    assert caught.value.data["requested"] == requested


def test_fallback_none_still_dispatches_known_types(catalog: Catalog) -> None:
    assert with_fallback(catalog, "none").dispatch("Reviewer").definition.name == "Reviewer"


def test_a_missing_named_fallback_fails_closed(catalog: Catalog) -> None:
    with pytest.raises(UnknownSubagent, match="the fallback `ghost` is unknown"):
        with_fallback(catalog, "ghost").dispatch("nobody")


def test_a_disabled_general_purpose_leaves_no_default_fallback(
    project: Path, project_agents: Path
) -> None:
    write_agent(project_agents, "gp.md", "name: general-purpose\nenabled: false")
    with pytest.raises(UnknownSubagent, match="general-purpose"):
        Catalog(project=project).dispatch("nobody")


def test_the_error_suggests_the_closest_known_name(catalog: Catalog) -> None:
    with pytest.raises(UnknownSubagent) as caught:
        with_fallback(catalog, "none").dispatch("explorr")
    assert caught.value.data["suggestion"] == "explorer"
    assert "did you mean `explorer`?" in caught.value.message


def test_the_fallback_setting_is_read_from_the_project_config(
    project: Path, project_agents: Path
) -> None:
    (project / ".membrane" / "config.toml").write_text('fallback_subagent = "none"\n')
    with pytest.raises(UnknownSubagent):
        Catalog(project=project).dispatch("nobody")


def test_a_broken_file_is_named_with_its_error_not_reported_as_unknown(
    project: Path, project_agents: Path
) -> None:
    write_agent(project_agents, "broken.md", "name: broken\ntools: none, Read")
    catalog = Catalog(project=project)
    result = catalog.dispatch("broken")
    assert result.definition.name == "general-purpose" and result.fallback
    assert result.note is not None and "unknown" not in result.note
    assert "broken.md" in result.note and "cannot be used" in result.note
    strict = with_fallback(catalog, "none")
    with pytest.raises(UnknownSubagent, match=r"broken\.md, which cannot be used") as caught:
        strict.dispatch("broken")
    assert "unknown" not in caught.value.data["reason"]
