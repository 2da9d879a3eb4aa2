"""``membrane agents list|show|validate`` through the real entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from membrane.cli import main


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    agents = tmp_path / "project" / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (isolated_home / "agents").mkdir()
    (isolated_home / "agents" / "reviewer.md").write_text("---\nname: reviewer\nmodel: g\n---\nG\n")
    (agents / "reviewer.md").write_text(
        "---\nname: reviewer\ntools: inherit\nallowed-tools: Bash\n---\nReview.\n"
    )
    (agents / "broken.md").write_text("---\nname: broken\ntools: [Read\n---\n")
    return tmp_path / "project"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_json_shows_roots_shadows_warnings_and_errors(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "agents", "list", "--json", "--project", str(project))
    assert code == 0
    payload = json.loads(out)
    agents = {a["name"]: a for a in payload["agents"]}
    assert {"general-purpose", "explorer", "code-reviewer", "plan", "reviewer"} <= set(agents)
    reviewer = agents["reviewer"]
    assert reviewer["root"] == "project"
    assert [s["root"] for s in reviewer["shadows"]] == ["global"]
    assert [w["code"] for w in reviewer["warnings"]] == ["authority-near-miss"]
    [error] = payload["errors"]
    assert error["code"] == "definition-invalid" and error["data"]["field"] == "tools"


def test_list_prints_a_table_and_every_problem(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "agents", "list", "--project", str(project))
    assert code == 0
    assert "general-purpose" in out and "reviewer" in out
    assert "reviewer.md:4: authority-near-miss:" in out
    assert "broken.md:3: definition-invalid:" in out


def test_show_json_prints_the_definition_with_explicit_values_only(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "agents", "show", "REVIEWER", "--json", "--project", str(project))
    assert code == 0
    payload = json.loads(out)
    assert payload["tools"] == ["inherit"] and "model" not in payload
    assert payload["extra"] == {"allowed-tools": "Bash"}
    assert payload["shadows"][0]["root"] == "global"


def test_show_prints_fields_and_the_prompt(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "agents", "show", "explorer", "--project", str(project))
    assert code == 0
    assert "Read, Glob, Grep" in out and "You explore a codebase" in out


def test_show_of_an_unknown_agent_is_a_config_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "agents", "show", "nobody", "--project", str(project))
    assert code == 2
    assert "unknown-subagent" in err


def test_show_of_an_unusable_file_names_its_definition_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "agents", "show", "broken", "--project", str(project))
    assert code == 2
    assert err.startswith("definition-invalid: ")
    assert "broken.md:3" in err


def test_validate_prints_file_line_code_message_and_exits_1_on_an_unusable_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = project / ".membrane" / "agents"
    code, out, _ = run(capsys, "agents", "validate", str(agents))
    assert code == 1
    lines = out.splitlines()
    assert f"{agents / 'reviewer.md'}:4: authority-near-miss: " in "\n".join(lines)
    assert any(line.startswith(f"{agents / 'broken.md'}:3: definition-invalid: ") for line in lines)


def test_validate_of_good_files_exits_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "agents", "validate", str(project / ".membrane/agents/reviewer.md")
    )
    assert code == 0
    assert "authority-near-miss" in out
    assert "1 usable, 0 unusable" in err


def test_validate_without_paths_checks_every_root_of_the_project(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "agents", "validate", "--project", str(project))
    assert code == 1
    assert "broken.md:3: definition-invalid:" in out


def test_validate_without_paths_counts_only_files_on_disk(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, err = run(capsys, "agents", "validate", "--project", str(project))
    # Two project files and one global file; the four packaged builtins are not files here.
    assert "3 file(s): 2 usable, 1 unusable" in err


def test_rich_markup_in_a_definition_is_printed_as_written(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    agents = project / ".membrane" / "agents"
    (agents / "[bold]odd[red].md").write_text(
        '---\nname: odd\ndescription: "[/x] closes nothing [red]"\nmodel: "[/]"\n---\n[b]Body\n'
    )
    (agents / "weird.md").write_text('---\nname: "a]b[/red] [bold]x"\n---\nB\n')
    code, out, _ = run(capsys, "agents", "show", "odd", "--project", str(project))
    assert code == 0
    assert "[/x] closes nothing [red]" in out and "[/]" in out and "[b]Body" in out
    code, out, _ = run(capsys, "agents", "list", "--project", str(project))
    assert code == 0
    assert "[bold]odd[red].md" in out
    assert "`a]b[/red] [bold]x` is not a valid agent name" in out


def test_characters_the_terminal_cannot_encode_are_escaped_not_fatal(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = project / ".membrane" / "agents"
    (agents / "sur.md").write_text(
        '---\nname: sur\ndescription: "lone \\ud800 surrogate"\n---\nBody \\ud800\n'
    )
    code, out, _ = run(capsys, "agents", "show", "sur", "--project", str(project))
    assert code == 0
    assert "lone \\ud800 surrogate" in out
    code, out, _ = run(capsys, "agents", "list", "--json", "--project", str(project))
    assert code == 0
    assert json.loads(out)["agents"]


def test_an_error_message_is_printed_without_markup(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "agents", "show", "[red]x[/red]", "--project", str(project))
    assert code == 2
    assert "agent `[red]x[/red]` is unknown" in err


def test_a_settings_error_prints_its_hint(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".membrane" / "config.toml").write_text('default_tools = ["inherit"]\n')
    code, _, err = run(capsys, "agents", "list", "--project", str(project))
    assert code == 2
    assert "settings-invalid: " in err
    assert "(hint: write `tools: inherit` in the definitions that should inherit)" in err


def test_a_hint_already_in_the_message_is_not_repeated() -> None:
    from membrane.cli.app import error_text
    from membrane.errors import DefinitionError

    error = DefinitionError("bad", path="a.md", line=2, hint="fix [it]")
    assert error_text(error) == "definition-invalid: a.md:2: bad (fix [it])"


def test_validate_of_a_fifo_or_a_symlink_loop_reports_it_and_never_hangs(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = project / "odd"
    odd.mkdir()
    fifo = odd / "pipe.md"
    os.mkfifo(fifo)
    loop = odd / "loop.md"
    loop.symlink_to(loop)
    (odd / "good.md").write_text("---\nname: good\n---\nx\n")
    for target in (fifo, loop):
        # A separate process, so that a reader blocked on the FIFO fails the test, not hangs it.
        done = subprocess.run(
            [sys.executable, "-m", "membrane", "agents", "validate", str(target)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        assert done.stdout.startswith(f"{target}: definition-invalid: cannot read the file: ")
    code, out, err = run(capsys, "agents", "validate", str(odd))
    assert code == 1
    assert "not a regular file" in out and "symbolic links" in out
    assert "3 file(s): 1 usable, 2 unusable" in err
