"""Real agent files start and finish a turn: the shared corpus (Claude Code, OpenCode and pi agents
from public repositories), each file in its product's own folder of one Git project, with the
Anthropic and OpenAI providers pointed at loopback servers that answer every request the way the
real APIs do (the real SDKs, through ``ANTHROPIC_BASE_URL``/``OPENAI_BASE_URL``; no ``--model``:
each agent runs on the model its file names, else the deployment's ``default_model``).

Every agent is started with ``membrane run AGENT TASK --json`` (headless) and must publish and
complete one turn; failures are listed by their error code. ``make test`` runs a sample (the
first agents of each source); ``make test-corpus`` runs the whole corpus and prints the start
rate against the target of 99%. The corpus lives beside the repository in development only:
without it these tests skip."""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from wire_server import WireServer

from membrane.cli.app import main

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "agents"
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="the agent corpus is not present")

#: Each corpus source and the product folder its files belong in.
FOLDERS = {
    "VoltAgent__awesome-claude-code-subagents": ".claude/agents",
    "wshobson__agents": ".claude/agents",
    "Fidasek009__agents": ".claude/agents",
    "shahboura__agents-opencode": ".opencode/agents",
    "tintinweb__pi-subagents": ".pi/agents",
}
#: The share of agents that must start and finish their turn.
TARGET = 0.99
#: Agents per source the sample of ``make test`` runs.
SAMPLE = 2


def _corpus() -> list[tuple[str, Path]]:
    """Every corpus file, with its source."""
    files = []
    for source in FOLDERS:
        pattern = ".claude__agents__*.md" if source == "Fidasek009__agents" else "*.md"
        files += [(source, file) for file in sorted((CORPUS / source).glob(pattern))]
    return files


def _project(root: Path, files: list[tuple[str, Path]]) -> dict[Path, Path]:
    """A Git project holding ``files``, each in its product's folder; placed path -> corpus
    file."""
    root.mkdir()
    placed: dict[Path, Path] = {}
    for source, file in files:
        target = root / FOLDERS[source] / source / file.name.split("__")[-1]
        if target.exists():
            target = target.with_name(file.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
        placed[target] = file
    (root / ".membrane").mkdir()
    (root / ".membrane" / "config.toml").write_text(
        'default_model = "anthropic:claude-sonnet-5-5"\n'
    )
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "agents"], check=True)
    return placed


def _answer(agent: str, turn: int, body: Mapping[str, Any]) -> dict[str, Any]:
    return {"text": f"{agent} finished turn {turn}."}


@pytest.fixture
def providers(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Anthropic's and OpenAI's endpoints on loopback, for the real SDKs."""
    with (
        WireServer(_answer, wire="anthropic") as anthropic,
        WireServer(_answer, wire="openai") as openai,
    ):
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", openai.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield
        assert anthropic.refused == [] and openai.refused == []


def _agents(project: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert main(["agents", "list", "--project", str(project), "--json"]) == 0
    listed: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["agents"]
    return [a for a in listed if a["root"] != "builtin"]


def _run(project: Path, name: str, capsys: pytest.CaptureFixture[str]) -> str | None:
    """``None`` when ``name`` published and completed its turn; else why not (an error code)."""
    code = main(["run", name, "Say hello in one line.", "--project", str(project), "--json"])
    captured = capsys.readouterr()
    events = [json.loads(line) for line in captured.out.splitlines() if line.startswith("{")]
    top = [e for e in events if e.get("parent_id") is None]
    kinds = [e["kind"] for e in top]
    if code == 0 and "published" in kinds and "completed" in kinds:
        return None
    for event in reversed(top):
        data = event.get("data") or {}
        if event["kind"] in ("failed", "error") or data.get("code"):
            return str(data.get("code") or data.get("error", {}).get("code") or event["kind"])
    first = captured.err.strip().split(":", 1)[0]
    if first.startswith("{"):
        return str(json.loads(captured.err)["error"]["code"])
    return first or f"exit {code}"


def _start_all(
    project: Path, names: list[str], capsys: pytest.CaptureFixture[str]
) -> dict[str, str]:
    failures: dict[str, str] = {}
    for name in names:
        reason = _run(project, name, capsys)
        if reason is not None:
            failures[name] = reason
    return failures


def test_a_sample_of_the_corpus_starts_and_finishes_a_turn(
    providers: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _corpus()
    sample = [f for source in FOLDERS for f in [f for f in files if f[0] == source][:SAMPLE]]
    project = tmp_path / "project"
    _project(project, sample)
    names = [a["name"] for a in _agents(project, capsys)]
    assert len(names) == len(sample) >= SAMPLE * 3
    assert _start_all(project, names, capsys) == {}


@pytest.mark.corpus
def test_the_whole_corpus_starts_and_finishes_a_turn(
    providers: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every file, not only every name: a file another one shadows (two sources' ``code-
    reviewer``) runs in a further project of its own."""
    left = _corpus()
    failures: dict[str, str] = {}
    started = total = 0
    for index in range(len(left)):
        if not left:
            break
        project = tmp_path / f"project-{index}"
        placed = _project(project, left)
        agents = _agents(project, capsys)
        names = sorted({a["name"] for a in agents})
        found = _start_all(project, names, capsys)
        failures.update((f"{name} ({project.name})", r) for name, r in found.items())
        started += len(names) - len(found)
        total += len(names)
        shadowed = {Path(s["path"]) for a in agents for s in a["shadows"]}
        by_corpus = {file: source for source, file in left}
        left = [(by_corpus[placed[p]], placed[p]) for p in shadowed if p in placed]
    rate = started / total
    reasons = collections.Counter(failures.values())
    with capsys.disabled():
        print(
            f"\ngoal corpus agents start and finish one turn: {TARGET:.0%}, measured "
            f"{started}/{total} = {rate:.1%} ({'met' if rate >= TARGET else 'missed'}); "
            f"{len(_corpus())} corpus files"
        )
        for reason, count in reasons.most_common():
            shown = ", ".join(sorted(n for n, r in failures.items() if r == reason)[:8])
            print(f"  {reason}: {count} ({shown})")
    assert not left and total == len(_corpus())
    assert rate >= TARGET, failures
