"""The ``Tool`` value: a name, a description, an input schema, an async handler and flags; and
the protocols of what checks and observes its calls (``ToolGate``, ``ToolObserver``; the rules
that implement them are ``membrane.tools.permissions``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from membrane.json_types import JSONObject

__all__ = [
    "Attachment",
    "ReadApproval",
    "Tool",
    "ToolContext",
    "ToolGate",
    "ToolHandler",
    "ToolLoader",
    "ToolObserver",
    "ToolOutput",
]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a handler knows about the call it serves.

    ``cwd`` is the checkout the calling agent works in; mutating built-in tools refuse
    paths outside it. ``read_only`` is set by the runtime for a child without ``Write`` and
    ``Edit``. ``extra`` carries host-specific values (never authority), of whatever
    type the host chose, so a handler narrows what it reads.

    ``session`` keys the caller's rate limits (default: the run, else the agent); ``env`` is
    added to the environment of every process a tool starts (a child's Bash gets the child's
    ``MEMBRANE_TOKEN`` this way).
    """

    agent: str = "main"
    run_id: str | None = None
    cwd: Path | None = None
    extra: Mapping[str, object] = field(default_factory=dict)
    #: The calling agent holds no ``Write`` or ``Edit``: its sandboxed commands may write
    #: nothing of the checkout, only their private temporary folder.
    read_only: bool = False
    session: str | None = None
    #: The caller's trusted identity: what its calls count under for a rate limit once the
    #: limiter holds ``rate_limit_sessions`` live sessions and none is ``session``'s (the
    #: owner's sessions share ``owner``); ``None``: such a call waits for a window to expire.
    rate_shared: str | None = None
    #: Variables the runtime gives every process the calling agent starts (``Bash``), on top
    #: of its own environment: ``MEMBRANE_CLI_PATH``, ``MEMBRANE_AGENT_SKILLS_DIRS``, ...
    env: Mapping[str, str] = field(default_factory=dict)
    #: Whether the calling agent's sandboxed commands may use the network, as its run's
    #: authority decided (``EffectiveAuthority.network``), whatever the tool's own policy
    #: says; ``None`` (a call outside any run): the tool's policy decides.
    network: bool | None = None
    #: The caller reads only inside its checkout: no read root, no system folder (a server
    #: caller in the ``external`` role, DESIGN rule 14).
    checkout_reads_only: bool = False
    #: The calling agent's own read roots (its definition's ``read_paths``, held under its
    #: ceiling): read by ``Read``, ``Glob``, ``Grep`` and its sandboxed commands, besides the
    #: checkout, the settings' roots and the system's folders.
    read_paths: tuple[Path, ...] = ()
    #: Asks the host about a built-in read (``Read``, ``Glob``, ``Grep``) of a path outside
    #: the read roots (the settings' ``read_outside = "ask"``); ``None``: such a read is
    #: refused (``path-outside-checkout``). See :data:`ReadApproval`.
    ask_read: ReadApproval | None = field(default=None, compare=False)
    #: The id of the model's tool call being served (set by the agent loop for each call).
    call_id: str | None = None


#: ``ask_read(tool, path, secret, context)``: ``path`` (real) lies outside the caller's read
#: roots, ``secret`` when it is (or lies in) a secret place or is a ``.env`` file. Returns
#: ``True`` once the host approved the read; ``False`` when the read may not be asked about
#: (it is refused as before); raises ``approval-unavailable`` or ``tool-call-denied`` when no
#: one can approve it or the host refused it.
ReadApproval = Callable[[str, Path, bool, ToolContext], Awaitable[bool]]


#: Takes the call's JSON arguments (already checked against ``input_schema``) and returns any
#: value: a string, or anything the view renders for the model.
ToolHandler = Callable[[JSONObject, ToolContext], Awaitable[object]]
#: Produces the full tool behind a deferred catalog entry; awaited once, on first use.
ToolLoader = Callable[[], Awaitable["Tool"]]


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool.

    ``origin`` is ``builtin``, ``extension:NAME``, ``mcp:SERVER`` or ``scope``.
    ``mutating`` tells guidance and checkout checks that the tool changes files or state.
    ``reserved`` tools (``run_code``) sit outside every filter; they are scope-local, made only
    by ``Scope.add_reserved`` (the registry refuses them, so no global tool passes a filter).
    ``deferred`` tools are known to the catalog but loaded on first use, as MCP/plugin tools are:
    when ``loader`` is set, the first call through a view awaits it and runs the tool it returns.
    ``requires`` names what the tool needs to work (a backend such as ``computer-use``): views
    hide it until the deployment provides each (``membrane.tools.requirements``), and a role
    shows it only to callers whose role has each as a permission. ``sequential`` tools never
    run beside another writing call of the same turn (``membrane.loop.overlap``).

    ``memo`` holds values derived from this exact object (wire schemas, the compiled argument
    validator, the loaded tool). It is not part of equality, and ``dataclasses.replace`` starts
    a fresh one, so a changed schema never reuses a stale derivation. Filling it by hand
    skips no check: registration trusts only the proof its own check left there.
    """

    name: str
    description: str
    input_schema: JSONObject
    handler: ToolHandler
    origin: str = "builtin"
    mutating: bool = False
    reserved: bool = False
    deferred: bool = False
    loader: ToolLoader | None = field(default=None, repr=False, compare=False)
    requires: frozenset[str] = frozenset()
    #: Never overlaps another call of its turn that writes (``membrane.loop.overlap``): the
    #: calls of one turn otherwise run concurrently.
    sequential: bool = False
    # Any: heterogeneous cached derivations, each read back at its own type by its one reader.
    memo: dict[str, Any] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )


@dataclass(frozen=True, slots=True)
class Attachment:
    """A binary part of a tool result (an image, audio, a blob): kept beside the text, never
    pasted into it. ``data`` is the decoded bytes."""

    mime_type: str
    data: bytes = field(repr=False)
    name: str | None = None


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool result with parts: ``text`` for the model, ``structured`` (any JSON value, or
    ``None``) and ``attachments``. The loop sends ``text`` (or, when empty, ``structured`` as
    JSON) as the tool message's content and keeps the attachments on the message."""

    text: str = ""
    structured: object = None
    attachments: tuple[Attachment, ...] = ()


@runtime_checkable
class ToolGate(Protocol):
    """Checks a call's arguments before its handler runs (``ToolView.call``); raises a
    ``MembraneError`` (``tool-call-denied``, ``approval-unavailable``) to refuse it."""

    async def check(self, tool: Tool, arguments: JSONObject, context: ToolContext) -> None: ...


@runtime_checkable
class ToolObserver(Protocol):
    """A ``ToolGate`` that also sees each call's result once its handler returned (a child's
    ``PostToolUse`` hooks): ``after`` returns the result the caller gets (the same, or with
    what the observer adds for the model)."""

    async def after(
        self, tool: Tool, arguments: JSONObject, context: ToolContext, result: object
    ) -> object: ...
