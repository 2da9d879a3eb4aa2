"""``AcpProvider``: a child is an external agent that speaks the Agent Client Protocol.

Membrane is the ACP *client*: ``run()`` starts the agent process (``command``), initializes
it, opens a session in the child's checkout (``session/new`` with ``cwd``), sends the task as
one prompt and returns the agent's message text as the child's result. The agent's session
updates become the child's events while it works: a tool call it starts is a ``tool_call``
event, its end a ``tool_result`` event, and its message and thought chunks ``agent_update``
events.

The child's MCP servers go to the agent in ``session/new`` (``mcpServers``), for it to connect
to itself: only the mounted servers whose every tool the child's view holds
(``membrane.runtime.providers.acp_mcp``); the rest are left out, and an ``agent_update`` event
(``kind: mcp_servers``) says which and why.

The agent's requests to the client are answered through the child's own view, the one its
definition resolved to, exactly as the child's tool calls would be: ``fs/read_text_file`` runs
``Read``, ``fs/write_text_file`` runs ``Write`` and ``terminal/create`` runs ``Bash`` (with its
checkout rules and, where the machine has one, its OS sandbox). A request whose tool the view
does not hold, or that the tool refuses (a path outside the checkout, a control path), gets a
JSON-RPC error carrying the Membrane error code; the agent cannot touch what the child could
not. Permission requests are answered with the first "reject" option the agent offers.

Honest capabilities (seed 001): the agent builds its own prompt and chooses its own tools
inside its process, so Membrane cannot install a persona, an in-process tool filter, count
delegation depth inside it or check a structured answer. ``persona``, ``tool_filter``,
``depth_limit`` and ``structured_output`` are ``False`` (the deployment sets
``max_depth = "provider-managed"``), so a request naming one fails with
``unsupported-capability`` before any process starts. Of the resolved prompt only the task
reaches the agent. Steering, notices and resume are not supported.

Needs the optional extra ``membrane[acp]`` (``agent-client-protocol``).
"""

from __future__ import annotations

import contextlib
import itertools
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import anyio
from anyio.abc import TaskGroup

from membrane._extras import require
from membrane.config.values import McpServerSpec
from membrane.errors import InvalidRequest, MembraneError
from membrane.json_types import JSONDict, JSONObject
from membrane.runtime.provider import (
    ChildOutcome,
    ChildSpec,
    SetupCallback,
    SubagentCapabilities,
)
from membrane.runtime.providers.acp_mcp import acp_mcp_servers
from membrane.runtime.providers.external import ExternalChild, check_timeout, error_outcome
from membrane.sandbox import WRITING_TOOLS, Sandbox, SandboxPolicy
from membrane.sandbox.boundary import program_files
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext

__all__ = ["AcpProvider"]

#: JSON-RPC error code for a request Membrane refuses (the server-error range).
REFUSED = -32000
_PAGE = 2000


def _acp() -> Any:
    return require("acp", extra="acp", package="agent-client-protocol", feature="the ACP provider")


class AcpProvider:
    """Runs each child as the ACP agent ``command`` (argv, no shell).

    ``env`` is added to the agent's environment; ``stderr_log`` receives its standard error
    (appended), which otherwise goes nowhere; ``timeout`` bounds a whole run, in seconds.
    ``mcp_servers`` are the deployment's mounted MCP servers (``settings.mcp_servers``): those
    a child's view holds whole are given to its agent in ``session/new``.
    ``sandbox`` is the OS boundary the agent process itself runs under (default: the strongest
    this machine offers, network off): it may write its checkout (minus the control paths)
    only when the child's view holds ``Write`` or ``Edit``, and a private temporary folder;
    ``SandboxPolicy("guard")`` runs it with Membrane's own permissions.
    """

    capabilities = SubagentCapabilities(
        persona=False, tool_filter=False, depth_limit=False, structured_output=False
    )

    def __init__(
        self,
        command: Sequence[str],
        *,
        name: str = "acp",
        env: Mapping[str, str] | None = None,
        stderr_log: Path | None = None,
        timeout: float | None = None,
        mcp_servers: Mapping[str, McpServerSpec] | None = None,
        sandbox: SandboxPolicy | None = None,
    ) -> None:
        if isinstance(command, str) or not command or not all(isinstance(p, str) for p in command):
            raise InvalidRequest(
                f"command must be a non-empty list of argv parts, got {command!r}",
                field="command",
            )
        self.command = tuple(command)
        self.name = name
        self.env = dict(env or {})
        self.stderr_log = stderr_log
        self.timeout = check_timeout(timeout)
        self.mcp_servers = dict(mcp_servers or {})
        self.sandbox = sandbox if sandbox is not None else SandboxPolicy()

    async def create(self, request: ChildSpec, setup: SetupCallback) -> _AcpChild:
        _acp()  # fail now, before publication, when the extra is missing
        scope = Scope(request.registry, name=f"agent:{request.run_id}")
        setup(scope)
        sandbox = Sandbox.for_checkout(
            self.sandbox.for_agent(
                network=None if request.network else False, read_paths=request.read_paths
            ),
            request.cwd or Path.cwd(),
            agent=request.agent,
            writes=(
                bool(WRITING_TOOLS & set(scope.view().names))
                if request.writes is None
                else request.writes
            ),
            reachable=program_files(self.command),
        )
        sandbox.prepare()
        # A hard link to a file elsewhere refuses the child at its start (hard-link-refused).
        await anyio.to_thread.run_sync(sandbox.refuse_outside_links)
        return _AcpChild(self, scope, request, sandbox)


class _AcpChild(ExternalChild):
    def __init__(
        self, provider: AcpProvider, scope: Scope, spec: ChildSpec, sandbox: Sandbox
    ) -> None:
        super().__init__(scope, sandbox)
        self._provider = provider
        self._spec = spec

    async def run(self) -> ChildOutcome:
        if self._stopped:
            return ChildOutcome(status="stopped")
        acp = _acp()
        spec = self._spec
        cwd = spec.cwd or Path.cwd()
        env = {**self._provider.env, **spec.env, "MEMBRANE_RUN_ID": spec.run_id}
        with contextlib.ExitStack() as files:
            stderr = self._stderr(files)
            with anyio.CancelScope() as cancel:
                self._cancel = cancel
                if self._stopped:
                    cancel.cancel()
                with anyio.move_on_after(self._provider.timeout) as deadline:
                    async with anyio.create_task_group() as group:
                        client = _Client(self._scope, spec, group)
                        try:
                            return await self._converse(acp, client, cwd, env, stderr)
                        finally:
                            group.cancel_scope.cancel()
                if deadline.cancelled_caught:
                    return error_outcome(
                        f"the ACP agent did not finish within {self._provider.timeout} s",
                        code="run-error",
                    )
            self._cancel = None
        return ChildOutcome(status="stopped")

    def _stderr(self, files: contextlib.ExitStack) -> int | IO[str]:
        log = self._provider.stderr_log
        if log is None:
            return subprocess.DEVNULL
        log.parent.mkdir(parents=True, exist_ok=True)
        return files.enter_context(log.open("a", encoding="utf-8"))

    async def _converse(
        self, acp: Any, client: _Client, cwd: Path, env: dict[str, str], stderr: int | IO[str]
    ) -> ChildOutcome:
        with self.sandboxed("membrane-acp-") as tmp:
            argv = self._sandbox.command(self._provider.command, cwd=cwd, tmp=tmp)
            return await self._spawned(acp, client, argv, cwd, env, stderr)

    async def _spawned(
        self,
        acp: Any,
        client: _Client,
        argv: Sequence[str],
        cwd: Path,
        env: dict[str, str],
        stderr: int | IO[str],
    ) -> ChildOutcome:
        spec = self._spec
        program, *args = argv
        fd = stderr if isinstance(stderr, int) else stderr.fileno()
        try:
            spawned = acp.spawn_agent_process(
                lambda agent: client,
                program,
                *args,
                env=env,
                cwd=str(cwd),
                transport_kwargs={"stderr": fd},
            )
            async with spawned as (conn, process):
                self.pid = process.pid
                schema = acp.schema
                started = await conn.initialize(
                    protocol_version=acp.PROTOCOL_VERSION,
                    client_capabilities=schema.ClientCapabilities(
                        fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True),
                        terminal=True,
                    ),
                    client_info=schema.Implementation(name="membrane", version="0"),
                )
                servers = self._mcp_servers(schema, started)
                session = await conn.new_session(cwd=str(cwd), mcp_servers=servers)
                spec.emit("turn", {"turn": 1})
                response = await conn.prompt(
                    session_id=session.session_id, prompt=[acp.text_block(spec.task)]
                )
        except OSError as exc:
            return error_outcome(
                f"cannot run {self._provider.command[0]!r}: {exc}", code="tool-failed"
            )
        except Exception as exc:  # the agent's own failure or a broken connection
            if isinstance(exc, MembraneError):
                return error_outcome(exc.message, code=exc.code)
            return error_outcome(
                f"the ACP agent failed: {type(exc).__name__}: {exc}", code="run-error"
            )
        reason = str(getattr(response, "stop_reason", "end_turn"))
        text = "".join(client.text).strip()
        if reason in ("end_turn", "max_tokens", "max_turn_requests"):
            return ChildOutcome(status="completed", text=text, turns=1)
        if reason == "cancelled":
            return ChildOutcome(status="stopped", text=text, turns=1)
        return error_outcome(f"the ACP agent stopped: {reason}", code="run-error", text=text)

    def _mcp_servers(self, schema: Any, started: Any) -> list[Any]:
        """The ``mcpServers`` of ``session/new``; what is left out is reported as an event."""
        capabilities = getattr(
            getattr(started, "agent_capabilities", None), "mcp_capabilities", None
        )
        http = getattr(capabilities, "http", False) is True
        spec = self._spec
        servers, left_out = acp_mcp_servers(
            schema, self._scope, spec.extensions, self._provider.mcp_servers, http=http
        )
        if servers or left_out:
            given = [str(server.name) for server in servers]
            spec.emit(
                "agent_update", {"kind": "mcp_servers", "servers": given, "left_out": left_out}
            )
        return servers


class _Terminal:
    def __init__(self) -> None:
        self.done = anyio.Event()
        self.output = ""
        self.exit_code: int | None = None
        self.signal: str | None = None
        self.scope = anyio.CancelScope()


class _Client:
    """The ACP client side for one child: updates become events, requests go through the
    child's view."""

    def __init__(self, scope: Scope, spec: ChildSpec, group: TaskGroup) -> None:
        self._scope = scope
        self._emit = spec.emit
        self._context = ToolContext(agent=spec.agent, run_id=spec.run_id, cwd=spec.cwd)
        self._group = group
        self._terminals: dict[str, _Terminal] = {}
        self._ids = itertools.count(1)
        self._titles: dict[str, str] = {}
        self.text: list[str] = []

    def on_connect(self, conn: object) -> None:
        return None

    async def _call(self, name: str, arguments: JSONObject) -> object:
        try:
            return await self._scope.view().call(name, arguments, self._context)
        except MembraneError as exc:
            raise _acp().RequestError(REFUSED, exc.message, {"code": exc.code}) from exc

    # -- session updates ----------------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = getattr(update, "session_update", "")
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            text = str(getattr(getattr(update, "content", None), "text", "") or "")
            if kind == "agent_message_chunk":
                self.text.append(text)
            self._emit("agent_update", {"kind": kind, "text": text})
        elif kind == "tool_call":
            call_id = str(getattr(update, "tool_call_id", ""))
            title = str(getattr(update, "title", "") or "")
            self._titles[call_id] = title
            self._emit("tool_call", {"name": title, "id": call_id, "source": "acp"})
        elif kind == "tool_call_update":
            status = getattr(update, "status", None)
            if status in ("completed", "failed"):
                call_id = str(getattr(update, "tool_call_id", ""))
                name = self._titles.get(call_id, "")
                failed = status == "failed"
                self._emit("tool_result", {"name": name, "id": call_id, "is_error": failed})
        elif kind:
            self._emit("agent_update", {"kind": str(kind)})

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        schema = _acp().schema
        reject = next((o for o in options if str(o.kind).startswith("reject")), None)
        if reject is None:
            return schema.RequestPermissionResponse(
                outcome=schema.DeniedOutcome(outcome="cancelled")
            )
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=reject.option_id)
        )

    # -- files --------------------------------------------------------------------------------

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
        lines: list[str] = []
        offset = line or 1
        while True:
            want = _PAGE if limit is None else min(_PAGE, limit - len(lines))
            page = await self._call("Read", {"file_path": path, "offset": offset, "limit": want})
            numbered, more = _numbered_lines(str(page))
            lines.extend(numbered)
            if not more or not numbered or (limit is not None and len(lines) >= limit):
                break
            offset += len(numbered)
        return _acp().schema.ReadTextFileResponse(content="\n".join(lines))

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        await self._call("Write", {"file_path": path, "content": content})
        return _acp().schema.WriteTextFileResponse()

    # -- terminals ----------------------------------------------------------------------------

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[Any] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
        if "Bash" not in self._scope.view():
            await self._call("Bash", {"command": command})  # raises the view's refusal
        line = shlex.join([command, *(args or [])])
        assignments = " ".join(
            f"{variable.name}={shlex.quote(str(variable.value))}" for variable in env or ()
        )
        if assignments:
            line = f"{assignments} {line}"
        if cwd:
            line = f"cd {shlex.quote(cwd)} && {line}"
        terminal_id = f"term-{next(self._ids)}"
        terminal = self._terminals[terminal_id] = _Terminal()
        self._group.start_soon(self._run_terminal, terminal, line, output_byte_limit)
        return _acp().schema.CreateTerminalResponse(terminal_id=terminal_id)

    async def _run_terminal(self, terminal: _Terminal, line: str, limit: int | None) -> None:
        try:
            with terminal.scope:
                result = await self._call("Bash", {"command": line})
                values: JSONDict = result if isinstance(result, dict) else {}
                out = f"{values.get('stdout', '')}{values.get('stderr', '')}"
                terminal.output = out if limit is None else out[-limit:]
                code = values.get("exit_code")
                if isinstance(code, int) and code < 0:
                    terminal.signal = f"signal {-code}"
                elif isinstance(code, int):
                    terminal.exit_code = code
            if terminal.scope.cancelled_caught:
                terminal.signal = "killed"
        except Exception as exc:  # the view refused the command (its code is in the data)
            data = getattr(exc, "data", None)
            code = data.get("code") if isinstance(data, dict) else None
            terminal.output = f"{code or 'refused'}: {exc}"
            terminal.exit_code = 126
        finally:
            terminal.done.set()

    def _terminal(self, terminal_id: str) -> _Terminal:
        terminal = self._terminals.get(terminal_id)
        if terminal is None:
            raise _acp().RequestError(REFUSED, f"no terminal {terminal_id!r}", None)
        return terminal

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        terminal = self._terminal(terminal_id)
        schema = _acp().schema
        status = None
        if terminal.done.is_set():
            status = schema.TerminalExitStatus(exit_code=terminal.exit_code, signal=terminal.signal)
        return schema.TerminalOutputResponse(
            output=terminal.output, truncated=False, exit_status=status
        )

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        terminal = self._terminal(terminal_id)
        await terminal.done.wait()
        return _acp().schema.WaitForTerminalExitResponse(
            exit_code=terminal.exit_code, signal=terminal.signal
        )

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self._terminal(terminal_id).scope.cancel()
        return _acp().schema.KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self._terminal(terminal_id).scope.cancel()
        self._terminals.pop(terminal_id, None)
        return _acp().schema.ReleaseTerminalResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise _acp().RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def _numbered_lines(page: str) -> tuple[list[str], bool]:
    """The file lines of one ``Read`` page (its ``N<TAB>`` prefixes removed), and whether the
    page says there is more."""
    lines: list[str] = []
    more = False
    for entry in page.split("\n"):
        number, tab, rest = entry.partition("\t")
        if tab and number.strip().isdigit():
            lines.append(rest)
        elif entry.startswith("[showing lines") and "to continue" in entry:
            more = True
    return lines, more
