"""``membrane explain --parent`` names the ancestor that lowered a field (DESIGN rule 13)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

WRITER = (
    "---\nname: writer\ndescription: Writes.\ntools: Read, Bash, Write\n"
    "permission: bypassPermissions\n---\nWrite.\n"
)


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "project"
    (root / ".membrane" / "agents").mkdir(parents=True)
    (root / ".membrane" / "agents" / "writer.md").write_text(WRITER, encoding="utf-8")
    return root


def _explain(project: Path, parent: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "membrane", "explain", "writer", "--json",
         "--project", str(project), "--parent", json.dumps(parent)],
        cwd=project, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_plan_parent_holds_a_bypass_child_to_plan_and_says_so(project: Path) -> None:
    out = _explain(project, {"permission_mode": "plan"})
    assert out["invocation"]["permission"] == {"value": "plan", "source": "ceiling:parent"}
    assert out["tools"]["callable"] == ["Read"]
    assert out["tools"]["left_out"]["Bash"] == "permission mode plan"
    assert out["permissions"]["ceiling"]["mode"] == {"value": "plan", "source": "ceiling:parent"}


def test_a_ceiling_from_a_published_event_names_the_run_that_denied(project: Path) -> None:
    ceiling = {
        "mode": {"value": "acceptEdits", "source": "ceiling:0123456789abcdef"},
        "denied": [{"tool": "Bash", "source": "ceiling:0123456789abcdef"}],
        "allowed": [],
        "rules": [],
        "network": {"value": True, "source": None},
    }
    out = _explain(project, {"permission_mode": "bypassPermissions", "ceiling": ceiling})
    assert out["invocation"]["permission"] == {
        "value": "acceptEdits",
        "source": "ceiling:0123456789abcdef",
    }
    assert out["tools"]["left_out"]["Bash"] == "ceiling:0123456789abcdef"
    assert out["tools"]["callable"] == ["Read", "Write"]


def test_a_ceiling_that_is_not_one_is_refused(project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "membrane", "explain", "writer", "--json",
         "--project", str(project), "--parent", json.dumps({"ceiling": {"mode": "plan"}})],
        cwd=project, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "--parent.ceiling" in done.stderr
    assert "invalid-request" in done.stderr
