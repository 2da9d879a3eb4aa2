from __future__ import annotations

from pathlib import Path

import pytest

from membrane.builtin_tools.shell_guard import find_shell_escape

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
        "ln -s /usr/lib/libfoo.so libfoo.so",
        "npm test 2>&1 | tail -n 20",
        "echo 'unbalanced",
        "cat <<'EOF' > notes.txt\nit's > /etc/nothing\nEOF\necho done",
        "echo done # > /etc/not-a-redirect",
        "chmod +x run.sh",
    ],
)
def test_commands_that_only_read_outside_or_write_inside_pass(command: str, root: Path) -> None:
    assert find_shell_escape(command, root=root, env=ENV) is None


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
    ],
)
def test_commands_that_leave_or_write_outside_are_found(
    command: str, where: str, root: Path
) -> None:
    escape = find_shell_escape(command, root=root, env=ENV)
    assert escape is not None
    assert escape.path == where
    assert not escape.resolved.is_relative_to(root)


def test_a_symlink_inside_the_checkout_that_points_outside_is_followed(
    root: Path, tmp_path: Path
) -> None:
    (root / "link").symlink_to(tmp_path, target_is_directory=True)
    escape = find_shell_escape("touch link/x", root=root, env=ENV)
    assert escape is not None and escape.resolved == tmp_path.resolve() / "x"


def test_home_inside_the_checkout_makes_cd_alone_harmless(root: Path) -> None:
    assert find_shell_escape("cd && ls", root=root, env={"HOME": str(root)}) is None
