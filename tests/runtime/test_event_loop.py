"""Membrane runs on asyncio only: a runtime opened under another event loop is refused with
``invalid-request`` before it opens anything."""

from __future__ import annotations

import dataclasses

import pytest
from tests.runtime.conftest import Project

from membrane.errors import InvalidRequest
from membrane.testing import ScriptedModel


def test_a_runtime_opened_off_asyncio_is_refused_before_anything_opens(project: Project) -> None:
    # The worktree sweep at opening runs in a worker thread, which needs an event loop first.
    project.settings = dataclasses.replace(project.settings, worktrees_enabled=False)
    runtime = project.runtime(ScriptedModel({"default": [{"text": "done"}]}))
    # No asyncio loop is running: the opening is driven by hand, as another event loop's task
    # would drive it.
    opening = runtime.__aenter__()
    with pytest.raises(InvalidRequest) as caught:
        opening.send(None)
    assert caught.value.code == "invalid-request"
    assert "asyncio only" in caught.value.message
    assert not runtime.runs()
