"""Every agent of the shared corpus, placed in its product's folder, resolves to a model it can
start with when the deployment has a default model: no ``unknown-model``. The corpus lives
beside the repository in development only; without it this test skips."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

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


def test_every_corpus_agent_resolves_to_a_model_it_can_start_with(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    placed = 0
    for source, folder in FOLDERS.items():
        pattern = ".claude__agents__*.md" if source == "Fidasek009__agents" else "*.md"
        for file in sorted((CORPUS / source).glob(pattern)):
            target = project / folder / source / file.name.split("__")[-1]
            if target.exists():
                target = target.with_name(file.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, target)
            placed += 1
    (tmp_path / "script.yaml").write_text("agents: {}\n")
    (project / ".membrane").mkdir()
    (project / ".membrane" / "config.toml").write_text(
        f'default_model = "scripted:{tmp_path / "script.yaml"}"\n'
    )
    assert main(["agents", "validate", "--project", str(project), "--json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    agents = report["agents"]
    assert placed > 0 and agents
    cannot = {a["path"]: a["model"]["reason"] for a in agents if not a["model"]["can_start"]}
    assert cannot == {}
    named = [a for a in agents if a["model"]["written"] not in (None, "inherit")]
    fallback = [a for a in named if a["model"]["fallback"] is not None]
    print(
        f"model corpus: {len(agents)} agents of {placed} files, {len(agents) - len(cannot)} "
        f"can start; {len(named)} name a model, {len(named) - len(fallback)} served as named, "
        f"{len(fallback)} on the default model"
    )
