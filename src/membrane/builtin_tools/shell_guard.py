"""A conservative reading of a shell command: does it leave or write outside the checkout?

``Bash`` runs commands with the checkout as working directory. Before running one it reads the
command text and refuses it (:class:`~membrane.errors.PathOutsideCheckout`) when it finds

* ``cd``/``pushd`` to a folder outside the checkout (``cd`` alone goes to ``$HOME``);
* an output redirection (``>``, ``>>``, ``&>``, ``>|``) to a file outside it (``/dev/null``,
  ``/dev/stdout``, ``/dev/stderr`` and ``/dev/fd/*`` are fine);
* a known mutating command with a target outside it: ``rm``, ``rmdir``, ``mv``, ``touch``,
  ``mkdir``, ``chmod``, ``chown``, ``chgrp``, ``truncate``, ``shred``, ``unlink``, ``tee``,
  ``mkfifo`` (every path argument); ``cp``, ``ln``, ``install``, ``rsync`` (the destination);
  ``sed -i`` and ``perl -i`` (the files); ``dd of=``; ``tar`` (``-f`` when creating, ``-C``
  when extracting); ``find`` with ``-delete``/``-exec``; ``git -C``/``--git-dir``/``--work-tree``
  and ``git init``/``clone``/``worktree add`` targets.

Paths are resolved the way the shell would see them: against the current folder (following
``cd`` within the command, subshells included), with ``~``, ``$HOME``-style variables (from the
environment and from assignments earlier in the command; unknown ones expand to nothing) and
symlinks resolved. ``bash -c``/``sh -c`` scripts, ``eval``, ``find -exec`` and prefixes such as
``sudo``, ``env``, ``xargs``, ``nohup`` or ``timeout`` are looked through.

This is capability shaping, not a sandbox. It reads text; it cannot see what a program does
(``python -c``, ``make``, a script, a command substitution whose output names a path), and a
determined process can always write elsewhere. Hostile code needs an OS, container or VM
boundary. What the check does guarantee is that the plain, common ways of writing outside the
checkout are refused with a clear message instead of silently succeeding.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from membrane.builtin_tools.paths import real_path

__all__ = ["ShellEscape", "find_shell_escape"]

_OPERATORS = "();<>|&\n"
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_HARMLESS_TARGETS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")
_MAX_NESTING = 4

_ALL_PATHS = frozenset(
    {"rm", "rmdir", "mv", "touch", "mkdir", "chmod", "chown", "chgrp", "truncate", "shred",
     "unlink", "tee", "mkfifo", "mknod"}
)  # fmt: skip
_DESTINATION = frozenset({"cp", "ln", "install", "rsync"})
#: Reserved words that may open a simple command (``if cd /x; then ...``, ``{ rm /x; }``).
_KEYWORDS = frozenset({"{", "}", "!", "if", "then", "else", "elif", "do", "while", "until"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
#: Prefix commands, with the options of each that take a value.
_WRAPPERS: Mapping[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-U"}),
    "env": frozenset({"-u", "-C", "-S"}),
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


@dataclass(frozen=True, slots=True)
class ShellEscape:
    """Why a command was refused: the offending operation and the path as written and resolved."""

    operation: str
    path: str
    resolved: Path


def _strip_comments(command: str) -> str:
    """``command`` without ``#`` comments (a ``#`` that starts a word outside quotes)."""
    out: list[str] = []
    quote = ""
    index = 0
    while index < len(command):
        char = command[index]
        if char == "\\" and quote != "'":
            out.append(command[index : index + 2])
            index += 2
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or command[index - 1] in " \t\n;&|()"):
            end = command.find("\n", index)
            index = len(command) if end == -1 else end
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _tokens(command: str) -> list[str]:
    # Backquoted substitutions run as commands of their own: split at them.
    text = _strip_comments(command).replace("`", "\n")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=_OPERATORS)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        # Unbalanced quotes (often in heredoc text): fall back to a quote-blind split.
        return re.findall(r"[();<>|&\n]+|[^\s();<>|&]+", text)


def _is_operator(token: str) -> bool:
    return bool(token) and all(char in _OPERATORS for char in token)


class _Reader:
    """Walks the tokens of one command string, tracking the folder and variables as it goes."""

    def __init__(self, *, root: Path, cwd: Path, env: Mapping[str, str], depth: int) -> None:
        self.root = root
        self.cwd = cwd
        self.env = dict(env)
        self.depth = depth
        self.pushed: list[Path] = []

    def expand(self, word: str) -> str:
        if word == "~" or word.startswith("~/"):
            word = self.env.get("HOME", str(Path.home())) + word[1:]
        return _VARIABLE.sub(lambda m: self.env.get(m.group(1) or m.group(2), ""), word)

    def outside(self, operation: str, word: str) -> ShellEscape | None:
        expanded = self.expand(word)
        if not expanded or expanded in _HARMLESS_TARGETS or expanded.startswith("/dev/fd/"):
            return None
        resolved = real_path(self.cwd / expanded)
        if resolved.is_relative_to(self.root):
            return None
        return ShellEscape(operation=operation, path=word, resolved=resolved)

    def read(self, command: str) -> ShellEscape | None:
        words: list[str] = []
        stack: list[Path] = []
        heredoc: str | None = None
        in_heredoc: str | None = None
        tokens = iter(_tokens(command))
        for token in tokens:
            if in_heredoc is not None:
                if token == in_heredoc and words == []:
                    in_heredoc = None
                elif _is_operator(token) and "\n" in token:
                    words = []
                else:
                    words.append(token)
                continue
            if not _is_operator(token):
                words.append(token)
                continue
            if ">" in token and "(" not in token:
                target = next(tokens, "")
                if not (token.endswith("&") and (target.isdigit() or target == "-")):
                    found = self.outside(f"redirection `{token}`", target)
                    if found:
                        return found
                continue
            if token.startswith("<") and "(" not in token:
                operand = next(tokens, "")
                if token in ("<<", "<<-"):
                    heredoc = operand.removeprefix("-").strip("'\"")
                continue
            found = self.command(words)
            if found:
                return found
            words = []
            if "\n" in token and heredoc is not None:
                in_heredoc, heredoc = heredoc, None
            for char in token:
                if char == "(":
                    stack.append(self.cwd)
                elif char == ")" and stack:
                    self.cwd = stack.pop()
        return None if in_heredoc is not None else self.command(words)

    def command(self, words: Sequence[str]) -> ShellEscape | None:
        words = list(words)
        while words and _ASSIGNMENT.match(words[0]):
            name, _, value = words.pop(0).partition("=")
            self.env[name] = self.expand(value)
        words = _strip_wrappers(words)
        if not words:
            return None
        verb, args = os.path.basename(words[0]), words[1:]
        if verb in ("export", "local", "declare", "readonly"):
            for arg in args:
                if _ASSIGNMENT.match(arg):
                    name, _, value = arg.partition("=")
                    self.env[name] = self.expand(value)
            return None
        for operation, target in _targets(verb, args):
            found = self.outside(operation, target)
            if found:
                return found
        if verb == "popd":
            if self.pushed:
                self.cwd = self.pushed.pop()
            return None
        if verb in ("cd", "pushd"):
            destination = next((a for a in args if not a.startswith("-") or a == "-"), "~")
            if destination == "-":
                return ShellEscape(f"`{verb} -`", "-", Path(self.env.get("OLDPWD", "/")))
            found = self.outside(f"`{verb}`", destination)
            if found:
                return found
            if verb == "pushd":
                self.pushed.append(self.cwd)
            self.cwd = real_path(self.cwd / self.expand(destination))
            return None
        return self.nested(verb, args)

    def nested(self, verb: str, args: Sequence[str]) -> ShellEscape | None:
        if self.depth >= _MAX_NESTING:
            return None
        scripts: list[str] = []
        if verb in _SHELLS and "-c" in args[:-1]:
            scripts.append(args[args.index("-c") + 1])
        elif verb == "eval":
            scripts.append(" ".join(args))
        elif verb == "find":
            for flag in ("-exec", "-execdir", "-ok", "-okdir"):
                if flag in args:
                    rest = args[args.index(flag) + 1 :]
                    scripts.append(shlex.join(a for a in rest if a not in (";", "+", "{}")))
        for script in scripts:
            inner = _Reader(root=self.root, cwd=self.cwd, env=self.env, depth=self.depth + 1)
            found = inner.read(script)
            if found:
                return found
        return None


def _strip_wrappers(words: list[str]) -> list[str]:
    while words and words[0] in _KEYWORDS:
        words = words[1:]
    while words and os.path.basename(words[0]) in _WRAPPERS:
        takes_value = _WRAPPERS[os.path.basename(words[0])]
        is_timeout = os.path.basename(words[0]) == "timeout"
        index = 1
        while index < len(words):
            word = words[index]
            if word in takes_value:
                index += 2
            elif word.startswith("-") or _ASSIGNMENT.match(word):
                index += 1
            else:
                break
        if is_timeout and index < len(words):
            index += 1  # the duration
        words = words[index:]
        while words and words[0] in _KEYWORDS:
            words = words[1:]
    return words


def _positional(args: Sequence[str], *, takes_value: frozenset[str] = frozenset()) -> list[str]:
    out: list[str] = []
    skip = False
    after_dashes = False
    for arg in args:
        if skip:
            skip = False
        elif after_dashes or not arg.startswith("-") or arg == "-":
            out.append(arg)
        elif arg == "--":
            after_dashes = True
        elif arg in takes_value:
            skip = True
    return out


def _targets(verb: str, args: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(operation, path) pairs that ``verb args`` would write to or move into."""
    label = f"`{verb}`"
    if verb in _ALL_PATHS:
        for arg in _positional(args):
            yield label, arg
    elif verb in _DESTINATION:
        yield from _destination(verb, args)
    elif verb in ("sed", "perl"):
        yield from _in_place(verb, args)
    elif verb == "dd":
        yield from ((label, a[3:]) for a in args if a.startswith("of="))
    elif verb == "git":
        yield from _git(args)
    elif verb == "tar":
        yield from _tar(args)
    elif verb == "find" and {"-delete", "-exec", "-execdir", "-ok", "-okdir"} & set(args):
        starts = []
        for arg in args:
            if arg.startswith(("-", "(", "!")):
                break
            starts.append(arg)
        for start in starts or ["."]:
            yield "`find` with -delete/-exec", start


def _destination(verb: str, args: Sequence[str]) -> Iterator[tuple[str, str]]:
    label = f"`{verb}`"
    for index, arg in enumerate(args):
        if arg in ("-t", "--target-directory") and index + 1 < len(args):
            yield label, args[index + 1]
            return
        if arg.startswith("--target-directory="):
            yield label, arg.partition("=")[2]
            return
    positional = _positional(args, takes_value=frozenset({"-m", "-o", "-g", "-S", "-e"}))
    if verb == "install" and ("-d" in args or "--directory" in args):
        yield from ((label, a) for a in positional)
    elif len(positional) >= 2 or (verb != "ln" and positional):
        yield label, positional[-1]


def _in_place(verb: str, args: Sequence[str]) -> Iterator[tuple[str, str]]:
    in_place = any(
        a.partition("=")[0] == "--in-place" or re.fullmatch(r"-[A-Za-z]*i\S*", a) for a in args
    )
    if not in_place:
        return
    if verb == "sed":
        takes_value = frozenset({"-e", "-f", "-l", "--expression", "--file"})
        script_given = any(a in takes_value - {"-l"} for a in args)
    else:
        takes_value = frozenset({"-e", "-E"})
        script_given = any(re.fullmatch(r"-[A-Za-z]*[eE]", a) for a in args)
    files = _positional(args, takes_value=takes_value)
    if not script_given:
        files = files[1:]
    for name in files:
        yield f"`{verb} -i`", name


def _git(args: Sequence[str]) -> Iterator[tuple[str, str]]:
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "-c":
            index += 2
            continue
        if arg in ("-C", "--git-dir", "--work-tree") and index + 1 < len(args):
            yield f"`git {arg}`", args[index + 1]
            index += 2
            continue
        if arg.startswith(("--git-dir=", "--work-tree=")):
            yield f"`git {arg.partition('=')[0]}`", arg.partition("=")[2]
        elif not arg.startswith("-"):
            rest = _positional(args[index + 1 :])
            if arg == "init":
                yield from (("`git init`", a) for a in rest)
            elif arg == "clone" and len(rest) >= 2:
                yield "`git clone`", rest[-1]
            elif arg == "worktree" and len(rest) >= 2 and rest[0] == "add":
                yield "`git worktree add`", rest[1]
            return
        index += 1


def _tar(args: Sequence[str]) -> Iterator[tuple[str, str]]:
    files: list[str] = []
    folders: list[str] = []
    extracting = creating = False
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            extracting |= name in ("--extract", "--get")
            creating |= name in ("--create", "--append", "--update", "--concatenate")
            if name in ("--file", "--directory"):
                if not value and index < len(args):
                    value, index = args[index], index + 1
                (files if name == "--file" else folders).append(value)
        elif arg.startswith("-") or index == 1:
            cluster = arg.lstrip("-")
            for position, letter in enumerate(cluster):
                extracting |= letter == "x"
                creating |= letter in "cruA"
                if letter in "fC":
                    value = cluster[position + 1 :]
                    if not value and index < len(args):
                        value, index = args[index], index + 1
                    (files if letter == "f" else folders).append(value)
                    break
    if extracting:
        yield from (("`tar -C` (extracting)", folder) for folder in folders)
    if creating:
        yield from (("`tar -f` (creating)", name) for name in files if name != "-")


def find_shell_escape(
    command: str, *, root: Path, env: Mapping[str, str] | None = None
) -> ShellEscape | None:
    """The first way ``command``, run in the checkout ``root``, leaves or writes outside it.

    ``root`` must be absolute and symlink-free. ``env`` (default: this process's environment)
    supplies ``$HOME`` and other variables the command's paths may use.
    """
    reader = _Reader(root=root, cwd=root, env=os.environ if env is None else env, depth=0)
    return reader.read(command)
