"""``Bash`` rules that mean what they say, against every spelling known to beat a text match.

Each spelling is one call of a real child (real ``Bash`` in the OS sandbox, real git) on a
checkout holding ``victim.txt``; the model is the only double. An ``allow Bash(git log:*)``
child must not run, under that rule, anything but ``git log`` as the shell runs it; a ``deny
Bash(rm:*)`` child must not delete through a wrapper, an interpreter, a copied program or
another deleting command. Each call ends ``tool-call-denied`` or asks (``approval-unavailable``:
no one can approve in these runs), and the file is still there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from membrane.builtin_tools import register_builtin_tools
from membrane.errors import ApprovalUnavailable, ToolCallDenied
from membrane.lowlevel import PermissionGate, PermissionRule
from membrane.runtime import SubagentStartRequest
from membrane.testing import ScriptedModel
from membrane.tools.permissions import ApprovalRequest
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext
from membrane.tools.view import ToolView

from .conftest import Project, git, tool_results

pytestmark = pytest.mark.anyio

REFUSED = ("tool-call-denied", "approval-unavailable")
RM = shutil.which("rm") or "/bin/rm"

#: Spellings that ran something other than ``git log`` under ``allow Bash(git log:*)``.
UNDER_ALLOW = [
    "GIT_EXTERNAL_DIFF='rm victim.txt;:' git log -p --ext-diff",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=diff.external GIT_CONFIG_VALUE_0='rm victim.txt;:' "
    "git log -p --ext-diff",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='rm victim.txt' git log",
    "HOME=$PWD/cfg git log -p",
    "XDG_CONFIG_HOME=$PWD/cfg git log -p",
    "env -S 'rm victim.txt' git log",
    "PATH=$PWD/bin:$PATH git log",
    "GIT_TRACE=$PWD/trace.txt git log",
    "GIT_DIR=$PWD/.git GIT_WORK_TREE=/ git log",
    "LD_PRELOAD=$PWD/x.so git log",
    "BASH_ENV=$PWD/script.sh git log",
    "export GIT_EXTERNAL_DIFF='rm victim.txt;:'; git log -p --ext-diff",
    "GIT_PAGER='rm victim.txt'; export GIT_PAGER; git log",
    "git log -p --ext-diff",
    "git log -p --ext-d",
    "git log --output=trace.txt",
    "git log --outp trace.txt",
    "o=--output=trace.txt; git log $o",
    "git log *",
    "nice git log",
    "timeout 5 git log",
    "setsid git log",
    "bash -c 'git log'",
    "eval git log",
    "git log $(rm victim.txt)",
    "git log `rm victim.txt`",
    "git log --oneline; rm victim.txt",
    "git log | xargs rm victim.txt",
    "./bin/git log",
    "git log > /dev/null && unlink victim.txt",
]

#: Spellings that deleted ``victim.txt`` under ``deny Bash(rm:*)``.
UNDER_DENY = [
    "setsid rm victim.txt",
    "setsid -f rm victim.txt",
    "ionice -c 3 rm victim.txt",
    "ionice -c3 rm victim.txt",
    "taskset 0x1 rm victim.txt",
    "taskset -c 0 rm victim.txt",
    "flock .lock rm victim.txt",
    "flock .lock -c 'rm victim.txt'",
    "chrt -o 0 rm victim.txt",
    "chrt --other 0 rm victim.txt",
    "unshare -r rm victim.txt",
    "fakeroot rm victim.txt",
    "fakeroot -- rm victim.txt",
    "strace -o /dev/null rm victim.txt",
    "strace -f -e trace=none rm victim.txt",
    "strace -e open rm victim.txt",
    "strace --trace open rm victim.txt",
    "nice -n 5 rm victim.txt",
    "nohup rm victim.txt",
    "timeout 5 rm victim.txt",
    "stdbuf -o0 rm victim.txt",
    "command rm victim.txt",
    "exec rm victim.txt",
    "env -S 'rm victim.txt'",
    "env -S'rm victim.txt'",
    "env --split-string='rm victim.txt'",
    "env -i PATH=/usr/bin:/bin rm victim.txt",
    "$'\\x72m' victim.txt",
    "`echo rm` victim.txt",
    "$(echo rm) victim.txt",
    "trap 'rm victim.txt' EXIT",
    "trap -- 'rm victim.txt' EXIT; true",
    "coproc rm victim.txt",
    "coproc del { rm victim.txt; }",
    "hash -p /bin/rm del; del victim.txt",
    "shopt -s expand_aliases\nalias del=rm\ndel victim.txt",
    "x='$(rm victim.txt)'; echo ${x@P}",
    "x='a[$(rm victim.txt)]'; echo $((x))",
    "x=$'a[$(\\x72m victim.txt)]'; echo $((x))",
    "p='$(r'; q='m victim.txt)'; x=\"a[$p$q]\"; echo $((x))",
    "d='$'; o='('; x=\"a[$d$o rm victim.txt)]\"; (( x ))",
    "script -qc 'rm victim.txt' /dev/null",
    "script -q -c 'rm victim.txt' /dev/null",
    "./del victim.txt",
    "./rmlink victim.txt",
    "cp /bin/rm gone && ./gone victim.txt",
    "ln -s /bin/rm gone; ./gone victim.txt",
    "bash script.sh",
    "sh script.sh",
    "bash < script.sh",
    "BASH_ENV=script.sh bash -c true",
    "awk 'BEGIN{system(\"rm victim.txt\")}'",
    "perl -e 'unlink \"victim.txt\"'",
    "python3 -c 'import os; os.remove(\"victim.txt\")'",
    "git -c alias.x='!rm victim.txt' x",
    "git -c core.pager='rm victim.txt' -p log",
    "GIT_EXTERNAL_DIFF='rm victim.txt;:' git log -p --ext-diff",
    "make",
    "make -f Makefile",
    "unlink victim.txt",
    "find . -name victim.txt -delete",
    "find . -name victim.txt -exec rm {} +",
    "mv victim.txt gone.txt",
    "gzip victim.txt",
    "git clean -f",
    "git rm -q victim.txt",
    "shred -u victim.txt",
    "tar --remove-files -cf a.tar victim.txt",
    "zip -qm a.zip victim.txt",
    "rsync --remove-source-files victim.txt kept.txt",
    "echo victim.txt | xargs rm",
    "xargs rm <<< victim.txt",
    "eval 'rm victim.txt'",
    "busybox rm victim.txt",
    "\\rm victim.txt",
    "r''m victim.txt",
    "/usr/bin/../bin/rm victim.txt",
    "sed -n '1e rm victim.txt' victim.txt",
    "cat <<EOF\n$(rm victim.txt)\nEOF",
    "diff <(true) <(rm victim.txt)",
    'f() { rm "$@"; }; f victim.txt',
    "su -c 'rm victim.txt'",
    "/lib64/ld-linux-x86-64.so.2 /bin/rm victim.txt",
    "echo " + '"$(' * 100 + "rm victim.txt",
]


@pytest.fixture
def checkout(repo: Project) -> Project:
    """A git checkout with ``victim.txt`` committed, a script, a Makefile, a copied and a
    linked ``rm``, and a git configuration that would run ``rm`` for every diff."""
    registry = ToolRegistry()
    register_builtin_tools(registry)
    repo.registry = registry
    root = repo.root
    (root / "victim.txt").write_text("keep\n")
    git(root, "add", "victim.txt")
    git(root, "commit", "-q", "-m", "victim")
    (root / "victim.txt").write_text("keep\n\n")
    git(root, "commit", "-q", "-am", "change")
    (root / "script.sh").write_text("rm victim.txt\n")
    (root / "Makefile").write_text("all:\n\trm victim.txt\n")
    shutil.copy(RM, root / "del")
    (root / "rmlink").symlink_to(RM)
    (root / "--output=trace.txt").write_text("")
    for folder in ("cfg", "cfg/git"):
        (root / folder).mkdir()
        config = "[diff]\n\texternal = rm victim.txt;:\n[core]\n\tpager = rm victim.txt\n"
        (root / folder / ("config" if folder.endswith("git") else ".gitconfig")).write_text(config)
    (root / "bin").mkdir()
    (root / "bin" / "git").write_text("#!/bin/sh\nrm victim.txt\n")
    (root / "bin" / "git").chmod(0o755)
    repo.agent("reader", tools="'Bash(git log:*), Write'")
    repo.agent("worker", tools="[Bash, Read, Write]", disallowed_tools="'Bash(rm:*)'")
    repo.agent("remover", tools="'Bash(rm:*), Bash(ls:*), Write'")
    return repo


async def _run(project: Project, agent: str, *commands: str) -> list[str | None]:
    """The error code (``None``: ran) of each command, called in turn by ``agent``."""
    calls = [{"name": "Bash", "arguments": {"command": c}} for c in commands]
    model = ScriptedModel({"agents": {agent: [{"tool_calls": calls}, {"text": "done"}]}})
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest(agent, "work"))
    codes: list[str | None] = []
    for message in tool_results(model, agent):
        codes.append(json.loads(message.content)["error"]["code"] if message.is_error else None)
    return codes


@pytest.mark.parametrize("command", UNDER_ALLOW)
async def test_an_allow_rule_admits_only_the_command_it_names(
    checkout: Project, command: str
) -> None:
    assert await _run(checkout, "reader", command) in (["tool-call-denied"],
                                                        ["approval-unavailable"])  # fmt: skip
    assert (checkout.root / "victim.txt").exists()
    assert not (checkout.root / "trace.txt").exists()


@pytest.mark.parametrize("command", UNDER_DENY)
async def test_a_deny_rule_sees_through_every_spelling_or_asks(
    checkout: Project, command: str
) -> None:
    assert (await _run(checkout, "worker", command))[0] in REFUSED
    assert (checkout.root / "victim.txt").read_text() == "keep\n\n"


async def test_the_commands_the_rules_name_still_run(checkout: Project) -> None:
    allowed = ["git log --oneline -5", "git log -p", "LANG=C git log -1 --stat",
               "git log --format=%H -1 -- victim.txt"]  # fmt: skip
    assert await _run(checkout, "reader", *allowed) == [None] * len(allowed)
    plain = ["ls", "echo hi", "git status --short", "cat victim.txt | wc -l",
             "grep -c keep victim.txt", "git log -1 --oneline"]  # fmt: skip
    assert await _run(checkout, "worker", *plain) == [None] * len(plain)
    checkout.agent("differ", tools="'Bash(git log -p --ext-diff:*), Write'")
    assert await _run(checkout, "differ", "git log -p --ext-diff -1") == [None]
    (checkout.root / "out").mkdir()
    (checkout.root / "out" / "x").write_text("x")
    assert await _run(checkout, "remover", "rm -f out/x", "ls out") == [None, None]
    assert not (checkout.root / "out" / "x").exists()


async def test_the_approver_hears_why_a_command_asks(checkout: Project) -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    commands = ("HOME=$PWD/cfg git log -p", "setsid rm victim.txt", "mv victim.txt x")
    calls = [{"name": "Bash", "arguments": {"command": c}} for c in commands]
    turns = {
        "reader": [{"tool_calls": calls[:1]}, {"text": "ok"}],
        "worker": [{"tool_calls": calls[1:]}, {"text": "ok"}],
    }
    model = ScriptedModel({"agents": turns})
    async with checkout.runtime(model, approver=approver) as runtime:
        await runtime.run(SubagentStartRequest("reader", "work"))
        await runtime.run(SubagentStartRequest("worker", "work"))
    assert len(asked) == 2, [a.reason for a in asked]
    assert "HOME" in asked[0].reason and "Bash(git log:*)" in asked[0].reason
    assert "deletes files" in asked[1].reason and "Bash(rm:*)" in asked[1].reason
    denied = json.loads(tool_results(model, "worker")[0].content)["error"]
    assert denied["code"] == "tool-call-denied" and "Bash(rm:*)" in denied["message"]


#: Per program, a command an ``allow Bash(PROGRAM:*)`` rule admits and spellings it does not.
TABLES = [
    ("git log --oneline -3", ["git -C /tmp log", "git --exec-path=bin log", "git log --ext-diff",
                              "git log --output=out", "git log --outp=out"]),
    ("git fetch origin", ["git fetch --upload-pack='rm x' origin", "git -c a.b=c fetch"]),
    ("git clone a b", ["git clone --template=t a b", "git clone -u 'rm x' a b"]),
    ("git rebase main", ["git rebase -x 'rm x' main", "git rebase --exec='rm x' main"]),
    ("git grep -n foo", ["git grep -Orm foo", "git grep --open-files-in-pager=rm foo"]),
    ("git format-patch -1", ["git format-patch -o out -1"]),
    ("git bisect good", ["git bisect run rm x"]),
    ("find . -name x", ["find . -name x -delete", "find . -exec rm {} +", "find . -fprint out"]),
    ("sed -n 1p f", ["sed -i s/a/b/ f", "sed -ni 1p f", "sed --in-place s/a/b/ f",
                     "sed -f s.sed f", "sed 's/a/b/e' f", "sed 'w out' f", "sed -n '1e rm x' f",
                     "sed -e 1p -e 's/x/y/w out' f"]),
    ("awk '{print $1}' f", ["awk 'BEGIN{system(\"rm x\")}'", "awk '{print | \"sh\"}' f",
                            "awk -f p.awk f", "awk '{print > \"out\"}' f"]),
    ("tar -tf a.tar", ["tar -xf a.tar --to-command='rm x'", "tar -I 'rm x' -xf a.tar",
                       "tar --checkpoint-action=exec='rm x' -cf a.tar f",
                       "tar --remove-files -cf a.tar f"]),
    ("rsync -a a b", ["rsync -e 'rm x' a b", "rsync --rsh='rm x' a b", "rsync -ave sh a b"]),
    ("sort f", ["sort -o out f", "sort --compress-program=rm f"]),
    ("rg foo", ["rg --pre=rm foo"]),
    ("curl -s http://x", ["curl -o out http://x", "curl -K cfg http://x"]),
    ("wget --spider http://x", ["wget -e x=y http://x", "wget -O out http://x"]),
    ("less f", ["less '+!rm x' f", "less -o out f"]),
]  # fmt: skip


def _bash() -> Tool:
    async def handler(arguments: Any, context: ToolContext) -> str:
        return "ran"

    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    return Tool(name="Bash", description="", input_schema=schema, handler=handler, mutating=True)


def _view(*rules: PermissionRule, by_rules: frozenset[str] = frozenset()) -> ToolView:
    registry = ToolRegistry()
    registry.register(_bash())
    scope = Scope(registry, name="child")
    scope.guard(PermissionGate(rules, by_rules=by_rules))
    return scope.view()


@pytest.mark.parametrize(("plain", "risky"), TABLES)
async def test_an_allow_rule_asks_about_the_options_that_run_or_write(
    tmp_path: Path, plain: str, risky: list[str]
) -> None:
    program = plain.split()[0]
    rule = PermissionRule("Bash", f"{program}:*", "allow", f"Bash({program}:*)", "tools", True)
    view = _view(rule, by_rules=frozenset({"Bash"}))
    context = ToolContext(cwd=tmp_path)
    assert await view.call("Bash", {"command": plain}, context) == "ran"
    for command in risky:
        with pytest.raises(ApprovalUnavailable):
            await view.call("Bash", {"command": command}, context)


async def test_a_deny_rule_on_git_sees_past_its_global_options(tmp_path: Path) -> None:
    view = _view(PermissionRule("Bash", "git push:*", "deny", "Bash(git push:*)", "x"))
    context = ToolContext(cwd=tmp_path)
    for command in ("git -C . push", "git --no-pager push origin", "nice git push"):
        with pytest.raises(ToolCallDenied):
            await view.call("Bash", {"command": command}, context)
    assert await view.call("Bash", {"command": "git status --short"}, context) == "ran"
