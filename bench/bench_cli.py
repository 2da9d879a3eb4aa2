"""CLI start: the CPU a command costs, against a typer + rich app and the bare interpreter,
in the same run.

``membrane --help``, ``membrane --version``, ``membrane agents list`` and
``membrane explain scout --json`` on a copy of ``examples/workspace`` (its own
``MEMBRANE_HOME``), each run 20 times as a fresh process, against two peers run as often: a
typer + rich app that does nothing but print its help (``PEER``: three commands, typer's rich
help) and ``python -c pass``. The figure is the median of the CPU (user + system) each child
process used, read from ``getrusage``; wall time would measure the machine's load.

Two byte-code caches: warm (every module's byte code is cached, as after the first run) and
cold (Membrane's own modules are compiled again in every run, as after an upgrade; the
libraries keep the byte code their installation compiled). Both run under one
``PYTHONPYCACHEPREFIX``, from which the cold runs delete Membrane's part before each run.

Goals: ``--help``, ``agents list`` and ``explain NAME --json`` with a warm cache at most 1.5x
the typer + rich app printing its help. The ratios to the bare interpreter and the cold figures
are printed for reference (their goals are retired: the typer + rich app is the baseline). Every
command and both peers run in turn, one sample each per round.

Each command's imports are counted too (modules in ``sys.modules`` when it ends, and how many of
them are Membrane's): an operation count, the same on every machine; with the size of those
Membrane modules' source and the CPU this process takes to compile it, which is what a cold
byte-code cache adds.

Run: ``.venv/bin/python bench/bench_cli.py``. ``CLI_RUNS=5`` takes fewer samples.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = int(os.environ.get("CLI_RUNS", "20"))
ROOT = Path(__file__).resolve().parents[1]
MEMBRANE = Path(sys.executable).parent / "membrane"
#: Each command, and its goal: at most so many times the peer it is measured against (``None``:
#: printed, no goal; the goal of ``--version`` against the bare interpreter is retired).
COMMANDS: tuple[tuple[str, list[str], str, float | None], ...] = (
    ("membrane --help", ["--help"], "typer", 1.5),
    ("membrane --version", ["--version"], "bare", None),
    ("membrane agents list", ["agents", "list"], "typer", 1.5),
    ("membrane explain scout --json", ["explain", "scout", "--json"], "typer", 1.5),
)
#: The typer + rich peer: an app that does nothing but print its (rich) help.
PEER = """
import typer

app = typer.Typer(help="An app that prints its help.")


@app.command()
def hello(name: str, loud: bool = False) -> None:
    \"\"\"Say hello.\"\"\"


@app.command()
def bye(name: str = "you") -> None:
    \"\"\"Say goodbye.\"\"\"


@app.command()
def wave() -> None:
    \"\"\"Wave.\"\"\"


app()
"""
#: Runs a command as ``membrane`` does and reports the modules it imported (and the source
#: files of Membrane's), on stderr.
PROBE = """
import json, sys
from membrane.cli.app import main
code = main(sys.argv[1:])
own = [m for n, m in list(sys.modules.items()) if n.split(".")[0] == "membrane"]
files = sorted({f for f in (getattr(m, "__file__", None) for m in own) if f})
print(json.dumps({"modules": sorted(sys.modules), "files": files}), file=sys.stderr)
sys.exit(code)
"""


def modules(args: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[int, int, list[str]]:
    """How many modules the command imports, how many of them are Membrane's, and the source
    files of those."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, check=True
    )
    report = json.loads(done.stderr.decode().strip().splitlines()[-1])
    names = report["modules"]
    own = sum(1 for name in names if name.split(".")[0] == "membrane")
    return len(names), own, report["files"]


def compile_cost(files: list[str]) -> tuple[int, float]:
    """The bytes of ``files`` and the median CPU seconds of compiling them all (what a cold
    byte-code cache adds to a command, besides writing the cache)."""
    sources = [(Path(file).read_bytes(), file) for file in files]
    samples = []
    for _ in range(5):
        start = time.process_time()
        for source, file in sources:
            compile(source, file, "exec", dont_inherit=True)
        samples.append(time.process_time() - start)
    return sum(len(source) for source, _ in sources), statistics.median(samples)


def cpu(
    commands: dict[str, list[str]], *, cwd: Path, env: dict[str, str], cold: bool
) -> dict[str, float]:
    """The median CPU seconds of each command over ``RUNS`` fresh processes, the commands run
    in turn (one sample of each, then the next round), so the machine's load moves all."""
    import membrane

    # Where the prefix keeps the byte code of Membrane's own modules.
    own = Path(env["PYTHONPYCACHEPREFIX"] + str(Path(membrane.__file__).resolve().parent))
    samples: dict[str, list[float]] = {key: [] for key in commands}
    for _ in range(RUNS):
        for key, command in commands.items():
            if cold:
                shutil.rmtree(own, ignore_errors=True)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=False)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()[-2000:]}")
            samples[key].append(
                after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
            )
    return {key: statistics.median(values) for key, values in samples.items()}


def main() -> None:
    with tempfile.TemporaryDirectory() as temp:
        workspace = Path(temp) / "workspace"
        shutil.copytree(ROOT / "examples" / "workspace", workspace)
        peer_app = Path(temp) / "peer_app.py"
        peer_app.write_text(PEER)
        env = {
            **os.environ,
            "MEMBRANE_HOME": str(Path(temp) / "home"),
            "PYTHONPYCACHEPREFIX": str(Path(temp) / "pycache"),
        }
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        peers = {
            "typer": ("typer + rich app --help", [sys.executable, str(peer_app), "--help"]),
            "bare": ("python -c pass", [sys.executable, "-c", "pass"]),
        }
        commands = {key: command for key, (_, command) in peers.items()}
        commands.update({label: [str(MEMBRANE), *args] for label, args, _, _ in COMMANDS})
        for command in commands.values():  # fill the byte-code and definition caches
            subprocess.run(command, cwd=workspace, env=env, capture_output=True, check=True)
        print("Imports (warm caches):")
        for label, args, _, _ in COMMANDS:
            modules(args, cwd=workspace, env=env)  # this interpreter's sys.path: fill its caches
            total, own, files = modules(args, cwd=workspace, env=env)
            size, seconds = compile_cost(files)
            print(
                f"  {label:<32} {total:>4} modules, {own:>3} of Membrane "
                f"({size // 1024} KB of source, {seconds * 1e3:.0f} ms to compile)"
            )
        goals = []
        for cache in ("warm", "cold"):
            cold = cache == "cold"
            measured = cpu(commands, cwd=workspace, env=env, cold=cold)
            base = {key: measured[key] for key in peers}
            print(f"\nByte-code cache {cache}:")
            for key, (label, _) in peers.items():
                print(f"  {label:<30} {base[key] * 1e3:>7.1f} ms of CPU")
            print(f"{'command':<32} {'CPU':>10} {'vs typer':>9} {'vs bare':>8}")
            for label, _, peer, target in COMMANDS:
                mine = measured[label]
                print(
                    f"{label:<32} {mine * 1e3:>7.1f} ms {mine / base['typer']:>8.2f}x "
                    f"{mine / base['bare']:>7.1f}x"
                )
                if cold or target is None:
                    continue  # the goals are the warm cache's
                ratio = mine / base[peer]
                verdict = "met" if ratio <= target else "missed"
                goals.append(
                    f"goal {label} CPU, byte-code cache warm: <= {target:g}x "
                    f"{peers[peer][0]}, measured {ratio:.2f}x ({verdict})"
                )
        print()
        for line in goals:
            print(line)


if __name__ == "__main__":
    main()
