"""Extensions: discovery without import, setup, live tool maps, hooks and failures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from membrane import Restriction, Scope, Tool, ToolContext, ToolRegistry, ToolView
from membrane.errors import ExtensionError, ToolSpecError
from membrane.extensions import ExtensionSource, discover_extensions, function_tool, load_extension

PRELUDE = """
from membrane import Tool

async def _echo(arguments, context):
    return dict(arguments)

def make(name):
    return Tool(name, "Tool " + name + ".", {"type": "object"}, _echo)
"""


def write_extension(project: Path, name: str, body: str) -> Path:
    folder = project / ".membrane" / "extensions"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(PRELUDE + textwrap.dedent(body))
    return path


def test_discovery_lists_project_files_without_importing_them(tmp_path: Path) -> None:
    write_extension(tmp_path, "alpha", "raise RuntimeError('imported!')\n")
    write_extension(tmp_path, "_shared", "")
    found = discover_extensions(tmp_path, installed=False)
    assert list(found) == ["alpha"]
    assert found["alpha"].kind == "file"
    assert found["alpha"].path == tmp_path / ".membrane" / "extensions" / "alpha.py"


def test_discovery_without_a_project_or_folder_finds_nothing(tmp_path: Path) -> None:
    assert discover_extensions(None, installed=False) == {}
    assert discover_extensions(tmp_path, installed=False) == {}


def test_setup_registers_live_tools_that_views_see(tmp_path: Path) -> None:
    write_extension(
        tmp_path,
        "alpha",
        """
        def setup(ext):
            ext.register_tool(make("search"))
            ext.register_tool(make("write_remote"))
        """,
    )
    registry = ToolRegistry()
    loaded = load_extension(discover_extensions(tmp_path, installed=False)["alpha"], registry)
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(deny=["write_remote"]))
    assert scope.view().names == ("search",)
    assert registry.get("search").origin == "extension:alpha"  # type: ignore[union-attr]
    assert loaded.tools.names() == frozenset({"search", "write_remote"})


def test_handle_keeps_working_after_setup(tmp_path: Path, make_tool: Callable[..., Tool]) -> None:
    write_extension(
        tmp_path,
        "alpha",
        """
        handle = None

        def setup(ext):
            global handle
            handle = ext
            ext.register_tool(make("search"))
        """,
    )
    registry = ToolRegistry()
    loaded = load_extension(discover_extensions(tmp_path, installed=False)["alpha"], registry)
    scope = Scope(registry, name="child")
    assert scope.view().names == ("search",)
    loaded.api.register_tool(make_tool("later"))
    assert scope.view().names == ("later", "search")
    assert registry.get("later").origin == "extension:alpha"  # type: ignore[union-attr]
    loaded.api.remove_tool("search")
    assert scope.view().names == ("later",)


def test_hooks_and_prompt_sections_are_kept_on_the_loaded_extension(tmp_path: Path) -> None:
    write_extension(
        tmp_path,
        "alpha",
        """
        def on_start(event):
            return None

        def on_turn(event):
            return None

        def setup(ext):
            ext.on("session_start", on_start)
            ext.on("turn_end", on_turn)
            ext.on("turn_end", on_start)
            ext.add_prompt_section("alpha:guidance", "Use search before write_remote.")
        """,
    )
    loaded = load_extension(discover_extensions(tmp_path, installed=False)["alpha"], ToolRegistry())
    assert [h.__name__ for h in loaded.hooks["turn_end"]] == ["on_turn", "on_start"]
    assert [h.__name__ for h in loaded.hooks["session_start"]] == ["on_start"]
    assert loaded.prompt_sections == {"alpha:guidance": "Use search before write_remote."}


def test_unknown_hook_event_fails_with_a_suggestion(tmp_path: Path) -> None:
    path = write_extension(
        tmp_path,
        "alpha",
        """
        def setup(ext):
            ext.on("turn_ended", print)
        """,
    )
    with pytest.raises(ExtensionError) as caught:
        load_extension(discover_extensions(tmp_path, installed=False)["alpha"], ToolRegistry())
    assert caught.value.code == "extension-invalid"
    assert "'turn_ended'" in caught.value.message
    assert "'turn_end'" in caught.value.message
    assert caught.value.data["event"] == "turn_ended"
    assert str(path) in caught.value.message


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("import nonexistent_module_xyz\n", "cannot import"),
        ("x = 1\n", "no setup(ext)"),
        ("async def setup(ext):\n    pass\n", "synchronous"),
        ("def setup(ext):\n    raise ValueError('bad config')\n", "bad config"),
        ("import sys\nsys.exit(3)\n", "sys.exit(3)"),
        ("def setup(ext):\n    import sys\n    sys.exit()\n", "sys.exit(None)"),
        (
            "def setup(ext):\n    ext.register_tool(Tool('run_code', '', {'type': 'object'}, "
            "_echo, reserved=True))\n",
            "Scope.add_reserved",
        ),
    ],
)
def test_broken_extensions_fail_with_their_path(tmp_path: Path, body: str, fragment: str) -> None:
    path = write_extension(tmp_path, "alpha", body)
    with pytest.raises(ExtensionError) as caught:
        load_extension(discover_extensions(tmp_path, installed=False)["alpha"], ToolRegistry())
    assert caught.value.code == "extension-invalid"
    assert fragment in caught.value.message
    assert caught.value.data["path"] == str(path)


def test_failed_setup_leaves_no_tools_behind(tmp_path: Path) -> None:
    write_extension(
        tmp_path,
        "alpha",
        """
        def setup(ext):
            ext.register_tool(make("search"))
            raise RuntimeError("half way")
        """,
    )
    registry = ToolRegistry()
    with pytest.raises(ExtensionError, match="half way"):
        load_extension(discover_extensions(tmp_path, installed=False)["alpha"], registry)
    assert "search" not in registry


def test_extension_cannot_register_a_builtin_name(
    tmp_path: Path, make_tool: Callable[..., Tool]
) -> None:
    write_extension(
        tmp_path,
        "alpha",
        """
        def setup(ext):
            ext.register_tool(make("Read"))
        """,
    )
    registry = ToolRegistry()
    builtin = make_tool("Read")
    registry.register(builtin)
    with pytest.raises(ExtensionError, match="'Read'"):
        load_extension(discover_extensions(tmp_path, installed=False)["alpha"], registry)
    assert registry.get("Read") is builtin


def test_installed_entry_points_are_discovered_and_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    (site / "beta_pkg").mkdir(parents=True)
    (site / "beta_pkg" / "__init__.py").write_text(
        PRELUDE + "\ndef setup(ext):\n    ext.register_tool(make('fetch'))\n"
    )
    info = site / "beta_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: beta-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[membrane.extensions]\nbeta = beta_pkg:setup\n")
    monkeypatch.syspath_prepend(str(site))
    found = discover_extensions(None)
    assert found["beta"] == ExtensionSource("beta", "entry-point", "beta_pkg:setup")
    registry = ToolRegistry()
    load_extension(found["beta"], registry)
    assert registry.get("fetch").origin == "extension:beta"  # type: ignore[union-attr]


def test_an_entry_point_loads_as_importlib_metadata_loads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    (site / "gamma_pkg").mkdir(parents=True)
    (site / "gamma_pkg" / "__init__.py").write_text("")
    (site / "gamma_pkg" / "ext.py").write_text(
        PRELUDE
        + "\nclass Plugin:\n    @staticmethod\n    def setup(ext):\n"
        + "        ext.register_tool(make('probe'))\n"
    )
    monkeypatch.syspath_prepend(str(site))
    import importlib.metadata

    for value in ("gamma_pkg.ext:Plugin.setup", "gamma_pkg.ext : Plugin.setup [extra]"):
        expected = importlib.metadata.EntryPoint("gamma", value, "membrane.extensions").load()
        registry = ToolRegistry()
        load_extension(ExtensionSource("gamma", "entry-point", value), registry)
        assert registry.get("probe").origin == "extension:gamma"  # type: ignore[union-attr]
        assert expected is sys.modules["gamma_pkg.ext"].Plugin.setup
    for value, fragment in (
        ("gamma_pkg.ext:Missing", "AttributeError"),
        ("gamma_pkg.nosuch:setup", "ModuleNotFoundError"),
        ("not an entry point", "is not an entry point"),
    ):
        with pytest.raises(ExtensionError) as caught:
            load_extension(ExtensionSource("gamma", "entry-point", value), ToolRegistry())
        assert caught.value.code == "extension-invalid"
        assert fragment in caught.value.message


@pytest.mark.costs
def test_loading_an_entry_point_does_not_import_the_metadata_reader(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "delta_pkg").mkdir(parents=True)
    (site / "delta_pkg" / "__init__.py").write_text(
        PRELUDE + "\ndef setup(ext):\n    ext.register_tool(make('fetch'))\n"
    )
    probe = (
        "import json, sys\n"
        "from membrane.extensions import ExtensionSource, load_extension\n"
        "from membrane.tools.registry import ToolRegistry\n"
        "registry = ToolRegistry()\n"
        "load_extension(ExtensionSource('delta', 'entry-point', 'delta_pkg:setup'), registry)\n"
        "loaded = registry.get('fetch') is not None\n"
        "print(json.dumps([loaded, 'importlib.metadata' in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == [True, False]


def test_function_tool_derives_the_schema_and_passes_the_context() -> None:
    @function_tool(mutating=True)
    async def search(query: str, context: ToolContext, limit: int = 5) -> str:
        """Search the docs."""
        return f"{context.agent}:{query}:{limit}"

    assert search.name == "search"
    assert search.description == "Search the docs."
    assert search.mutating
    assert search.input_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "default": 5},
        },
        "required": ["query"],
    }
    result = anyio.run(ToolView.of([search]).call, "search", {"query": "q"}, ToolContext("a"))
    assert result == "a:q:5"


def test_function_tool_refuses_what_it_cannot_describe() -> None:
    async def variadic(*queries: str) -> None:
        return None

    with pytest.raises(ToolSpecError, match="'queries'"):
        function_tool()(variadic)


def test_function_tool_works_bare_and_called() -> None:
    @function_tool
    async def lookup(term: str) -> str:
        """Look a term up."""
        return term.upper()

    @function_tool("find", mutating=True)
    async def other(term: str) -> str:
        return term

    assert isinstance(lookup, Tool)
    assert (lookup.name, lookup.description) == ("lookup", "Look a term up.")
    assert lookup.input_schema["required"] == ["term"]
    assert anyio.run(ToolView.of([lookup]).call, "lookup", {"term": "x"}, ToolContext()) == "X"
    assert (other.name, other.mutating) == ("find", True)
    with pytest.raises(ToolSpecError, match="tool name"):
        function_tool(3)  # type: ignore[call-overload]


def test_extension_handle_decorator_works_bare(tmp_path: Path) -> None:
    write_extension(
        tmp_path,
        "alpha",
        """
        def setup(ext):
            @ext.tool
            async def fetch(url: str) -> str:
                return url
        """,
    )
    registry = ToolRegistry()
    load_extension(discover_extensions(tmp_path, installed=False)["alpha"], registry)
    fetched = registry.get("fetch")
    assert fetched is not None and fetched.origin == "extension:alpha"


def test_extension_handle_registers_decorated_functions(tmp_path: Path) -> None:
    write_extension(
        tmp_path,
        "alpha",
        """
        def setup(ext):
            @ext.tool(description="Fetch a page.")
            async def fetch(url: str) -> str:
                return url
        """,
    )
    registry = ToolRegistry()
    load_extension(discover_extensions(tmp_path, installed=False)["alpha"], registry)
    fetched = registry.get("fetch")
    assert fetched is not None
    assert fetched.origin == "extension:alpha"
    assert fetched.description == "Fetch a page."
