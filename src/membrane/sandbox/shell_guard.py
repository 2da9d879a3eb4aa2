"""A conservative reading of a shell command: does it leave the checkout or write where it must not?

``Bash`` runs commands with the checkout as working directory. Before running one it reads the
command text and refuses it when it finds

* ``cd``/``pushd`` (or ``env -C``/``--chdir``, ``sudo -D``) to a folder outside the checkout;
  ``cd`` alone goes to ``$HOME``, ``cd -``/``cd ~-`` to a folder the text does not show;
* an output redirection (``>``, ``>>``, ``&>``, ``>|``, ``>&FILE``) to a file outside it
  (``/dev/null``, ``/dev/stdout``, ``/dev/stderr``, ``/dev/tty`` and ``/dev/fd/*`` are fine);
* a known mutating command with a target outside it: ``rm``, ``rmdir``, ``mv``, ``touch``,
  ``mkdir``, ``chmod``, ``chown``, ``chgrp``, ``truncate``, ``shred``, ``unlink``, ``tee``,
  ``mkfifo``, ``mknod`` (every path argument); ``cp``, ``ln``, ``install``, ``rsync`` (the
  destination, ``-t``/``--target-directory`` in every form); ``sed -i``/``--in-place`` and
  ``perl -i`` (the files); ``dd of=``; ``tar`` (``-f`` when creating, ``-C`` when extracting);
  ``unzip -d``; ``curl -o``/``--output``; ``wget -O``/``-P``/``-o``; ``find`` with
  ``-delete``/``-exec``; ``git -C``/``--git-dir``/``--work-tree`` and ``git init``/``clone``/
  ``worktree add`` targets;
* a write into the checkout's control folders, ``.git`` and ``.membrane`` (except the agent's
  own memory folder; see :func:`~membrane.sandbox.paths.protected_part`). Git commands
  themselves still update ``.git``: only paths the text names are checked;
* ``ln`` linking to something outside the checkout (a later write through the link would land
  there);
* a shell that reads its commands from its input (``... | sh``, ``sh <<< ...``, ``bash -s``,
  ``bash <<EOF``), whose commands the guard cannot read;
* a path it cannot work out where a write or ``cd`` needs one: an unknown variable, a special
  parameter (``$1``, ``$@``), a ``${...}`` operator or a command substitution. It fails closed.

Paths are resolved the way the shell would see them: against the current folder (following
``cd`` within the command, subshells included), with braces, ``~``/``~user``/``~+``, variables
(from the environment, from assignments earlier in the command and from ``for`` lists), globs
(against the file system) and symlinks resolved. ``bash -c``/``sh -c`` scripts, ``eval``,
command substitutions, ``find -exec`` and prefixes such as ``sudo``, ``env``, ``xargs``,
``nohup`` or ``timeout`` are looked through.

This is capability shaping, not a sandbox. It reads text; it cannot see what a program does
(``python -c``, ``make``, a script, ``source``, ``xargs`` fed paths on its input, aliases under
``shopt -s expand_aliases``, a command that writes where its configuration says), and a
determined process can always write elsewhere. Hostile code needs an OS, container or VM
boundary. What the check does guarantee is that the plain, common ways of writing outside the
checkout, or into its control folders, are refused with a clear message instead of silently
succeeding.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from membrane.sandbox.paths import protected_message, protected_part, real_path
from membrane.sandbox.shell_targets import (
    LINKING,
    SHELLS,
    link_sources,
    option_values,
    positional,
    write_targets,
)
from membrane.sandbox.shell_words import (
    Expander,
    is_operator,
    quoted_substitutions,
    tokens,
)

__all__ = ["ShellEscape", "find_shell_escape"]

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HARMLESS_TARGETS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")
_MAX_NESTING = 4
#: Marks a word built from a command substitution (its value is unknowable).
_SUBSTITUTED = "$(...)"
#: Reserved words that may open a simple command (``if cd /x; then ...``, ``{ rm /x; }``).
_KEYWORDS = frozenset({"{", "}", "!", "if", "then", "else", "elif", "do", "while", "until"})
#: Prefix commands, with the options of each that take a value.
_WRAPPERS: Mapping[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-U", "--chdir"}),
    "env": frozenset({"-u", "-C", "-S", "--chdir", "--unset", "--split-string"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o"}),
    "nice": frozenset({"-n"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "xargs": frozenset({"-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a"}),
    "timeout": frozenset({"-s", "-k"}),
}
#: Options of a shell that take a value, and options after which it does not read commands.
_SHELL_VALUES = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
_SHELL_INFO = frozenset({"--version", "--help"})

Reason = Literal["outside", "protected", "unresolved", "shell-stdin", "link-outside"]


@dataclass(frozen=True, slots=True)
class ShellEscape:
    """Why a command was refused: the operation, the path as written and where it resolves.

    ``resolved`` is ``None`` when the path could not be worked out; ``protected`` names the
    control folder (``.git``, ``.membrane``) for ``reason == "protected"``.
    """

    operation: str
    path: str
    resolved: Path | None
    reason: Reason = "outside"
    protected: str | None = None

    def describe(self, root: Path, *, agent: str | None = None) -> str:
        """One sentence for the refusal message."""
        if self.reason == "protected":
            assert self.protected is not None
            return (
                f"{self.operation} targets {self.path!r}, and "
                f"{protected_message(self.protected, agent)}"
            )
        if self.reason == "unresolved":
            return (
                f"{self.operation} uses {self.path!r}, whose location cannot be read from the "
                "text (an unknown variable, a special parameter or a command substitution); "
                "write the path out literally, inside the checkout"
            )
        if self.reason == "shell-stdin":
            return (
                f"{self.operation} would run commands read from its input, which cannot be "
                "checked; pass them with `bash -c '...'` or put them in a script file"
            )
        if self.reason == "link-outside":
            return (
                f"{self.operation} links to {self.path!r} ({self.resolved}), outside the "
                f"checkout {root}; a write through the link would land there"
            )
        return (
            f"{self.operation} targets {self.path!r} ({self.resolved}), which is outside the "
            f"checkout {root}"
        )


class _Reader:
    """Walks the tokens of one command string, tracking the folder and variables as it goes."""

    def __init__(self, *, root: Path, words: Expander, agent: str | None, depth: int) -> None:
        self.root = root
        self.words = words
        self.agent = agent
        self.depth = depth
        self.pushed: list[Path] = []

    def nested_reader(self) -> _Reader:
        return _Reader(
            root=self.root, words=self.words.copy(), agent=self.agent, depth=self.depth + 1
        )

    def check(self, operation: str, word: str, *, write: bool = True) -> ShellEscape | None:
        """Refusal for ``word`` used as a write target (or, with ``write=False``, a folder)."""
        candidates = self.words.paths(word)
        if candidates is None:
            return ShellEscape(operation, word, None, "unresolved")
        for candidate in candidates:
            if not candidate or candidate in _HARMLESS_TARGETS or candidate.startswith("/dev/fd/"):
                continue
            resolved = real_path(self.words.cwd / candidate)
            if not resolved.is_relative_to(self.root):
                return ShellEscape(operation, word, resolved)
            protected = protected_part(resolved, self.root, agent=self.agent) if write else None
            if protected is not None:
                return ShellEscape(operation, word, resolved, "protected", protected)
        return None

    def read(self, command: str) -> ShellEscape | None:
        words: list[str] = []
        fed = False
        stack: list[tuple[Path, list[str] | None, bool]] = []
        heredoc: str | None = None
        in_heredoc: str | None = None
        stream = iter(tokens(command))
        for token in stream:
            if in_heredoc is not None:
                if token == in_heredoc and words == []:
                    in_heredoc = None
                elif is_operator(token) and "\n" in token:
                    words = []
                else:
                    words.append(token)
                continue
            if not is_operator(token):
                for script in quoted_substitutions(token) if self.depth < _MAX_NESTING else ():
                    found = self.nested_reader().read(script)
                    if found:
                        return found
                words.append(token)
                continue
            if ">" in token and "(" not in token:
                target = next(stream, "")
                if not (token.endswith("&") and (target.isdigit() or target == "-")):
                    found = self.check(f"redirection `{token}`", target)
                    if found:
                        return found
                continue
            if token.startswith("<") and "(" not in token:
                operand = next(stream, "")
                if token in ("<<", "<<-"):
                    heredoc = operand.removeprefix("-").strip("'\"")
                fed |= token in ("<<", "<<-", "<<<")
                continue
            for char in token:
                if char == "(" and words and words[-1].endswith("$"):
                    # A command substitution: its command runs first, the outer one goes on.
                    words[-1] = words[-1][:-1] + _SUBSTITUTED
                    stack.append((self.words.cwd, words, fed))
                    words, fed = [], False
                    continue
                found = self.command(words, fed=fed)
                if found:
                    return found
                words, fed = [], False
                if char == "(":
                    stack.append((self.words.cwd, None, False))
                elif char == ")" and stack:
                    cwd, outer, outer_fed = stack.pop()
                    self.words.cwd = cwd
                    if outer is not None:
                        words, fed = outer, outer_fed
            if "\n" in token and heredoc is not None:
                in_heredoc, heredoc = heredoc, None
        return None if in_heredoc is not None else self.command(words, fed=fed)

    def command(self, words: Sequence[str], *, fed: bool = False) -> ShellEscape | None:
        words = list(words)
        while words and _ASSIGNMENT.match(words[0]):
            name, _, value = words.pop(0).partition("=")
            self.words.assign(name, value)
        words, chdirs = _strip_wrappers(words)
        if not words:
            return None
        saved = self.words.cwd
        try:
            for operation, folder in chdirs:
                found = self.change_directory(operation, folder)
                if found:
                    return found
            return self.simple(words, fed=fed)
        finally:
            if chdirs:
                self.words.cwd = saved

    def simple(self, words: list[str], *, fed: bool) -> ShellEscape | None:
        verb_word, args = words[0], words[1:]
        verbs = self.words.values(verb_word)
        if verbs is None or len(verbs) != 1:
            # The command itself is not known: every operand may be something it writes.
            for arg in positional(args):
                found = self.check(f"`{verb_word}` (a command that cannot be read)", arg)
                if found:
                    return found
            return None
        verb = os.path.basename(verbs[0])
        if verb in ("export", "local", "declare", "readonly", "typeset"):
            for arg in args:
                if _ASSIGNMENT.match(arg):
                    name, _, value = arg.partition("=")
                    self.words.assign(name, value)
            return None
        if verb in ("for", "select"):
            if len(args) >= 2 and args[1] == "in":
                self.words.loop(args[0], args[2:])
            elif args:
                self.words.forget(args[0])
            return None
        if verb in ("read", "mapfile", "readarray", "getopts"):
            for arg in positional(args, takes_value=frozenset({"-p", "-d", "-n", "-N", "-t"})):
                self.words.forget(arg)
            return None
        for operation, target in write_targets(verb, args):
            found = self.check(operation, target, write=not operation.startswith("`git -"))
            if found:
                return found
        if verb in LINKING:
            found = self.links(verb, args)
            if found:
                return found
        if verb == "popd":
            if self.pushed:
                self.words.cwd = self.pushed.pop()
            return None
        if verb in ("cd", "pushd"):
            destination = next((a for a in args if not a.startswith("-") or a == "-"), "~")
            current = self.words.cwd
            found = self.change_directory(f"`{verb}`", destination)
            if not found and verb == "pushd":
                self.pushed.append(current)
            return found
        if verb in SHELLS:
            return self.shell(verb, args, fed=fed)
        return self.nested(verb, args)

    def change_directory(self, operation: str, destination: str) -> ShellEscape | None:
        targets = self.words.directories("~-" if destination == "-" else destination)
        if targets is None:
            return ShellEscape(operation, destination, None, "unresolved")
        for target in targets:
            found = self.check(operation, target, write=False)
            if found:
                return ShellEscape(operation, destination, found.resolved, found.reason)
        self.words.change_directory(real_path(self.words.cwd / targets[0]))
        return None

    def links(self, verb: str, args: Sequence[str]) -> ShellEscape | None:
        """Refusal for a link to outside: a hard link's source is read from the current
        folder, a symbolic link's target from the folder the link is made in."""
        sources, destination = link_sources(verb, args)
        folders = [self.words.cwd]
        symbolic = any(a == "--symbolic" or re.fullmatch(r"-[A-Za-z]*s[A-Za-z]*", a) for a in args)
        places = self.words.paths(destination) if destination and symbolic else None
        if places:
            folders = []
            for place in places:
                real = real_path(self.words.cwd / place)
                folders.append(real if real.is_dir() else real.parent)
        saved = self.words.cwd
        try:
            for folder in folders:
                self.words.cwd = folder
                for source in sources:
                    found = self.check(f"`{verb}`", source, write=False)
                    if found:
                        reason: Reason = (
                            "unresolved" if found.reason == "unresolved" else "link-outside"
                        )
                        return ShellEscape(found.operation, source, found.resolved, reason)
        finally:
            self.words.cwd = saved
        return None

    def shell(self, verb: str, args: Sequence[str], *, fed: bool) -> ShellEscape | None:
        index = 0
        while index < len(args):
            arg = args[index]
            if arg == "-c" or (arg.startswith("-") and not arg.startswith("--") and "c" in arg):
                script = args[index + 1] if index + 1 < len(args) else ""
                return self.nested_script(script)
            if arg in _SHELL_INFO:
                return None
            if arg in ("-s", "-") or (
                arg.startswith("-") and not arg.startswith("--") and "s" in arg[1:]
            ):
                break
            if arg in _SHELL_VALUES:
                index += 2
                continue
            if not arg.startswith(("-", "+")):
                return None  # runs a script file, which the guard cannot read
            index += 1
        operation = f"`{verb}`" + (" fed by a here-document or here-string" if fed else "")
        return ShellEscape(operation, verb, None, "shell-stdin")

    def nested(self, verb: str, args: Sequence[str]) -> ShellEscape | None:
        scripts: list[str] = []
        if verb == "eval":
            scripts.append(" ".join(args))
        elif verb == "find":
            for flag in ("-exec", "-execdir", "-ok", "-okdir"):
                if flag in args:
                    rest = args[args.index(flag) + 1 :]
                    scripts.append(shlex.join(a for a in rest if a not in (";", "+", "{}")))
        for script in scripts:
            found = self.nested_script(script)
            if found:
                return found
        return None

    def nested_script(self, script: str) -> ShellEscape | None:
        if self.depth >= _MAX_NESTING:
            return ShellEscape("a command nested too deeply to read", script, None, "unresolved")
        return self.nested_reader().read(script)


def _strip_wrappers(words: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """``words`` without leading keywords and prefix commands, and the folders those prefixes
    change into (``env -C DIR``, ``sudo -D DIR``)."""
    chdirs: list[tuple[str, str]] = []
    while words and words[0] in _KEYWORDS:
        words = words[1:]
    while words and os.path.basename(words[0]) in _WRAPPERS:
        wrapper = os.path.basename(words[0])
        takes_value = _WRAPPERS[wrapper]
        index = 1
        while index < len(words):
            word = words[index]
            if word in takes_value:
                index += 2
            elif word.startswith("-") or _ASSIGNMENT.match(word):
                index += 1
            else:
                break
        options = words[1:index]
        if wrapper in ("env", "sudo"):
            flag = "-C" if wrapper == "env" else "-D"
            chdirs += [(f"`{wrapper} {flag}`", d) for d in option_values(options, flag, "--chdir")]
        if wrapper == "timeout" and index < len(words):
            index += 1  # the duration
        words = words[index:]
        while words and words[0] in _KEYWORDS:
            words = words[1:]
    return words, chdirs


def find_shell_escape(
    command: str,
    *,
    root: Path,
    env: Mapping[str, str] | None = None,
    agent: str | None = None,
) -> ShellEscape | None:
    """The first way ``command``, run in the checkout ``root``, leaves it or writes where it
    must not (outside, or into ``.git``/``.membrane`` other than ``agent``'s memory folder).

    ``root`` must be absolute and symlink-free. ``env`` (default: this process's environment)
    supplies ``$HOME`` and other variables the command's paths may use.
    """
    words = Expander(cwd=root, env=os.environ if env is None else env)
    reader = _Reader(root=root, words=words, agent=agent, depth=0)
    return reader.read(command)
