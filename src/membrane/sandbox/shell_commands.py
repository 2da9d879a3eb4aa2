"""The simple commands of a shell command line, as the ``Bash`` permission rules read them.

``simple_commands("git log && rm -rf x")`` is ``git log`` and ``rm -rf x``: a rule must hold for
every command a line runs, so the line is split at ``;``, ``&&``, ``||``, ``|``, ``&``, newlines
and parentheses (:mod:`membrane.sandbox.shell_syntax`), and every command line a command runs in
turn is read too: command substitutions (``$(...)``, backquotes, ``<(...)``), ``sh -c`` scripts,
``eval``, ``trap``, ``alias`` values, ``find -exec``, the command a wrapper runs (``env``,
``setsid``, ``nice``, ``timeout``, ``xargs``, ``flock``, ``script -c`` ...), ``env -S``, a
``git -c alias.x='!...'`` and variables that hold a command line (``GIT_EXTERNAL_DIFF=...``).

Each :class:`SimpleCommand` says what each kind of rule needs:

* ``words``: the command as written (harmless assignments such as ``LANG=C`` dropped). An
  ``allow`` rule matches these, and only when no ``concern`` lies past what the rule writes out
  literally: an assignment that is not harmless (``HOME=``, ``PATH=``, ``GIT_*=``), a wrapper,
  an option that makes the program run or write something else (:mod:`~membrane.sandbox.
  shell_programs`), a word the shell expands into a possible option, data bash evaluates.
* ``runs``: what a ``deny`` or ``ask`` rule matches: the command behind its wrappers, as written
  and with the program's folder dropped (``/bin/rm x`` is also ``rm x``), git with its global
  options dropped. ``maybe``: commands a wrapper may run with options Membrane does not know.
* ``hidden``: why the command may run something no rule can see (an interpreter, a script, a
  variable that changes what runs, ``hash -p``); ``deletes``: it deletes files without ``rm``.
* ``unreadable``: the program itself is not written out (``$CMD x``, ``source f``).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from membrane.sandbox.shell_programs import (
    GIT_GLOBAL_VALUES,
    SHELLS,
    Wrapper,
    behavioural_variable,
    command_variable,
    deletes,
    harmless_variable,
    interpreter,
    option_risks,
    wrapper,
)
from membrane.sandbox.shell_syntax import TooDeep, Word, parse, scripts_in

__all__ = ["SimpleCommand", "simple_commands"]

_MAX_NESTING = 6
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?\+?=")
_KEYWORDS = frozenset({"{", "}", "!", "if", "then", "else", "elif", "do", "while", "until",
                       "fi", "done", "esac", "time"})  # fmt: skip
_GIT_COMMAND_KEYS = re.compile(
    r"(alias\..*|core\.(pager|editor|sshcommand|fsmonitor|askpass|hookspath)|diff\.external|"
    r".*\.(textconv|command|cmd|clean|smudge|process|driver|helper|program|tool)|"
    r"sequence\.editor|pager\..*|interactive\.difffilter|gpg\..*program|credential\..*)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command a line runs; see the module's docstring for each field."""

    words: tuple[str, ...]
    runs: tuple[str, ...] = ()
    #: ``(index into words, reason)``: what an ``allow`` rule must write out to admit it.
    concerns: tuple[tuple[int, str], ...] = ()
    maybe: tuple[str, ...] = ()
    hidden: str | None = None
    deletes: bool = False
    #: The program words as written (wrappers included), for a look at the file system.
    programs: tuple[str, ...] = ()
    unreadable: str | None = None

    @property
    def written(self) -> str:
        return " ".join(self.words)


def simple_commands(command: str, *, depth: int = 0) -> list[SimpleCommand]:
    """Every simple command ``command`` runs, nested ones first, in order."""
    if depth > _MAX_NESTING:
        return [SimpleCommand((command,), unreadable="it nests command lines too deeply")]
    try:
        parsed = parse(command)
    except TooDeep:
        return [SimpleCommand((command[:200],), unreadable="it nests expansions too deeply")]
    out: list[SimpleCommand] = []
    for words in parsed:
        out += _Command(words, depth).read()
    return out


@dataclass
class _Command:
    """Reads one parsed command into the commands it runs."""

    all_words: list[Word]
    depth: int
    out: list[SimpleCommand] = field(default_factory=list)
    concerns: list[tuple[int, str]] = field(default_factory=list)
    hidden: str | None = None
    programs: list[str] = field(default_factory=list)
    maybe: list[str] = field(default_factory=list)

    def nested(self, script: str) -> None:
        self.out += simple_commands(script, depth=self.depth + 1)

    def hide(self, reason: str) -> None:
        self.hidden = self.hidden or reason

    def read(self) -> list[SimpleCommand]:
        for word in self.all_words:
            for script in word.scripts:
                self.nested(script)
        words = [w for w in self.all_words if not w.redirect]
        redirects = tuple(w.text for w in self.all_words if w.redirect and w.text)
        words = self.keywords(words)
        kept: list[Word] = []
        while words and _ASSIGNMENT.match(words[0].text):
            if self.assignment(words[0], len(kept)):
                kept.append(words[0])
            words = words[1:]
        if not words:
            if kept and (self.hidden or any(_exported(w.text) for w in kept)):
                self.emit(kept, redirects, start=len(kept))
            return self.out
        return self.program(kept + words, len(kept), redirects)

    def keywords(self, words: list[Word]) -> list[Word]:
        while words:
            text = words[0].text
            if text in _KEYWORDS and not words[0].quoted:
                words = words[1:]
            elif text == "coproc" and not words[0].quoted:
                # ``coproc NAME { ...; }`` names the coprocess; ``coproc CMD`` runs CMD.
                words = words[2:] if len(words) > 2 and words[2].text == "{" else words[1:]
            elif text == "function" and not words[0].quoted:
                words = words[2:]
            else:
                break
        return words

    def assignment(self, word: Word, index: int) -> bool:
        """Records an assignment; whether it stays in the written words."""
        match = _ASSIGNMENT.match(word.text)
        assert match is not None
        name, value = match.group(1), word.text[match.end() :]
        for script in scripts_in(value):
            if script not in word.scripts:
                self.nested(script)  # quoted data bash may still evaluate (arithmetic, @P)
        if command_variable(name):
            self.nested(value)
        if behavioural_variable(name):
            self.hide(f"`{name}=` changes what the program runs or reads")
        if word.evaluates:
            self.hide(f"`{word.text}` makes bash evaluate data as code")
        if harmless_variable(name):
            return False
        self.concerns.append((index, f"it sets `{name}`"))
        return True

    def program(
        self, words: list[Word], start: int, redirects: tuple[str, ...]
    ) -> list[SimpleCommand]:
        position = start
        while position < len(words):
            word = words[position]
            if word.expands or word.globs or not word.text:
                self.emit(words, redirects, start=position, unreadable=(
                    f"its program `{word.text}` is built by the shell, not written out"
                ))  # fmt: skip
                return self.out
            name = os.path.basename(word.text)
            table = wrapper(name)
            if table is None:
                break
            self.programs.append(word.text)
            self.concerns.append((position, f"it runs through `{name}`"))
            texts = [w.text for w in words]
            self.maybe += [
                " ".join([os.path.basename(texts[k]), *texts[k + 1 :]])
                for k in range(position + 1, len(texts))
                if not texts[k].startswith("-")
            ]
            inner = self.unwrap(name, table, texts, position + 1)
            if inner is None:
                self.emit(words, redirects, start=position, wrapper_only=True)
                return self.out
            position = inner
        else:
            self.emit(words, redirects, start=position, wrapper_only=True)
            return self.out
        self.core(words, position, redirects)
        return self.out

    def unwrap(self, name: str, table: Wrapper, texts: list[str], index: int) -> int | None:
        """The index of the command the wrapper at ``index - 1`` runs (``None``: none, or
        one it runs through a shell, already read)."""
        operands = table.operands
        while index < len(texts):
            arg = texts[index]
            option, equals, value = arg.partition("=")
            if arg == "--":
                index += 1
                break
            if arg in table.stops:
                return None
            script = _script_option(table, texts, index)
            if script is not None:
                text, index = script
                self.nested(text)
                if not table.runs:
                    return None
                continue
            if name == "env" and (option in ("-S", "--split-string") or arg.startswith("-S")):
                split = value if equals else arg[2:] if arg.startswith("-S") else ""
                if not split and index + 1 < len(texts):
                    split, index = texts[index + 1], index + 1
                self.nested(" ".join([split, *map(shlex.quote, texts[index + 1 :])]))
                return None
            if name == "env" and _ASSIGNMENT.match(arg):
                self.assignment(Word(arg), index)
                index += 1
                continue
            if arg in table.values or _cluster_value(table, arg):
                index += 2
                continue
            if arg.startswith("-") and len(arg) > 1:
                index += 1
                continue
            if operands:
                operands -= 1
                index += 1
                continue
            break
        if index >= len(texts) or not table.runs:
            return None
        if table.joined:
            self.nested(" ".join(texts[index:]))
            return None
        return index

    def core(self, words: list[Word], position: int, redirects: tuple[str, ...]) -> None:
        texts = [w.text for w in words]
        program, args = texts[position], texts[position + 1 :]
        name = os.path.basename(program)
        self.programs.append(program)
        runs = [" ".join(texts[position:]), " ".join([name, *args])]
        if name in ("source", "."):
            self.emit(words, redirects, start=position, unreadable=(
                f"`{name}` runs a script file, which Membrane cannot read"
            ))  # fmt: skip
            return
        if name == "eval":
            self.nested(" ".join(args))
            self.concerns.append((position, "`eval` runs its arguments as a command line"))
        elif name in SHELLS:
            self.shell(name, args, position)
        elif name == "trap" and args:
            skip = 1 if args[0] == "--" else 0
            if len(args) > skip and args[skip] not in ("-p", "-l", "-P", "-"):
                self.nested(args[skip])
        elif name == "alias":
            for arg in args:
                if "=" in arg:
                    self.nested(arg.partition("=")[2])
        elif name == "hash" and "-p" in args:
            at = args.index("-p")
            if at + 1 < len(args):
                runs.append(" ".join([os.path.basename(args[at + 1]), *args[at + 2 :]]))
            self.hide("`hash -p` makes a name run another program")
        elif name in ("mapfile", "readarray") and any(a.startswith("-C") for a in args):
            self.hide(f"`{name} -C` runs a callback")
        elif name == "git":
            runs += self.git(args)
        elif name == "find":
            self.find_exec(args)
        elif interpreter(name):
            self.hide(f"`{name}` runs code Membrane cannot read")
        risks = option_risks(name, args)
        for risk in risks or ():
            self.concerns.append((position + 1 + risk.index, risk.reason))
            if risk.runs:
                self.hide(risk.reason)
        for offset, word in enumerate(words[position + 1 :]):
            if word.text == "--":
                break
            if risks is not None and (word.expands or word.globs):
                self.concerns.append((
                    position + 1 + offset,
                    f"`{word.text}` is expanded by the shell and may become an option",
                ))  # fmt: skip
        for index, word in enumerate(words):
            if word.evaluates:
                self.concerns.append((index, f"`{word.text}` makes bash evaluate data as code"))
                self.hide(f"`{word.text}` makes bash evaluate data as code")
        self.emit(words, redirects, start=position, runs=runs, deletes=deletes(name, args))

    def shell(self, name: str, args: list[str], position: int) -> None:
        for index, arg in enumerate(args):
            if arg == "-c" or (arg.startswith("-") and not arg.startswith("--") and "c" in arg):
                self.nested(args[index + 1] if index + 1 < len(args) else "")
                self.concerns.append((position, f"it runs a command line through `{name}`"))
                return
            if not arg.startswith(("-", "+")):
                self.hide(f"`{name} {arg}` runs a script Membrane cannot read")
                return
        self.hide(f"`{name}` reads commands from its input, which Membrane cannot read")

    def git(self, args: list[str]) -> list[str]:
        """The git command with its global options dropped; ``-c`` values that hold a command
        line are read as one."""
        index = 0
        while index < len(args) and args[index].startswith("-"):
            arg = args[index]
            if arg in GIT_GLOBAL_VALUES and index + 1 < len(args):
                value = args[index + 1]
                key, _, setting = value.partition("=")
                if arg == "-c" and _GIT_COMMAND_KEYS.fullmatch(key):
                    self.nested(setting[1:] if setting.startswith("!") else setting)
                index += 2
            else:
                index += 1
        return [" ".join(["git", *args[index:]])] if index else []

    def find_exec(self, args: list[str]) -> None:
        for index, arg in enumerate(args):
            if arg in ("-exec", "-execdir", "-ok", "-okdir"):
                rest = args[index + 1 :]
                end = next((i for i, w in enumerate(rest) if w in (";", "+")), len(rest))
                self.nested(shlex.join(rest[:end]))

    def emit(
        self,
        words: list[Word],
        redirects: tuple[str, ...],
        *,
        start: int,
        runs: list[str] | None = None,
        deletes: bool = False,
        unreadable: str | None = None,
        wrapper_only: bool = False,
    ) -> None:
        texts = [w.text for w in words]
        if runs is None:
            runs = [" ".join(texts[start:])] if wrapper_only or unreadable is None else []
            if wrapper_only and start < len(texts):
                runs.append(" ".join([os.path.basename(texts[start]), *texts[start + 1 :]]))
        self.out.append(
            SimpleCommand(
                words=(*texts, *redirects),
                runs=tuple(dict.fromkeys(r for r in runs if r)),
                concerns=tuple(self.concerns),
                maybe=tuple(dict.fromkeys(self.maybe)),
                hidden=self.hidden,
                deletes=deletes,
                programs=tuple(self.programs),
                unreadable=unreadable,
            )
        )


def _script_option(table: Wrapper, texts: list[str], index: int) -> tuple[str, int] | None:
    """The command line a wrapper's option at ``index`` holds (``-c CMD``, ``-qcCMD``,
    ``--command=CMD``) and the index after it."""
    arg = texts[index]
    option, equals, value = arg.partition("=")
    found: str | None = None
    if option in table.scripts:
        found = value if equals else None
    elif arg.startswith("-") and not arg.startswith("--"):
        for position, letter in enumerate(arg[1:], start=2):
            if "-" + letter in table.scripts:
                found = arg[position:] or None
                break
        else:
            return None
    else:
        return None
    if found is None:
        if index + 1 >= len(texts):
            return "", index + 1
        return texts[index + 1], index + 2
    return found, index + 1


def _cluster_value(table: Wrapper, arg: str) -> bool:
    """A cluster of short options whose last one takes the next word (``strace -fo FILE``)."""
    return (
        len(arg) > 2 and arg.startswith("-") and not arg.startswith("--")
        and "-" + arg[-1] in table.values
    )  # fmt: skip


def _exported(assignment: str) -> bool:
    """A lone assignment that can reach a program: a name the environment may already hold
    (not all lower case) and that is not harmless."""
    name = assignment.partition("=")[0].partition("[")[0].rstrip("+")
    return not name.islower() and not harmless_variable(name)
