"""``Workspace.open``: one project read from disk the same way for ``explain`` and ``run``, and
an agent's memory reaching its prompt when it runs (isolated or not)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from membrane.builtin_tools import builtin_tools
from membrane.errors import InvalidRequest, SettingsError
from membrane.runtime import (
    InProcessProvider,
    RuntimeOptions,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.store import MemoryStore
from membrane.store.location import project_id
from membrane.testing import ScriptedModel
from membrane.workspace import Workspace, memory_file

TOOLS_EXTENSION = """\
from membrane import Tool


async def _run(arguments, context):
    return "ok"


def setup(ext):
    ext.register_tool(Tool("lookup", "Look a thing up.", {"type": "object"}, _run))
    ext.add_prompt_section("lookup", "Use lookup before guessing.")
"""
#: Registers a tool, then fails: the tool must not survive.
FAILING_SETUP = """\
from membrane import Tool


async def _run(arguments, context):
    return "ok"


def setup(ext):
    ext.register_tool(Tool("half_done", "Never offered.", {"type": "object"}, _run))
    raise RuntimeError("the service is unreachable")
"""
FAILING_IMPORT = "def setup(ext)\n    pass\n"
MEMORY = "The release branch is frozen until the audit ends."


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _agent(root: Path, name: str, *frontmatter: str, body: str = "Do the task.") -> Path:
    header = "\n".join([f"name: {name}", f"description: The {name} agent.", *frontmatter])
    return _write(root / ".membrane" / "agents" / f"{name}.md", f"---\n{header}\n---\n{body}\n")


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


def test_open_reads_settings_catalog_builtin_tools_and_extensions(
    project: Path, isolated_home: Path
) -> None:
    _write(project / ".membrane" / "config.toml", "max_depth = 2\n")
    _agent(project, "reviewer", "tools: Read, ext:finder/lookup")
    _write(project / ".membrane" / "extensions" / "finder.py", TOOLS_EXTENSION)

    ws = Workspace.open(project, home=isolated_home)

    assert ws.project == project.resolve()
    assert ws.settings.max_depth == 2
    assert "reviewer" in ws.catalog.definitions()
    tools = ws.registry.tools()
    assert {tool.name for tool in builtin_tools()} <= set(tools)
    assert tools["lookup"].origin == "extension:finder"
    assert set(ws.extensions) == {"finder"}
    assert ws.warnings == []
    deployment = ws.deployment()
    assert deployment.extensions["finder"] == frozenset({"lookup"})
    assert "Use lookup before guessing." in deployment.extension_prompts["finder"]
    assert deployment.project == str(ws.project)
    assert ws.state_path == isolated_home / "projects" / project_id(ws.project) / "state.db"
    assert not ws.state_path.is_relative_to(ws.project)


@pytest.mark.parametrize("source", [FAILING_SETUP, FAILING_IMPORT], ids=["setup", "import"])
def test_a_broken_extension_becomes_a_warning_and_offers_no_tools(
    project: Path, isolated_home: Path, source: str
) -> None:
    _write(project / ".membrane" / "extensions" / "finder.py", TOOLS_EXTENSION)
    _write(project / ".membrane" / "extensions" / "flaky.py", source)

    ws = Workspace.open(project, home=isolated_home)

    assert set(ws.extensions) == {"finder"}
    assert "half_done" not in ws.registry.tools()
    assert {tool.origin for tool in ws.registry.tools().values()} == {
        "builtin",
        "extension:finder",
    }
    assert "flaky" not in ws.deployment().extensions
    assert len(ws.warnings) == 1
    assert "flaky" in ws.warnings[0]


def test_a_missing_project_or_workspace_folder_is_an_invalid_request(
    tmp_path: Path, project: Path, isolated_home: Path
) -> None:
    with pytest.raises(InvalidRequest):
        Workspace.open(tmp_path / "absent", home=isolated_home)
    a_file = _write(tmp_path / "file.txt", "not a folder")
    with pytest.raises(InvalidRequest):
        Workspace.open(a_file, home=isolated_home)
    with pytest.raises(InvalidRequest):
        Workspace.open(project, workspace=tmp_path / "absent", home=isolated_home)


def test_bad_settings_are_a_settings_error(project: Path, isolated_home: Path) -> None:
    _write(project / ".membrane" / "config.toml", "max_depth = [\n")
    with pytest.raises(SettingsError):
        Workspace.open(project, home=isolated_home)


def test_memory_for_reads_the_agents_memory_file_by_scope(
    project: Path, isolated_home: Path
) -> None:
    _agent(project, "keeper", "memory: local")
    _agent(project, "plain")
    ws = Workspace.open(project, home=isolated_home)
    keeper = ws.catalog.dispatch("keeper").definition
    assert ws.memory_for(keeper) == {}
    _write(memory_file("local", "keeper", project=ws.project, home=ws.home), MEMORY)
    assert ws.memory_for(keeper) == {"local": MEMORY}
    assert ws.memory_for(ws.catalog.dispatch("plain").definition) == {}


def test_an_unreadable_memory_file_is_a_warning_not_a_silent_empty_memory(
    project: Path, isolated_home: Path
) -> None:
    _agent(project, "keeper", "memory: project")
    ws = Workspace.open(project, home=isolated_home)
    file = memory_file("project", "keeper", project=ws.project, home=ws.home)
    file.parent.mkdir(parents=True)
    file.write_bytes(b"\xff\xfe not utf-8 \xc3")
    assert ws.memory_for(ws.catalog.dispatch("keeper").definition) == {}
    assert len(ws.warnings) == 1
    assert str(file) in ws.warnings[0]


async def _first_system_prompt(ws: Workspace, agent: str) -> str:
    """Run ``agent`` as ``membrane run`` builds its runtime (``on_workspace``, with an option
    of its own); the system prompt of turn 1."""
    model = ScriptedModel({"agents": {agent: [{"text": "noted"}]}})
    steps: list[str] = []
    runtime = SubagentRuntime.on_workspace(
        ws,
        InProcessProvider(model),
        store=MemoryStore(),
        options=RuntimeOptions(on_setup_step=steps.append),
    )
    with anyio.fail_after(30):
        async with runtime:
            result = await runtime.run(SubagentStartRequest(agent, "What do you remember?"))
    assert result.status == "completed"
    assert steps, "the options given beside the workspace's reach the runtime"
    return model.requests[0].system


@pytest.mark.anyio
@pytest.mark.parametrize("scope", ["project", "local", "user"])
@pytest.mark.parametrize("isolated", [False, True], ids=["shared", "isolated"])
async def test_an_agents_memory_reaches_its_system_prompt_when_it_runs(
    project: Path, isolated_home: Path, scope: str, isolated: bool
) -> None:
    _agent(project, "keeper", f"memory: {scope}", f"isolated: {str(isolated).lower()}")
    _agent(project, "other", f"memory: {scope}")
    ws = Workspace.open(project, home=isolated_home)
    _write(memory_file(scope, "keeper", project=ws.project, home=ws.home), MEMORY)

    assert MEMORY in await _first_system_prompt(ws, "keeper")
    assert MEMORY not in await _first_system_prompt(ws, "other")


@pytest.mark.anyio
async def test_open_builds_a_running_runtime_for_a_project_in_one_call(
    project: Path, isolated_home: Path
) -> None:
    _agent(project, "keeper", "memory: project")
    _write(memory_file("project", "keeper", project=project, home=isolated_home), MEMORY)
    model = ScriptedModel({"agents": {"keeper": [{"text": "noted"}]}})
    runtime = SubagentRuntime.open(project, model=model, home=isolated_home)
    with anyio.fail_after(30):
        async with runtime:
            result = await runtime.run(SubagentStartRequest("keeper", "What do you remember?"))
            assert [info.run_id for info in runtime.runs()] == [result.run_id]
    assert result.status == "completed"
    assert MEMORY in model.requests[0].system
    # The durable store of the project, outside the checkout, closed with the runtime.
    state = Workspace.open(project, home=isolated_home).state_path
    assert state.is_file() and not state.is_relative_to(project)
    reopened = Workspace.open(project, home=isolated_home).open_store()
    try:
        header = reopened.get_header(result.run_id)
        assert header is not None and header.status == "completed"
    finally:
        reopened.close()


def test_open_needs_exactly_one_of_a_model_and_a_provider(
    project: Path, isolated_home: Path
) -> None:
    model = ScriptedModel({"default": [{"text": "ok"}]})
    with pytest.raises(InvalidRequest):
        SubagentRuntime.open(project, home=isolated_home)
    with pytest.raises(InvalidRequest):
        SubagentRuntime.open(
            project, model=model, provider=InProcessProvider(model), home=isolated_home
        )
