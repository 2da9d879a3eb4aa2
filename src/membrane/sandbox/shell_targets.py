"""Which paths a known command writes to or moves into, read from its arguments.

:func:`write_targets` answers for one simple command (the verb with its prefixes such as
``sudo`` already removed). Each answer is ``(operation, path as written)``; the shell guard
expands and resolves the path. Option values are recognised in their separate (``-t DIR``),
attached (``-tDIR``) and long ``=`` (``--target-directory=DIR``) forms.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

__all__ = ["LINKING", "SHELLS", "WRITES_EVERY_PATH", "link_sources", "positional", "write_targets"]

WRITES_EVERY_PATH = frozenset(
    {"rm", "rmdir", "mv", "touch", "mkdir", "chmod", "chown", "chgrp", "truncate", "shred",
     "unlink", "tee", "mkfifo", "mknod"}
)  # fmt: skip
_DESTINATION = frozenset({"cp", "ln", "install", "rsync"})
#: Commands whose ``-t``/``--target-directory`` names the folder everything lands in.
_TARGET_DIRECTORY = frozenset({"mv", "cp", "ln", "install"})
#: Commands whose sources become links: a link to outside lets later writes land there.
LINKING = frozenset({"ln"})
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
#: Short options that take a value, per command (so the value is not taken for a path).
_VALUES: dict[str, frozenset[str]] = {
    "touch": frozenset({"-d", "-r", "-t"}),
    "truncate": frozenset({"-s", "-r"}),
    "mkdir": frozenset({"-m"}),
    "mkfifo": frozenset({"-m"}),
    "mknod": frozenset({"-m"}),
    "shred": frozenset({"-n", "-s"}),
    "cp": frozenset({"-S"}),
    "ln": frozenset({"-S"}),
    "install": frozenset({"-m", "-o", "-g", "-S"}),
    "rsync": frozenset({"-e", "-f"}),
}
#: Long options whose value is a path the command writes (besides ``--target-directory``).
_WRITTEN_OPTIONS: dict[str, frozenset[str]] = {
    "rsync": frozenset(
        {"--backup-dir", "--log-file", "--temp-dir", "--partial-dir", "--write-batch",
         "--only-write-batch"}
    ),
}  # fmt: skip


def positional(args: Sequence[str], *, takes_value: frozenset[str] = frozenset()) -> list[str]:
    """The operands of ``args``: not options, not option values, everything after ``--``."""
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


def option_values(args: Sequence[str], short: str, *longs: str) -> Iterator[str]:
    """Values of an option given as ``-x V``, ``-xV``, ``-abx V`` (a cluster), ``--long V`` or
    ``--long=V``. ``short`` may be empty when the option has no short form."""
    letter = short[1:] if len(short) == 2 else ""
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            return
        name, equals, value = arg.partition("=")
        if arg in longs or (short and arg == short):
            if index < len(args):
                yield args[index]
                index += 1
        elif arg.startswith("--"):
            if equals and name in longs:
                yield value
        elif letter and arg.startswith("-") and letter in arg[1:]:
            rest = arg[arg.index(letter, 1) + 1 :]
            if rest:
                yield rest
            elif index < len(args):
                yield args[index]
                index += 1


def write_targets(verb: str, args: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(operation, path) pairs that ``verb args`` would write to or move into."""
    label = f"`{verb}`"
    if verb in WRITES_EVERY_PATH or verb in _DESTINATION:
        takes_value = _VALUES.get(verb, frozenset())
        found: list[str] = []
        if verb in _TARGET_DIRECTORY:
            found += option_values(args, "-t", "--target-directory")
            takes_value |= {"-t", "--target-directory"}
        for name in _WRITTEN_OPTIONS.get(verb, ()):
            found += option_values(args, "", name)
        yield from ((label, path) for path in found)
        operands = positional(args, takes_value=takes_value)
        if verb in WRITES_EVERY_PATH:
            yield from ((label, path) for path in operands)
        elif not found:
            yield from _destination(verb, args, operands)
    elif verb in ("sed", "perl"):
        yield from _in_place(verb, args)
    elif verb == "dd":
        yield from ((label, a[3:]) for a in args if a.startswith("of="))
    elif verb == "git":
        yield from _git(args)
    elif verb == "tar":
        yield from _tar(args)
    elif verb == "unzip":
        yield from (("`unzip -d`", path) for path in option_values(args, "-d"))
    elif verb == "curl":
        yield from (
            ("`curl -o`", path)
            for path in option_values(args, "-o", "--output", "--output-dir", "--dump-header")
        )
        yield from (("`curl -c`", path) for path in option_values(args, "-c", "--cookie-jar"))
    elif verb == "wget":
        for short, longs in (
            ("-O", ("--output-document",)),
            ("-P", ("--directory-prefix",)),
            ("-o", ("--output-file",)),
            ("-a", ("--append-output",)),
        ):
            yield from ((f"`wget {short}`", path) for path in option_values(args, short, *longs))
    elif verb == "find" and {"-delete", "-exec", "-execdir", "-ok", "-okdir"} & set(args):
        starts = []
        for arg in args:
            if arg.startswith(("-", "(", "!")):
                break
            starts.append(arg)
        for start in starts or ["."]:
            yield "`find` with -delete/-exec", start


def link_sources(verb: str, args: Sequence[str]) -> tuple[list[str], str | None]:
    """What ``ln`` links to, and where the links go (``-t`` folder or last operand)."""
    operands = positional(args, takes_value=_VALUES.get(verb, frozenset()) | {"-t"})
    folders = list(option_values(args, "-t", "--target-directory"))
    if folders:
        return operands, folders[-1]
    if len(operands) >= 2:
        return operands[:-1], operands[-1]
    return operands, None


def _destination(verb: str, args: Sequence[str], operands: list[str]) -> Iterator[tuple[str, str]]:
    label = f"`{verb}`"
    if verb == "install" and ("-d" in args or "--directory" in args):
        yield from ((label, a) for a in operands)
    elif len(operands) >= 2 or (verb != "ln" and operands):
        yield label, operands[-1]


def _in_place(verb: str, args: Sequence[str]) -> Iterator[tuple[str, str]]:
    in_place = any(
        a.partition("=")[0] == "--in-place" or re.fullmatch(r"-[A-Za-z]*i\S*", a) for a in args
    )
    if not in_place:
        return
    if verb == "sed":
        takes_value = frozenset({"-e", "-f", "-l", "--expression", "--file", "--line-length"})
        script_given = any(
            a in ("-e", "-f", "--expression", "--file")
            or a.startswith(("--expression=", "--file="))
            or re.fullmatch(r"-[A-Za-z]*[ef]\S*", a)
            for a in args
        )
    else:
        takes_value = frozenset({"-e", "-E"})
        script_given = any(re.fullmatch(r"-[A-Za-z]*[eE]", a) for a in args)
    files = positional(args, takes_value=takes_value)
    if not script_given and len(files) > 1:
        files = files[1:]
    # With no file left, the one operand is checked too: failing closed costs nothing here.
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
            rest = positional(args[index + 1 :])
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
