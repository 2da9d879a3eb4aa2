"""Loading extensions imports pydantic only for a function tool whose schema must be derived from
its parameters (counted in a fresh interpreter, never timed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from process_support import probe_json

PROBE = """
import json, sys
from pathlib import Path
from membrane.workspace import Workspace
workspace = Workspace.open(Path(sys.argv[1]))
names = sorted(workspace.registry.tools())
print(json.dumps({"names": names, "pydantic": "pydantic" in sys.modules}))
"""

EXPLICIT = """\
from membrane import Tool


async def _note(arguments, context):
    return "noted"


def setup(ext):
    ext.register_tool(Tool("note", "Take a note.", {"type": "object"}, _note))
"""

DERIVED = """\
def setup(ext):
    @ext.tool
    async def shout(text: str, times: int = 1) -> str:
        '''Shout the text.'''
        return text.upper() * times
"""


def _workspace(project: Path) -> dict[str, object]:
    report: dict[str, object] = probe_json(PROBE, project)
    return report


@pytest.mark.costs
def test_a_tool_with_its_own_schema_loads_without_pydantic(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = tmp_path / "project"
    (project / ".membrane" / "extensions").mkdir(parents=True)
    (project / ".membrane" / "extensions" / "notes.py").write_text(EXPLICIT)
    report = _workspace(project)
    assert "note" in report["names"]  # type: ignore[operator]
    assert report["pydantic"] is False


@pytest.mark.costs
def test_a_function_tool_without_a_schema_derives_it_with_pydantic(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = tmp_path / "project"
    (project / ".membrane" / "extensions").mkdir(parents=True)
    (project / ".membrane" / "extensions" / "loud.py").write_text(DERIVED)
    report = _workspace(project)
    assert "shout" in report["names"]  # type: ignore[operator]
    assert report["pydantic"] is True
