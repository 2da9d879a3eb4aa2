"""The documentation's code blocks run: every ```python, ```console and ```sh block of README.md
and docs/*.md is executed here, or carries a visible marker saying why not (the convention is in
docs/architecture.md, "Docs that run").

Each documentation file gets one temporary folder holding a copy of ``examples/`` (so a block's
``examples/workspace`` is the example workspace, as from the repository's root), a ``.venv`` link
to this checkout's environment, and a private ``MEMBRANE_HOME`` and ``HOME``. Its blocks run in
the order they appear, each through the real interpreter or the real ``membrane`` command of the
environment, headless; a block may use what an earlier block of its file made. A failure names
the file and line of the block.

* ```python: run as a program; it must exit 0. A ``print(...)`` call's trailing comment and the
  comment-only lines directly below it are what that call prints; the block's output must be
  exactly those lines, in order, where a ``print`` without such comments stands for output not
  shown.
* ```console: each ``$ `` line is a command run by bash (a line ending in ``\\`` goes on); it
  must exit 0, and the lines below it, up to the next ``$ ``, are its output (stdout and stderr),
  compared when there are any.
* ```sh: each line is a command run by bash; it must exit 0.
* info string ``fragment`` (```python fragment): not run, because it cannot run here (a real
  model, a network, a placeholder); ``synopsis`` (```console synopsis): a command's usage, each
  ``--option`` of which must appear in that command's ``--help``.
* ```text output right below a python block: that block's whole output (instead of its
  ``print`` comments).
* ```toml: a settings file; it must load as a project's ``.membrane/config.toml``.
* ```yaml that starts with ``agents:`` or ``default:``: a scripted model's script; it must load.
* ``file=PATH`` after any language (```markdown file=examples/...): the block quotes that file of
  the repository whole, and must equal it.

In compared output, a line ``...`` stands for any lines and ``...`` inside a line for any text;
the temporary folder's path reads ``…``, blank lines are ignored, runs of blanks count as one
and a table's rules may have any length.
"""

from __future__ import annotations

import ast
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = (REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md")))
#: The languages whose blocks must run, and the markers that exempt or narrow a block.
RUN = {"python": "python", "console": "console", "sh": "sh", "bash": "sh", "shell": "sh"}
MARKERS = {"fragment", "synopsis", "output"}
#: A bound on each command, not a performance expectation: a hung block fails instead of hanging.
BOUND_SECONDS = 120
_FENCE = re.compile(r"^(?P<indent>\s*)```(?!`)(?P<info>.*)$")
_STATE = shutil.ignore_patterns("state.db*", "worktrees", "__pycache__")


@dataclass(frozen=True)
class Block:
    """One fenced block: its file, the line of its opening fence, language, markers and text."""

    doc: Path
    line: int
    language: str
    markers: tuple[str, ...]
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO_ROOT)}:{self.line}"


def blocks(doc: Path) -> Iterator[Block]:
    """Every fenced block of ``doc``, its body dedented by its fence's indentation."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        indent = len(fence["indent"])
        words = fence["info"].split()
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = "\n".join(line[indent:] for line in lines[index + 1 : end])
        language = words[0] if words else ""
        yield Block(doc, index + 1, language, tuple(words[1:]), body + "\n")
        index = end + 1


ALL = [block for doc in DOCS for block in blocks(doc)]
RUNNABLE = [b for b in ALL if b.language in RUN and not set(b.markers) & MARKERS]
SYNOPSES = [b for b in ALL if b.language == "console" and "synopsis" in b.markers]
QUOTES = [b for b in ALL if any(word.startswith("file=") for word in b.markers)]
SETTINGS = [b for b in ALL if b.language == "toml" and "fragment" not in b.markers]
SCRIPTS = [b for b in ALL if b.language == "yaml" and re.match(r"(agents|default):", b.text)]


def _ids(items: list[Block]) -> list[str]:
    return [block.where for block in items]


# -- output comparison -------------------------------------------------------------------------


def _normal(line: str, root: Path) -> str:
    for place in {str(root.resolve()), str(root)}:
        line = line.replace(place, "…")
    line = re.sub(r"([━─═]){2,}", r"\1", line)
    return re.sub(r"\s+", " ", line).strip()


def _line_matches(expected: str, actual: str) -> bool:
    if "..." not in expected:
        return expected == actual
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual) is not None


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected``, a line ``...`` standing for any lines."""
    # reach[n]: the expected lines so far match the first n actual lines.
    reach = [True] + [False] * len(actual)
    for want in expected:
        if want == "...":
            reach = [any(reach[: n + 1]) for n in range(len(actual) + 1)]
        else:
            reach = [False] + [
                reach[n] and _line_matches(want, line) for n, line in enumerate(actual)
            ]
    return reach[-1]


def _compare(where: str, expected: list[str], output: str, root: Path) -> None:
    want = [_normal(line, root) for line in expected]
    got = [_normal(line, root) for line in output.splitlines()]
    got = [line for line in got if line]
    want = [line for line in want if line]
    shown, printed = "\n".join(want), "\n".join(got)
    assert matches(want, got), (
        f"{where}: output differs\n-- shown:\n{shown}\n-- printed:\n{printed}"
    )


def printed_by(source: str) -> list[str]:
    """What a Python block says it prints: each ``print`` call's trailing comment and the
    comment-only lines right below it; ``...`` for a ``print`` without a comment."""
    comments: dict[int, str] = {}
    code_lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string[1:].strip()
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            code_lines.update(range(token.start[0], token.end[0] + 1))
    ends = sorted(
        node.end_lineno or node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
    )
    expected: list[str] = []
    for end in ends:
        shown = [comments[end]] if end in comments else []
        below = end + 1
        while below in comments and below not in code_lines:
            shown.append(comments[below])
            below += 1
        expected.extend(shown or ["..."])
    return expected


# -- running -----------------------------------------------------------------------------------


def _venv_bin() -> Path:
    folder = Path(sys.executable).parent
    if not (folder / "membrane").exists():
        pytest.skip(f"the membrane console script is not installed beside {sys.executable}")
    return folder


@pytest.fixture(scope="module")
def folders() -> dict[Path, Path]:
    """One prepared folder per documentation file, made when its first block runs."""
    return {}


def _folder(doc: Path, folders: dict[Path, Path], factory: pytest.TempPathFactory) -> Path:
    if doc in folders:
        return folders[doc]
    root = factory.mktemp(doc.stem.lower())
    shutil.copytree(REPO_ROOT / "examples", root / "examples", ignore=_STATE)
    (root / ".venv").symlink_to(_venv_bin().parent, target_is_directory=True)
    for private in ("home", "membrane-home", "blocks"):
        (root / private).mkdir()
    folders[doc] = root
    return root


def _environment(root: Path) -> dict[str, str]:
    keep = ("MEMBRANE_", "OPENAI_", "ANTHROPIC_", "CLAUDE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(keep)}
    env.update(
        HOME=str(root / "home"),
        MEMBRANE_HOME=str(root / "membrane-home"),
        MEMBRANE_HEADLESS="1",
        PATH=f"{_venv_bin()}{os.pathsep}{env.get('PATH', '')}",
        COLUMNS="120",
        PYTHONIOENCODING="utf-8",
        PYTHONUNBUFFERED="1",
    )
    return env


def _run(args: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=root,
        env=_environment(root),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=BOUND_SECONDS,
    )


def commands(text: str) -> list[tuple[str, list[str]]]:
    """A console block's ``$`` commands, each with the output lines shown below it."""
    found: list[tuple[str, list[str]]] = []
    pending = ""
    for line in text.splitlines():
        if pending:
            pending += "\n" + line
        elif line.startswith("$ "):
            pending = line[2:]
        elif found:
            found[-1][1].append(line)
            continue
        elif line.strip():
            raise AssertionError(f"output before any command: {line!r}")
        if pending and not pending.endswith("\\"):
            found.append((pending, []))
            pending = ""
    return found


@pytest.mark.parametrize("block", RUNNABLE, ids=_ids(RUNNABLE))
def test_block_runs(
    block: Block, folders: dict[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = _folder(block.doc, folders, tmp_path_factory)
    kind = RUN[block.language]
    if kind == "python":
        # Padded so that a traceback's line numbers are the documentation file's.
        program = root / "blocks" / f"{block.doc.stem}_{block.line}.py"
        program.write_text("\n" * block.line + block.text, encoding="utf-8")
        done = _run([str(_venv_bin() / "python"), str(program)], root)
        assert done.returncode == 0, f"{block.where}: exited {done.returncode}\n{done.stdout}"
        following = ALL[ALL.index(block) + 1 : ALL.index(block) + 2]
        if following and following[0].doc == block.doc and "output" in following[0].markers:
            shown = following[0].text.splitlines()  # the block right below shows the output
        else:
            shown = printed_by(block.text)
        _compare(block.where, shown, done.stdout, root)
    elif kind == "console":
        for command, shown in commands(block.text):
            done = _run(["bash", "-c", command], root)
            assert done.returncode == 0, (
                f"{block.where}: `{command}` exited {done.returncode}\n{done.stdout}"
            )
            if shown:
                _compare(f"{block.where}: `{command}`", shown, done.stdout, root)
    else:
        done = _run(["bash", "-e", "-c", block.text], root)
        assert done.returncode == 0, f"{block.where}: exited {done.returncode}\n{done.stdout}"


@pytest.mark.parametrize("block", SYNOPSES, ids=_ids(SYNOPSES))
def test_synopsis_names_real_options(
    block: Block, folders: dict[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = _folder(block.doc, folders, tmp_path_factory)
    for command, below in commands(block.text):
        # A usage too long for one line goes on in indented lines.
        command = " ".join([command, *(line for line in below if line.startswith(" "))])
        words = command.replace("\\\n", " ").split()
        assert words[0] == "membrane", f"{block.where}: a synopsis of {words[0]!r}"
        path: list[str] = []
        for word in words[1:]:
            if not re.fullmatch(r"[a-z][a-z-]*", word):
                break
            path.append(word)
        done = _run([str(_venv_bin() / "membrane"), *path, "--help"], root)
        assert done.returncode == 0, f"{block.where}: membrane {' '.join(path)} --help failed"
        named = " ".join(path)
        for option in sorted(set(re.findall(r"--[a-z][a-z-]*", command))):
            assert option in done.stdout, f"{block.where}: `membrane {named}` has no {option}"


@pytest.mark.parametrize("block", SETTINGS, ids=_ids(SETTINGS))
def test_a_settings_block_loads(block: Block, tmp_path: Path) -> None:
    from membrane import load_settings

    project = tmp_path / "project"
    (project / ".membrane").mkdir(parents=True)
    (project / ".membrane" / "config.toml").write_text(block.text, encoding="utf-8")
    try:
        load_settings(project=project, home=tmp_path / "home")
    except Exception as exc:
        raise AssertionError(f"{block.where}: {exc}") from exc


@pytest.mark.parametrize("block", SCRIPTS, ids=_ids(SCRIPTS))
def test_a_model_script_loads(block: Block) -> None:
    from membrane.testing import ScriptedModel

    try:
        ScriptedModel(block.text)
    except Exception as exc:
        raise AssertionError(f"{block.where}: {exc}") from exc


@pytest.mark.parametrize("block", QUOTES, ids=_ids(QUOTES))
def test_a_quoted_file_is_quoted_whole(block: Block) -> None:
    (word,) = (word for word in block.markers if word.startswith("file="))
    quoted = REPO_ROOT / word.removeprefix("file=")
    assert quoted.is_file(), f"{block.where}: quotes {quoted}, which does not exist"
    assert block.text == quoted.read_text(encoding="utf-8"), f"{block.where}: {quoted} changed"


def test_every_block_to_run_is_marked_by_its_language() -> None:
    """A typo in a marker, or a shell session in an unlabelled block, would escape the tests."""
    for block in ALL:
        if block.language in RUN or block.language in ("toml", "text"):
            unknown = {word for word in block.markers if not word.startswith("file=")} - MARKERS
            assert "output" not in block.markers or block.language == "text", block.where
            assert not unknown, f"{block.where}: unknown marker {sorted(unknown)}"
            assert "synopsis" not in block.markers or block.language == "console", block.where
        else:
            first = block.text.lstrip().splitlines()[:1]
            assert not (first and first[0].startswith("$ ")), (
                f"{block.where}: a shell session belongs in a ```console block"
            )


def test_matching_elides_only_what_it_marks() -> None:
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "...", "b"], ["a", "b"])
    assert not matches(["a", "d"], ["a", "b", "d"])
    assert matches(['{"id": "...", "ok": true}'], ['{"id": "3f2", "ok": true}'])
    assert not matches(["a"], ["a", "b"])
    assert printed_by("print(1)  # 1\n# 2\nx = 3  # not output\nprint(x)\n") == ["1", "2", "..."]
    assert printed_by("print(2)\n# 2\n\n# an aside\nprint(3)\n") == ["2", "..."]
