"""``[mcp_servers.NAME]`` settings, and what explain says about MCP selectors and tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membrane.cli.app import main
from membrane.config.load import load_settings
from membrane.errors import SettingsError

from .conftest import TIME_SERVER, McpProject


def write_config(root: Path, text: str) -> None:
    config = root / ".membrane" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text, encoding="utf-8")


def test_servers_are_read_as_users_write_them(tmp_path: Path, isolated_home: Path) -> None:
    write_config(
        tmp_path,
        '[mcp_servers.time]\ncommand = "python"\nargs = ["-m", "mcp_server_time"]\n'
        '[mcp_servers.docs]\nurl = "http://127.0.0.1:9000/mcp"\ntimeout = 5\n',
    )
    servers = load_settings(project=tmp_path, home=isolated_home).mcp_servers
    assert servers["time"].transport == "stdio"
    assert servers["time"].args == ("-m", "mcp_server_time")
    assert servers["docs"].transport == "http"
    assert servers["docs"].timeout == 5.0


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('[mcp_servers.both]\ncommand = "x"\nurl = "http://127.0.0.1:1/mcp"\n', "exactly one"),
        ("[mcp_servers.neither]\ntimeout = 3\n", "exactly one"),
        ('[mcp_servers.a__b]\ncommand = "x"\n', "not a usable name"),
        ('[mcp_servers.web]\nurl = "ftp://host/mcp"\n', "not http(s)"),
        ('[mcp_servers.odd]\ncommand = "x"\ncolour = "red"\n', "colour"),
        ('[mcp_servers.slow]\ncommand = "x"\ntimeout = -1\n', "timeout"),
    ],
)
def test_a_bad_server_entry_is_a_settings_error_naming_it(
    tmp_path: Path, isolated_home: Path, table: str, problem: str
) -> None:
    write_config(tmp_path, table)
    with pytest.raises(SettingsError) as caught:
        load_settings(project=tmp_path, home=isolated_home)
    assert caught.value.code == "settings-invalid"
    assert problem in caught.value.message
    assert str(caught.value.data["key"]).startswith("mcp_servers.")


def test_a_selector_naming_no_configured_server_is_warned_and_left_out(
    mcp_project: McpProject, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp_project.agent("triage", tools="Read, mcp__github__list_issues")
    code = main(["explain", "triage", "--project", str(mcp_project.root), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tools"]["left_out"]["mcp__github__list_issues"] == "no such MCP server"
    assert out["tools"]["servers"]["mcp__github__list_issues"] == "github"
    assert any(
        w["code"] == "unknown-mcp-server" and "'github'" in w["message"] for w in out["warnings"]
    )


def test_explain_starts_the_servers_a_definition_asks_for_and_lists_their_tools(
    mcp_project: McpProject, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp_project.server("time", TIME_SERVER)
    mcp_project.agent("clock", tools="Read, mcp__time__get_current_time")
    assert main(["explain", "clock", "--project", str(mcp_project.root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "mcp__time__get_current_time" in out["tools"]["callable"]
    assert out["tools"]["left_out"]["mcp__time__convert_time"] == "not selected"
    assert out["tools"]["servers"]["mcp__time__convert_time"] == "time"
    assert main(["explain", "clock", "--project", str(mcp_project.root)]) == 0
    table = capsys.readouterr().out
    assert "server" in table
    assert "mcp__time__get_current_time" in table
