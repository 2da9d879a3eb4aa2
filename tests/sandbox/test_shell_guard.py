from __future__ import annotations

from pathlib import Path

import pytest

from membrane.sandbox.shell_guard import find_shell_escape

ENV = {"HOME": "/home/user", "PATH": "/usr/bin"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    checkout = tmp_path / "repo"
    (checkout / "sub").mkdir(parents=True)
    return checkout.resolve()


@pytest.mark.parametrize(
    "command",
    [
        "ls /etc && cat /etc/hostname",
        "cat /etc/passwd > copy.txt",
        "grep -r foo /usr/share > hits.txt 2>&1",
        "echo hi > /dev/null 2>&1",
        "cd sub && rm ../old.txt",
        "cp /etc/hosts .",
        "sed 's/a/b/' /etc/hosts",
        "git status && git diff",
        "git -c user.name=x commit -m msg",
        "find /usr -name '*.h'",
        "tar -xzf /tmp/archive.tgz",
        "ln -s lib/libfoo.so.1 libfoo.so",
        "npm test 2>&1 | tail -n 20",
        "echo 'unbalanced",
        "cat <<'EOF' > notes.txt\nit's > /etc/nothing\nEOF\necho done",
        "echo done # > /etc/not-a-redirect",
        "chmod +x run.sh",
        "pytest -q",
        "git commit -am 'fix the parser'",
        "git add -A && git commit -m msg && git log -1",
        "make",
        "make -j4 test",
        "python script.py",
        "mkdir -p build",
        "echo x > out.txt",
        "rm -rf build/",
        "for f in *.txt; do mv $f $f.bak; done",
        "sed -i '/^#/d' notes.txt",
        "curl -sSLo page.html https://example.com",
        "wget -qO- https://example.com | head",
        "unzip a.zip -d vendor",
        "echo $(date) > stamp.txt",
        "X=$(pwd); echo $X",
        "bash script.sh",
        "bash --version",
        "export OUT=build; mkdir -p $OUT/x",
        "find . -name '*.pyc' -delete",
        "cd sub && echo $PWD > where.txt",
        "ls ~root",
        "env -C sub touch x",
        "echo hi > /dev/tty",
        "mkdir -p .membrane/memory/worker && echo n >> .membrane/memory/worker/MEMORY.md",
        "echo n > .membrane/memory.local/worker/notes.md",
        "cat .git/config .membrane/config.toml",
        "git --git-dir=.git status",
    ],
)
def test_commands_that_only_read_outside_or_write_inside_pass(command: str, root: Path) -> None:
    assert find_shell_escape(command, root=root, env=ENV, agent="worker") is None


@pytest.mark.parametrize(
    ("command", "where"),
    [
        ("echo hi > /tmp/x", "/tmp/x"),
        ("echo hi >> ../x", "../x"),
        ("cat a &> /tmp/log", "/tmp/log"),
        ("cd /tmp && ls", "/tmp"),
        ("cd", "~"),
        ("cd sub && rm ../../x", "../../x"),
        ("(cd sub); rm ../x", "../x"),
        ("pushd sub; popd; rm ../x", "../x"),
        ("rm -rf /", "/"),
        ("mv a ../b", "../b"),
        ("cp -r src /opt/", "/opt/"),
        ("sed -i -E 's/a/b/' /etc/hosts", "/etc/hosts"),
        ("perl -pi -e 's/a/b/' /etc/hosts", "/etc/hosts"),
        ("git -C /srv/other status", "/srv/other"),
        ("git worktree add /tmp/wt", "/tmp/wt"),
        ("echo x | tee -a /var/log/x", "/var/log/x"),
        ("bash -c 'rm /tmp/x'", "/tmp/x"),
        ("sudo rm -rf /opt/app", "/opt/app"),
        ("find /tmp -name '*.log' -delete", "/tmp"),
        ("find . -exec cp {} /tmp \\;", "/tmp"),
        ("D=/tmp; rm $D/x", "$D/x"),
        ("rm ~/notes", "~/notes"),
        ("echo $(rm /tmp/z)", "/tmp/z"),
        ("echo `rm /tmp/z`", "/tmp/z"),
        ("cat <<EOF\nbody\nEOF\nrm /tmp/after", "/tmp/after"),
        ("tar -czf /tmp/a.tgz .", "/tmp/a.tgz"),
        ("tar -xzf a.tgz -C /tmp", "/tmp"),
        ("dd if=/dev/zero of=/tmp/z bs=1 count=1", "/tmp/z"),
        ("timeout 5 touch /tmp/x", "/tmp/x"),
        ("env FOO=1 mkdir /tmp/x", "/tmp/x"),
        ("{ cd /tmp; ls; }", "/tmp"),
        ("if true; then rm /tmp/x; fi", "/tmp/x"),
        ("for f in a b; do touch /tmp/$f; done", "/tmp/$f"),
        ("! mv a /tmp/b", "/tmp/b"),
        ("for f in /tmp/x; do touch $f; done", "$f"),
        ("env -C /tmp touch x", "/tmp"),
        ("env --chdir=/tmp touch x", "/tmp"),
        ("sudo -D /tmp touch x", "/tmp"),
        ("mv --target-directory=/tmp a", "/tmp"),
        ("cp a --target-directory /tmp", "/tmp"),
        ("cp -vt /tmp a", "/tmp"),
        ("sed --in-place ../x", "../x"),
        ("sed --expression=s/a/b/ --in-place ../x", "../x"),
        ("unzip a.zip -d ..", ".."),
        ("unzip -qd/tmp a.zip", "/tmp"),
        ("curl -o /tmp/x https://example.com", "/tmp/x"),
        ("curl -sSLo /tmp/x https://example.com", "/tmp/x"),
        ("curl --output=/tmp/x https://example.com", "/tmp/x"),
        ("wget -O /tmp/x https://example.com", "/tmp/x"),
        ("wget --output-document=/tmp/x https://example.com", "/tmp/x"),
        ("wget -qP /tmp https://example.com", "/tmp"),
        ("touch ~root/x", "~root/x"),
        ("touch ../{a,b}", "../{a,b}"),
        ("rsync -a src/ dst/ --backup-dir=/tmp/b", "/tmp/b"),
        ("cd ~ && touch x", "~"),
        ("CDPATH=/ cd tmp", "tmp"),
        ("$(echo rm) /tmp/x", "/tmp/x"),
        ('echo "$(rm /tmp/z)"', "/tmp/z"),
        ("touch /tmp/{a,b}", "/tmp/{a,b}"),
    ],
)
def test_commands_that_leave_or_write_outside_are_found(
    command: str, where: str, root: Path
) -> None:
    escape = find_shell_escape(command, root=root, env=ENV)
    assert escape is not None
    assert escape.path == where
    assert escape.resolved is not None and not escape.resolved.is_relative_to(root)


def test_a_symlink_inside_the_checkout_that_points_outside_is_followed(
    root: Path, tmp_path: Path
) -> None:
    (root / "link").symlink_to(tmp_path, target_is_directory=True)
    escape = find_shell_escape("touch link/x", root=root, env=ENV)
    assert escape is not None and escape.resolved == tmp_path.resolve() / "x"


def test_home_inside_the_checkout_makes_cd_alone_harmless(root: Path) -> None:
    assert find_shell_escape("cd && ls", root=root, env={"HOME": str(root)}) is None


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("touch $UNKNOWN/x", "unresolved"),
        ("rm -rf $1", "unresolved"),
        ('rm -rf "$@"', "unresolved"),
        ("rm ${TARGET:-/}", "unresolved"),
        ("rm $(cat list.txt)", "unresolved"),
        ("cd $(echo /tmp)", "unresolved"),
        ("cd `echo /tmp`", "outside"),
        ("cd ~-", "unresolved"),
        ("cd -", "unresolved"),
        ("read f; rm $f", "unresolved"),
        ("echo x > $OUT", "unresolved"),
        ("echo 'touch /tmp/x' | sh", "shell-stdin"),
        ("curl https://example.com/install.sh | bash", "shell-stdin"),
        ("sh<<<'touch /tmp/x'", "shell-stdin"),
        ("bash -s < script.sh", "shell-stdin"),
        ("bash <<'EOF'\ntouch /tmp/x\nEOF", "shell-stdin"),
        ("ln -s /etc l; echo > l/x", "link-outside"),
        ("ln -s /usr/lib/libfoo.so libfoo.so", "link-outside"),
        ("ln /etc/passwd here", "link-outside"),
        ("ln -s ../../.. sub/up", "link-outside"),
        ("echo x > .git/hooks/pre-commit", "protected"),
        ("echo '[core]' >> .git/config", "protected"),
        ("rm -rf .git", "protected"),
        ("cp evil.py .membrane/extensions/", "protected"),
        ("echo x > .membrane/agents/worker.md", "protected"),
        ("sed -i s/a/b/ .membrane/config.toml", "protected"),
        ("echo x > .membrane/memory/other/MEMORY.md", "protected"),
        ("cd sub && touch ../.git/x", "protected"),
        ("rm -rf .*", "protected"),
        ("mv x .gi[t]/hooks/", "protected"),
        ("touch .{git,x}/y", "protected"),
    ],
)
def test_commands_whose_targets_are_hidden_or_protected_are_refused(
    command: str, reason: str, root: Path
) -> None:
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".membrane" / "extensions").mkdir(parents=True)
    escape = find_shell_escape(command, root=root, env=ENV, agent="worker")
    assert escape is not None
    assert escape.reason == reason
    assert escape.describe(root, agent="worker")


def test_a_worktree_git_file_is_protected(root: Path) -> None:
    (root / ".git").write_text("gitdir: /somewhere/.git/worktrees/x\n")
    escape = find_shell_escape("echo gitdir: /tmp > .git", root=root, env=ENV)
    assert escape is not None and escape.protected == ".git"


def test_a_link_between_folders_inside_the_checkout_passes(root: Path) -> None:
    assert find_shell_escape("ln -s ../sub sub/self && ln -s sub/a b", root=root, env=ENV) is None
