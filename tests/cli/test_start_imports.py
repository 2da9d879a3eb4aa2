"""What starting the CLI imports, counted in a fresh interpreter: a command pays only for the
modules it uses (never timed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from membrane.cli.app import main
from process_support import cli_imports

LIBRARIES = {"typer", "click", "rich", "pydantic", "jsonschema", "ruamel", "anyio", "typing"}


def imported(*args: str, cwd: Path | None = None) -> tuple[int, set[str]]:
    code, modules, _ = cli_imports(*args, cwd=cwd)
    return code, modules


def libraries(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules} & LIBRARIES


@pytest.mark.costs
def test_version_imports_no_library_and_almost_nothing_of_membrane() -> None:
    code, modules = imported("--version")
    assert code == 0
    assert libraries(modules) == set()
    assert {m for m in modules if m.startswith("membrane")} == {
        "membrane",
        "membrane._lazy",
        "membrane._version",
        "membrane.cli",
        "membrane.cli.app",
    }


@pytest.mark.costs
def test_import_membrane_loads_only_the_package() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import json, membrane, sys; print(json.dumps(list(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = set(json.loads(done.stdout))
    assert {m for m in loaded if m.startswith("membrane")} == {
        "membrane",
        "membrane._lazy",
        "membrane._version",
    }
    assert libraries(loaded) - {"typing"} == set()


@pytest.mark.costs
def test_agents_list_imports_only_its_own_command(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "agents" / "a.md").write_text(
        "---\nname: a\ndescription: An agent.\n---\nBody.\n"
    )
    code, modules = imported("agents", "list", "--project", str(project))
    assert code == 0
    commands = {m for m in modules if m.startswith("membrane.cli.")}
    assert commands == {
        "membrane.cli.agent_model",
        "membrane.cli.agents",
        "membrane.cli.app",
        "membrane.cli.helptext",  # the commands' typer class
        "membrane.cli.screen",
        "membrane.cli.usage",
    }
    assert not any(m.startswith(("membrane.runtime", "membrane.loop")) for m in modules)
    # Piped, the table is plain text: no Rich, no JSON Schema.
    assert libraries(modules) & {"rich", "jsonschema"} == set()


def test_every_command_word_names_the_module_that_registers_it() -> None:
    from cli_support import cli_commands

    from membrane.cli.app import COMMANDS

    commands, _ = cli_commands()
    assert {words.split()[0] for words in commands} == set(COMMANDS)


@pytest.mark.costs
def test_help_imports_every_command_but_nothing_a_command_runs() -> None:
    code, modules = imported("--help")
    assert code == 0
    assert {"membrane.cli.run", "membrane.cli.explain", "membrane.cli.mcp"} <= modules
    heavy = ("membrane.runtime", "membrane.loop", "membrane.resolve", "membrane.workspace",
             "membrane.server.methods", "membrane.cli.backend", "anyio", "jsonschema")  # fmt: skip
    assert sorted(m for m in modules if m.startswith(heavy)) == []


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for word in ("actions", "agents", "doctor", "explain", "run", "runs", "serve", "skills"):
        assert word in out


@pytest.mark.costs
def test_explain_imports_neither_the_runtime_nor_the_agent_loop(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "agents" / "a.md").write_text(
        "---\nname: a\ndescription: An agent.\ntools: Read\n---\nBody.\n"
    )
    code, modules = imported("explain", "a", "--json", "--project", str(project))
    assert code == 0
    assert libraries(modules) & {"rich"} == set()
    assert "membrane.runtime.runtime" not in modules
    assert not any(m.startswith(("membrane.loop", "membrane.durable", "mcp.")) for m in modules)


@pytest.mark.costs
@pytest.mark.parametrize(
    "args",
    [("runs",), ("lineage",), ("show", "nosuch"), ("outbox", "list"), ("skills", "list")],
)
def test_piped_output_imports_no_rich(args: tuple[str, ...], tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _, modules = imported(*args, "--project", str(project), cwd=tmp_path)
    assert libraries(modules) & {"rich"} == set()


#: What a pure read never needs: the store, the MCP client, the event loop library, the process
#: runner, the regex engine of Grep, the built-in tools' handlers (their declarations suffice),
#: the close-match finder of error
#: messages, and (once the installed entry points and the skills are cached) the distribution
#: metadata reader, the YAML parser and the temporary files a cache write uses; nor the
#: process and file utilities (the ``bwrap`` probe is spawned with ``os.posix_spawn``), nor the
#: reader of ``--parent`` and ``--call`` when neither is given,
#: nor ``function_tool`` for extensions that build their ``Tool`` objects themselves, nor the
#: matchers of permission rules and the approval requests (resolving a child's permissions needs
#: only the rules and the modes), nor the directory watcher, which only a second reload arms.
NOT_FOR_EXPLAIN = (
    "membrane.agents.watch",
    "membrane.extensions.function_tools",
    "membrane.cli.explain_parent",
    "difflib",
    "tempfile",
    "membrane.builtin_tools.read",
    "membrane.builtin_tools.glob_tool",
    "membrane.builtin_tools.grep",
    "membrane.builtin_tools.edit",
    "membrane.builtin_tools.write",
    "membrane.builtin_tools.browser",
    "membrane.builtin_tools.skill_files",
    "sqlite3",
    "ruamel",
    "anyio",
    "mcp",
    "re2",
    "importlib.metadata",
    "subprocess",
    "shutil",
    "threading",
    "membrane.store.sqlite",
    "membrane.mcp.mount",
    "membrane.mcp.client",
    "membrane.sandbox.process",
    "membrane.models.specs",
    "membrane.tools.schema_check",
    "membrane.builtin_tools.linear_regex",
    "membrane.resolve.call_params",
    "membrane.runtime.runtime",
)


@pytest.mark.costs
def test_explain_json_is_a_pure_read_on_the_example_workspace(
    tmp_path: Path, isolated_home: Path
) -> None:
    workspace = tmp_path / "workspace"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "workspace", workspace)
    first, _ = imported("explain", "scout", "--json", cwd=workspace)
    assert first == 0
    code, modules = imported("explain", "scout", "--json", cwd=workspace)
    assert code == 0
    # The extensions were loaded (their tools are listed), the definition and entry point
    # caches hit, and nothing a run needs was imported.
    assert "membrane.extensions.load" in modules
    unwanted = {m for m in modules if m in NOT_FOR_EXPLAIN or m.split(".")[0] in NOT_FOR_EXPLAIN}
    assert sorted(unwanted - _typer_imports()) == []


def _typer_imports() -> set[str]:
    """What typer itself imports to read a command line (its parameters are coerced with
    pydantic, whose plugin loader reads the installed distributions' metadata)."""
    done = subprocess.run([sys.executable, "-c", _TYPER_APP], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    return set(json.loads(done.stdout))


_TYPER_APP = """
import json, sys
import typer
app = typer.Typer()
@app.command()
def one(name: str, count: int = 1, flag: bool = False) -> None:
    pass
@app.command()
def two() -> None:
    pass
app(["one", "x", "--count", "2", "--flag"], standalone_mode=False)
print(json.dumps(list(sys.modules)))
"""


#: The parsing of definition files: the frontmatter reader, the field rules and the dialect
#: translations. A listing whose definitions all hit the cache needs none of them.
PARSING = (
    "ruamel",
    "membrane.agents.frontmatter",
    "membrane.agents.fields",
    "membrane.agents.values",
    "membrane.agents.translation",
    "membrane.agents.dialects",
    "membrane.agents.claude_code",
    "membrane.agents.opencode",
)


@pytest.mark.costs
def test_a_cached_listing_parses_nothing(tmp_path: Path, isolated_home: Path) -> None:
    workspace = tmp_path / "workspace"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "workspace", workspace)
    commands = (("agents", "list"), ("explain", "scout", "--json"))
    first, modules = imported(*commands[0], cwd=workspace)
    assert first == 0
    assert "membrane.agents.fields" in modules  # the first listing parsed the files
    assert imported(*commands[1], cwd=workspace)[0] == 0  # and explain cached the skills
    for args in commands:
        code, modules = imported(*args, cwd=workspace)
        assert code == 0
        parsing = sorted(m for m in modules if m.split(".")[0] == "ruamel" or m in PARSING)
        assert (args, parsing) == (args, [])
        if args == commands[0]:  # a definition's rules need neither the tool model nor the gates
            assert {"membrane.tools.spec", "membrane.tools.permissions"} & modules == set()
