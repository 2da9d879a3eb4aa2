"""A headless command calls the runtime's own methods in process (``membrane.server.direct``):
the same validation, the same results and the same errors as through a real ``membrane serve``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from server_support import START_BOUND, Running, clean_env

PY = sys.executable


def _actions(runtime: Running, *args: str, headless: bool) -> subprocess.CompletedProcess[str]:
    env = clean_env(runtime.home, MEMBRANE_SOCKET=str(runtime.socket))
    line = [PY, "-m", "membrane", "actions", *args, "--project", str(runtime.project), "--json"]
    return subprocess.run(
        [*line, *(["--headless"] if headless else [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_BOUND * 2,
    )


def test_an_action_list_is_the_same_headless_and_through_the_runtime(runtime: Running) -> None:
    served = _actions(runtime, "list", headless=False)
    headless = _actions(runtime, "list", headless=True)
    assert served.returncode == headless.returncode == 0, served.stderr + headless.stderr
    assert json.loads(headless.stdout) == json.loads(served.stdout)


@pytest.mark.parametrize(
    "args",
    [("run", ""), ("run", "Read", "--args", '{"file_path": 3}'), ("run", "NoSuchTool")],
)
def test_a_refused_call_is_the_same_error_headless_and_through_the_runtime(
    runtime: Running, args: tuple[str, ...]
) -> None:
    served = _actions(runtime, *args, headless=False)
    headless = _actions(runtime, *args, headless=True)
    assert served.returncode == headless.returncode == 3
    assert json.loads(headless.stderr) == json.loads(served.stderr)


def test_a_call_gives_the_same_result_headless_and_through_the_runtime(runtime: Running) -> None:
    (runtime.project / "note.txt").write_text("hello\n")
    args = ("run", "Read", "--args", json.dumps({"file_path": "note.txt"}))
    served = _actions(runtime, *args, headless=False)
    headless = _actions(runtime, *args, headless=True)
    assert served.returncode == headless.returncode == 0, served.stderr + headless.stderr
    assert json.loads(headless.stdout) == json.loads(served.stdout)
