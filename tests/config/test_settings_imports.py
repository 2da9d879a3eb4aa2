"""Loading the settings, and a catalog whose definitions name MCP servers, imports no validation
library: the CLI's start pays for neither (counted in a fresh interpreter, never timed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from process_support import probe_json

PROBE = """
import json, sys
from pathlib import Path
from membrane import load_settings
from membrane.agents.catalog import Catalog
project = Path(sys.argv[1])
settings = load_settings(project=project)
catalog = Catalog(project=project, settings=settings)
clock = catalog.require("clock")
report = {
    "errors": [str(error) for error in catalog.errors],
    "servers": sorted(settings.mcp_servers),
    "own": sorted(clock.mcp_servers),
    "modules": sorted(sys.modules),
}
print(json.dumps(report))
"""

CONFIG = """
max_depth = 4
default_tools = "read, grep"
[roles.ci]
allow = ["Read"]
[rate_limits.Bash]
max_calls = 3
window_seconds = 60
[models.local]
provider = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"
[mcp_servers.time]
command = "mcp-server-time"
"""

AGENT = """---
name: clock
description: Tells the time.
tools: mcp__time__get_current_time
mcpServers:
  time:
    command: mcp-server-time
---
Tell the time.
"""


@pytest.mark.costs
def test_settings_and_a_catalog_load_without_pydantic(tmp_path: Path, isolated_home: Path) -> None:
    project = tmp_path / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "config.toml").write_text(CONFIG)
    (project / ".membrane" / "agents" / "clock.md").write_text(AGENT)
    report = probe_json(PROBE, project)
    assert report["errors"] == []
    assert report["servers"] == ["time"] and report["own"] == ["time"]
    libraries = {m.split(".")[0] for m in report["modules"]}
    assert not libraries & {"pydantic", "pydantic_core", "jsonschema", "typer", "rich"}
