"""What well-known programs and variables do, as the ``Bash`` permission rules need to know it.

* :data:`WRAPPERS`: programs that run another command (``env``, ``setsid``, ``nice``, ``timeout``,
  ``xargs``, ``sudo``, ``flock``, ``script -c`` ...), with the options of each that take a value,
  the operands before the command, and the options whose value is a command line;
* variables: which assignments are harmless (``LANG``, ``LC_*``, ``TZ`` ...), which change what a
  program runs or reads (``PATH``, ``HOME``, ``GIT_*``, ``XDG_*``, ``BASH_ENV``, ``LD_*`` ...),
  and which hold a command line (``GIT_EXTERNAL_DIFF``, ``PAGER``, ``EDITOR`` ...);
* :func:`option_risks`: per program, the options that make it run or write something other than
  what its name says (git's ``-c``, ``--ext-diff``, ``--output``, ``--upload-pack``; find's
  ``-exec`` and ``-delete``; sed's ``-i`` and ``e``/``w``; awk's ``system``; tar's
  ``--to-command``, ``--checkpoint-action`` ...);
* :func:`interpreter`: programs that run code Membrane cannot read (interpreters, build tools);
* :func:`deletes`: commands that delete files without being ``rm``.

Tables like these are never complete: they are why a ``deny`` rule asks about what it cannot
see, and why the OS sandbox, not these rules, confines what a command does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BUILTINS",
    "DELETERS",
    "GIT_GLOBAL_VALUES",
    "SHELLS",
    "WRAPPERS",
    "Risk",
    "Wrapper",
    "behavioural_variable",
    "command_variable",
    "deletes",
    "harmless_variable",
    "interpreter",
    "option_risks",
    "wrapper",
]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


SHELLS: Final = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh",
                           "tcsh", "yash", "posh", "rbash"})  # fmt: skip
#: Shell builtins and keywords: programs the shell runs itself, never found on ``PATH``.
BUILTINS: Final = frozenset(
    {"cd", "echo", "printf", "test", "[", "[[", "]]", "true", "false", ":", "pwd", "read",
     "export", "set", "unset", "shift", "exit", "return", "break", "continue", "local",
     "declare", "typeset", "readonly", "let", "wait", "jobs", "kill", "getopts", "umask",
     "ulimit", "times", "dirs", "pushd", "popd", "shopt", "caller", "type", "help", "disown",
     "bg", "fg", "suspend", "logout", "history", "compgen", "complete", "compopt", "for",
     "select", "case", "in", "esac", "function", "unalias", "((", "while", "until", "if"}
)  # fmt: skip
#: Programs whose only business is deleting files: a ``deny`` rule naming one asks about the
#: other ways to delete (:func:`deletes`).
DELETERS: Final = frozenset({"rm", "unlink", "rmdir", "shred", "srm", "wipe", "trash",
                             "trash-put"})  # fmt: skip


@dataclass(frozen=True, slots=True)
class Wrapper:
    """A program that runs another command given after its own options."""

    #: Options that take a value as the next word.
    values: frozenset[str] = frozenset()
    #: Operands before the command (``timeout DURATION``, ``taskset MASK``, ``flock FILE``).
    operands: int = 0
    #: Options whose value is a command line run by a shell (``script -c``, ``flock -c``).
    scripts: frozenset[str] = frozenset()
    #: Options after which it runs no command (``command -v``, ``taskset -p``).
    stops: frozenset[str] = frozenset()
    #: Whether the words after its options are a command (``script``/``su`` take files/users).
    runs: bool = True
    #: The words after its options are joined into one command line (``watch``, ``parallel``).
    joined: bool = False


def _w(
    values: str = "",
    *,
    operands: int = 0,
    scripts: str = "",
    stops: str = "",
    runs: bool = True,
    joined: bool = False,
) -> Wrapper:
    return Wrapper(_names(values), operands, _names(scripts), _names(stops), runs, joined)


WRAPPERS: Mapping[str, Wrapper] = {
    "env": _w("-u --unset -C --chdir -S --split-string -a --argv0", scripts=""),
    "sudo": _w("-u -g -C -D -h -p -U -r -t -T -R --user --group --chdir --host --prompt "
               "--other-user --role --type --command-timeout --chroot",
               stops="-l -v -k -K -e -V --list --validate --edit --version"),
    "doas": _w("-u -C"),
    "command": _w(stops="-v -V"),
    "builtin": _w(),
    "exec": _w("-a"),
    "nohup": _w(),
    "time": _w("-f -o --format --output"),
    "nice": _w("-n --adjustment"),
    "stdbuf": _w("-i -o -e --input --output --error"),
    "xargs": _w("-I -n -P -L -d -E -s -a --arg-file --delimiter --max-args --max-procs "
                "--max-lines --replace --eof --max-chars --process-slot-var"),
    "timeout": _w("-s -k --signal --kill-after", operands=1),
    "setsid": _w(),
    "ionice": _w("-c -n -p -P -u --class --classdata --pid --pgid --uid",
                 stops="-p -P -u --pid --pgid --uid"),
    "taskset": _w(operands=1, stops="-p --pid"),
    "flock": _w("-w --timeout -E --conflict-exit-code", operands=1, scripts="-c --command"),
    "chrt": _w("-T -P -D --sched-runtime --sched-period --sched-deadline", operands=1,
               stops="-p --pid -m --max"),
    "unshare": _w("-S -G -R -w --setuid --setgid --root --wd --map-user --map-group "
                  "--map-users --map-groups --propagation"),
    "fakeroot": _w("-l -s -i -b --lib --faked"),
    "strace": _w("-o -e -p -s -u -E -O -a -b -I -P -X -S"),
    "ltrace": _w("-o -e -p -s -u -a -n -l -L -x -A -D -F -w"),
    "script": _w("-E -I -O -B -T -m --echo --log-in --log-out --log-io --log-timing "
                 "--logging-format", scripts="-c --command", runs=False),
    "su": _w("-s -g -G -w --shell --group --supp-group", scripts="-c --command", runs=False),
    "runuser": _w("-u -g -G -s -w --user --group --supp-group --shell",
                  scripts="-c --command"),
    "chroot": _w("--userspec --groups", operands=1),
    "setpriv": _w(),
    "prlimit": _w("-p --pid", stops="-p --pid"),
    "numactl": _w("-N -m -C -p -i --interleave --membind --cpunodebind --physcpubind "
                  "--preferred"),
    "systemd-run": _w("-u -p -E -M -H --unit --property --setenv --slice --description "
                      "--uid --gid --nice --working-directory"),
    "nsenter": _w("-t -S -G --target --setuid --setgid"),
    "setarch": _w(operands=1),
    "linux32": _w(),
    "linux64": _w(),
    "firejail": _w(),
    "torsocks": _w(),
    "proxychains": _w("-f"),
    "proxychains4": _w("-f"),
    "unbuffer": _w(),
    "faketime": _w("-f -m", operands=1),
    "dbus-run-session": _w("--config-file --dbus-daemon"),
    "ssh-agent": _w("-a -E -t -P"),
    "valgrind": _w(),
    "busybox": _w(),
    "toybox": _w(),
    "catchsegv": _w(),
    "watch": _w("-n -d -g -x --interval --differences", joined=True),
    "parallel": _w("-j -S -a -n -N -d -I -L --jobs --sshlogin --arg-file --joblog "
                   "--results --delimiter --colsep --tmpdir", joined=True),
}  # fmt: skip
#: The dynamic loader run as a program (``/lib64/ld-linux-x86-64.so.2 /bin/rm x``).
_LOADER = re.compile(r"ld(-linux[\w.-]*)?\.so(\.\d+)?|ld-[\w.-]+\.so[\w.]*")
LOADER_WRAPPER: Final = _w("--library-path --preload --audit --argv0")


def wrapper(name: str) -> Wrapper | None:
    """The wrapper table entry for the program ``name`` (its folder dropped)."""
    found = WRAPPERS.get(name)
    if found is None and _LOADER.fullmatch(name):
        return LOADER_WRAPPER
    return found


_HARMLESS: Final = frozenset({"LANG", "LANGUAGE", "TZ", "NO_COLOR", "FORCE_COLOR", "CLICOLOR",
                              "CLICOLOR_FORCE", "COLUMNS", "LINES", "TERM", "CI"})  # fmt: skip


def harmless_variable(name: str) -> bool:
    """Assignments an ``allow`` rule looks past: locale, time zone, colour, terminal size."""
    return name in _HARMLESS or (name.startswith("LC_") and name != "LC_")


_BEHAVIOURAL: Final = frozenset(
    {"PATH", "HOME", "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
     "CDPATH", "GLOBIGNORE", "TMPDIR", "EDITOR", "VISUAL", "PAGER", "MANPAGER", "MANOPT",
     "BROWSER", "SHELL", "ZDOTDIR", "CLASSPATH", "GCONV_PATH", "LOCPATH", "NLSPATH", "TERMINFO",
     "HOSTALIASES", "MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS", "MAKEFILES", "TAR_OPTIONS", "GZIP",
     "BZIP", "BZIP2", "XZ_OPT", "XZ_DEFAULTS", "ZSTD_CLEVEL", "RSYNC_RSH", "CVS_RSH", "LESS",
     "LESSOPEN", "LESSCLOSE", "LESSKEY", "SYSTEMD_PAGER", "RUSTC_WRAPPER", "CC", "CXX",
     "FAKEROOTKEY", "POSIXLY_CORRECT", "TEXINPUTS", "SSH_ASKPASS", "SUDO_ASKPASS", "EXINIT",
     "VIMINIT", "MYVIMRC", "INPUTRC", "HISTFILE", "GREP_OPTIONS", "AWKPATH", "AWKLIBPATH"}
)  # fmt: skip
_BEHAVIOURAL_PREFIXES: Final = (
    "GIT_", "XDG_", "LD_", "DYLD_", "BASH_FUNC_", "BASH_", "PYTHON", "PERL", "RUBY", "NODE_",
    "NPM_", "npm_config_", "JAVA_", "_JAVA_", "JDK_", "SSH_", "SUDO_", "CARGO_", "GO", "DENO_",
    "BUN_", "PIP_", "UV_", "POETRY_", "VIRTUAL_ENV", "CONDA", "GEM_", "BUNDLE_", "LUA_",
    "MALLOC_", "GLIBC_", "GTK_", "QT_", "DOCKER_", "KUBECONFIG", "CURL_", "WGETRC", "SSL_",
)  # fmt: skip


def behavioural_variable(name: str) -> bool:
    """A variable that changes what a program runs, loads or reads as its configuration."""
    return name in _BEHAVIOURAL or name.startswith(_BEHAVIOURAL_PREFIXES)


_COMMANDS: Final = frozenset(
    {"GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_SSH",
     "GIT_SSH_COMMAND", "GIT_ASKPASS", "GIT_PROXY_COMMAND", "PAGER", "MANPAGER", "EDITOR",
     "VISUAL", "BROWSER", "SSH_ASKPASS", "SUDO_ASKPASS", "LESSOPEN", "LESSCLOSE",
     "PROMPT_COMMAND", "RSYNC_RSH", "CVS_RSH", "SYSTEMD_PAGER", "RUSTC_WRAPPER", "PS4"}
)  # fmt: skip


def command_variable(name: str) -> bool:
    """A variable whose value programs run as a command line (``GIT_EXTERNAL_DIFF``...)."""
    return name in _COMMANDS or name.startswith("GIT_CONFIG_VALUE_")


_INTERPRETERS: Final = frozenset(
    {"perl", "ruby", "irb", "node", "nodejs", "deno", "bun", "php", "lua", "luajit", "tclsh",
     "wish", "Rscript", "R", "julia", "osascript", "pwsh", "powershell", "java", "jshell",
     "groovy", "scala", "kotlin", "swift", "expect", "gdb", "lldb", "vim", "vi", "nvim", "view",
     "ex", "emacs", "ed", "sqlite3", "psql", "mysql", "dc", "m4", "guile", "racket", "sbcl",
     "clojure", "elixir", "erl", "escript", "ghc", "ghci", "runghc", "ocaml", "php-cgi",
     "make", "gmake", "bmake", "cmake", "ninja", "just", "rake", "ant", "mvn", "gradle",
     "gradlew", "npm", "npx", "yarn", "pnpm", "cargo", "go", "pip", "pip3", "pipx", "uv",
     "uvx", "poetry", "pdm", "hatch", "tox", "nox", "pytest", "py.test", "bundle", "gem",
     "composer", "dotnet", "mix", "stack", "cabal", "perf", "at", "batch", "tmux", "screen",
     "nohup.sh", "ssh", "sshpass", "docker", "podman", "kubectl", "crontab", "systemctl",
     "git-shell", "enable", "fc", "source", "."}
)  # fmt: skip
_VERSIONED = re.compile(r"(python|pypy|perl|ruby|php|lua|node|pip|tclsh|wish)[0-9.]*")


def interpreter(name: str) -> bool:
    """A program that runs code Membrane cannot read: an interpreter, a build tool, a shell
    host (``tmux``, ``at``), a program runner (``docker``, ``ssh``)."""
    return name in _INTERPRETERS or name in SHELLS or _VERSIONED.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class Risk:
    """One argument (by index) that makes a program run (``runs``) or write something else."""

    index: int
    reason: str
    runs: bool


def option_risks(name: str, args: Sequence[str]) -> list[Risk] | None:
    """The risky arguments of ``name args``; ``None`` when Membrane keeps no table for
    ``name`` (then a word the shell expands is not a concern either)."""
    table = _TABLES.get(name)
    if table is None:
        return None
    return table(name, args)


def _options(args: Sequence[str]) -> list[tuple[int, str, str]]:
    """``(index, option name, value)`` of each option word before ``--``."""
    out: list[tuple[int, str, str]] = []
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg.startswith("-") and arg != "-":
            name, _, value = arg.partition("=")
            out.append((index, name, value))
    return out


def _long(option: str, names: Sequence[str]) -> bool:
    """``option`` is one of ``names`` or an abbreviation of one (GNU getopt accepts those)."""
    return option.startswith("--") and len(option) > 3 and any(n.startswith(option) for n in names)


def _short(option: str, letters: str) -> bool:
    """A cluster of short options (``-po``) holding any of ``letters``."""
    if not option.startswith("-") or option.startswith("--") or len(option) < 2:
        return False
    return any(letter in option[1:] for letter in letters)


_GIT_GLOBAL_SAFE: Final = frozenset(
    {"--no-pager", "-P", "-p", "--paginate", "--no-replace-objects", "--literal-pathspecs",
     "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks",
     "--version", "--help", "-h", "--bare", "--no-lazy-fetch", "--no-advice"}
)  # fmt: skip
_GIT_RUNS: Final = ("--ext-diff", "--exec-path", "--upload-pack", "--receive-pack", "--exec",
                    "--config", "--config-env", "--template", "--open-files-in-pager",
                    "--extcmd", "--tool")  # fmt: skip
_GIT_WRITES: Final = ("--output", "--output-directory")
_GIT_SHORT_RUNS: Final = {"clone": "uc", "ls-remote": "u", "rebase": "x", "grep": "O",
                          "difftool": "xt", "mergetool": "t", "archive": ""}  # fmt: skip
_GIT_SHORT_WRITES: Final = {"format-patch": "o", "archive": "o"}
_GIT_RUNNING: Final = {("bisect", "run"), ("submodule", "foreach"), ("filter-branch", ""),
                       ("mergetool", ""), ("difftool", "")}  # fmt: skip
#: Global options of git that take the next word as their value.
GIT_GLOBAL_VALUES: Final = _names(
    "-c -C --git-dir --work-tree --namespace --config-env --super-prefix --exec-path"
)


def _git(name: str, args: Sequence[str]) -> list[Risk]:
    risks: list[Risk] = []
    index = 0
    while index < len(args) and args[index].startswith("-"):
        arg = args[index]
        if arg not in _GIT_GLOBAL_SAFE:
            risks.append(Risk(index, f"`git {arg}` changes what git runs or where it works", True))
        index += 2 if arg in GIT_GLOBAL_VALUES and arg != "--exec-path" else 1
    if index >= len(args):
        return risks
    sub, rest = args[index], args[index + 1 :]
    if (sub, rest[0] if rest else "") in _GIT_RUNNING or (sub, "") in _GIT_RUNNING:
        risks.append(Risk(index, f"`git {sub}` runs commands", True))
    for offset, option, _ in _options(rest):
        at = index + 1 + offset
        if _long(option, _GIT_RUNS) or _short_for(option, _GIT_SHORT_RUNS.get(sub, "")):
            risks.append(Risk(at, f"`git {sub} {option}` makes git run another command", True))
        elif _long(option, _GIT_WRITES) or _short_for(option, _GIT_SHORT_WRITES.get(sub, "")):
            risks.append(Risk(at, f"`git {sub} {option}` writes a file", False))
    return risks


def _short_for(option: str, letters: str) -> bool:
    return bool(letters) and _short(option, letters)


def _find(name: str, args: Sequence[str]) -> list[Risk]:
    risks: list[Risk] = []
    for index, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            risks.append(Risk(index, f"`find {arg}` runs a command", True))
        elif arg in ("-delete", "-fprint", "-fprint0", "-fprintf", "-fls"):
            risks.append(Risk(index, f"`find {arg}` deletes or writes files", False))
    return risks


def _sed(name: str, args: Sequence[str]) -> list[Risk]:
    risks: list[Risk] = []
    scripts: list[tuple[int, str]] = []
    sandboxed = "--sandbox" in args
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            break
        if arg in ("-e", "--expression") and index + 1 < len(args):
            scripts.append((index + 1, args[index + 1]))
            index += 2
            continue
        if arg.startswith("--expression="):
            scripts.append((index, arg.partition("=")[2]))
        elif arg in ("-f", "--file") or arg.startswith("--file="):
            risks.append(Risk(index, f"`{name} {arg}` runs a script Membrane cannot read", True))
        elif arg.startswith("--in-place") or (
            arg.startswith("-") and not arg.startswith("--") and "i" in arg[1:]
        ):
            risks.append(Risk(index, f"`{name} {arg}` rewrites files in place", False))
        elif (
            arg.startswith("-")
            and not arg.startswith("--")
            and arg.endswith("e")
            and index + 1 < len(args)
        ):
            scripts.append((index + 1, args[index + 1]))
            index += 2
            continue
        index += 1
    if not scripts:
        first = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
        if first is not None:
            scripts.append((first, args[first]))
    for at, script in scripts if not sandboxed else ():
        found = _sed_script(script)
        if found is not None:
            reason, runs = found
            risks.append(Risk(at, f"the sed script {reason}", runs))
    return risks


def _sed_script(script: str) -> tuple[str, bool] | None:
    """Whether a sed script runs a command (``e``, ``s///e``) or writes a file (``w``,
    ``W``, ``s///w``); a script this reader loses its way in counts as running one."""
    text, index = script, 0
    while index < len(text):
        char = text[index]
        if char in " \t\n;{}!" or char.isdigit() or char in "$,~+":
            index += 1
            continue
        if char in "/\\":
            delimiter = text[index + 1] if char == "\\" and index + 1 < len(text) else "/"
            index = _past(text, index + (2 if char == "\\" else 1), delimiter)
            while index < len(text) and text[index] in "IM":
                index += 1
            continue
        if char == "e":
            return "runs a command (`e`)", True
        if char in "wW":
            return "writes a file (`w`)", False
        if char in "sy":
            if index + 1 >= len(text):
                return "cannot be read", True
            delimiter = text[index + 1]
            index = _past(text, _past(text, index + 2, delimiter), delimiter)
            flags = re.match(r"[^;\n}]*", text[index:])
            tail = flags.group() if flags else ""
            if char == "s" and "e" in tail.split("w")[0]:
                return "runs its replacement as a command (`s///e`)", True
            if char == "s" and "w" in tail:
                return "writes a file (`s///w`)", False
            index += len(tail)
            continue
        if char in "aicrRbtT:#":
            end = text.find("\n", index)
            index = len(text) if end == -1 else end
            continue
        if char in "dDgGhHlnNpPqQxzF=":
            index += 1
            continue
        return "cannot be read", True
    return None


def _past(text: str, index: int, delimiter: str) -> int:
    """The index after the next unescaped ``delimiter`` from ``index``."""
    while index < len(text) and text[index] != delimiter:
        index += 2 if text[index] == "\\" else 1
    return index + 1


_AWK_VALUES: Final = frozenset({"-F", "-v", "--field-separator", "--assign"})
#: Options that load a program file or extension (gawk's ``-i``, ``-l``, ``-E``).
_AWK_CODE: Final = _names("-f --file -i --include -l --load -E --exec")


def _awk(name: str, args: Sequence[str]) -> list[Risk]:
    risks: list[Risk] = []
    sandboxed = "--sandbox" in args or "-S" in args
    script_at: int | None = None
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            script_at = index + 1 if index + 1 < len(args) else None
            break
        if arg in _AWK_VALUES:
            index += 2
            continue
        if arg.split("=")[0] in _AWK_CODE or arg.startswith(("-f", "-l", "-E", "-i")):
            risks.append(Risk(index, f"`{name} {arg}` runs code Membrane cannot read", True))
            script_at = -1
        elif not arg.startswith("-"):
            script_at = index if script_at is None else script_at
            break
        index += 1
    if script_at is not None and script_at >= 0 and not sandboxed:
        script = args[script_at]
        if re.search(r"\bsystem\s*\(|(?<!\|)\|(?!\|)|@load", script):
            risks.append(Risk(script_at, "the awk program runs commands", True))
        elif re.search(r"\bprintf?\b[^;{}\n]*>", script):
            risks.append(Risk(script_at, "the awk program writes files", False))
    return risks


_Table = Callable[[str, Sequence[str]], list[Risk]]


def _flags(runs: dict[str, str], writes: dict[str, str], *, plus: bool = False) -> _Table:
    """A table from long options and short letters, for a program that runs (``runs``) or
    writes (``writes``) through them."""

    def table(name: str, args: Sequence[str]) -> list[Risk]:
        risks: list[Risk] = []
        for index, option, _ in _options(args):
            for kind, spec in (("runs", runs), ("writes", writes)):
                longs = tuple(o for o in spec.get("long", "").split())
                if _long(option, longs) or _short_for(option, spec.get("short", "")):
                    verb = "run another command" if kind == "runs" else "write a file"
                    risks.append(Risk(index, f"`{name} {option}` makes it {verb}", kind == "runs"))
                    break
        if plus:
            for index, arg in enumerate(args):
                if arg.startswith("+"):
                    risks.append(Risk(index, f"`{name} {arg}` runs a command at start", True))
        return risks

    return table


def _tar(name: str, args: Sequence[str]) -> list[Risk]:
    risks = _TAR(name, args)
    if args and not args[0].startswith("-") and any(c in args[0] for c in "IF"):
        risks.append(Risk(0, f"`{name} {args[0]}` makes it run another command", True))
    return risks


_TAR = _flags(
    {"long": "--to-command --checkpoint-action --use-compress-program --rsh-command "
             "--info-script --new-volume-script", "short": "IF"},
    {"long": "--remove-files"},
)  # fmt: skip
_TABLES: Mapping[str, _Table] = {
    "git": _git,
    "find": _find,
    "sed": _sed,
    "gsed": _sed,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "nawk": _awk,
    "tar": _tar,
    "gtar": _tar,
    "rsync": _flags({"long": "--rsh --rsync-path", "short": "e"},
                    {"long": "--remove-source-files --log-file --write-batch "
                             "--only-write-batch"}),
    "sort": _flags({"long": "--compress-program"}, {"long": "--output", "short": "o"}),
    "rg": _flags({"long": "--pre"}, {}),
    "fd": _flags({"long": "--exec --exec-batch", "short": "xX"}, {}),
    "fdfind": _flags({"long": "--exec --exec-batch", "short": "xX"}, {}),
    "zip": _flags({"long": "--unzip-command", "short": "T"}, {"long": "--move", "short": "m"}),
    "less": _flags({}, {"long": "--log-file --LOG-FILE", "short": "oO"}, plus=True),
    "more": _flags({}, {}, plus=True),
    "man": _flags({"long": "--pager --html", "short": "PH"}, {}),
    "curl": _flags({"long": "--config", "short": "K"},
                   {"long": "--output --remote-name --output-dir --dump-header --cookie-jar "
                            "--trace --trace-ascii --libcurl --stderr --etag-save",
                    "short": "oODc"}),
    "wget": _flags({"long": "--execute --config", "short": "e"},
                   {"long": "--output-document --output-file --append-output "
                            "--directory-prefix", "short": "OoaP"}),
    "scp": _flags({"short": "SoF"}, {}),
}  # fmt: skip


_COMPRESSORS: Final = _names(
    "gzip gunzip bzip2 bunzip2 xz unxz lzma unlzma lzip compress uncompress pigz pbzip2"
)
_KEEPING: Final = frozenset({"-k", "--keep", "-c", "--stdout", "--to-stdout", "-t", "--test",
                             "-l", "--list", "-h", "--help", "-V", "--version"})  # fmt: skip


def deletes(name: str, args: Sequence[str]) -> bool:
    """Whether ``name args`` deletes (or moves away) files it names, other than by ``rm``."""
    if name in DELETERS or name == "mv":
        return name != "shred" or any(a == "--remove" or _short(a, "u") for a in args)
    if name in _COMPRESSORS:
        return not any(a in _KEEPING or _short(a, "kctl") for a in args)
    if name in ("zstd", "lz4"):
        return "--rm" in args
    if name == "find":
        return "-delete" in args
    if name == "git":
        subcommand = next((a for a in args if not a.startswith("-")), "")
        return subcommand in ("clean", "rm")
    if name in ("tar", "gtar"):
        return any(a.startswith("--remove-f") for a in args)
    if name == "zip":
        return any(a == "--move" or _short(a, "m") for a in args)
    if name == "rsync":
        return any(a.startswith(("--remove-source", "--remove-sent", "--del")) for a in args)
    return False
