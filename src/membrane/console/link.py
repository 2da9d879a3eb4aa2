"""The console's one connection to the machine runtime, and what it keeps from it.

The console is a client of ``membrane serve`` like any other: it connects with the role the
settings give it (``console_role``), registers the project, subscribes to the project's events
and says it answers ``approval/request`` for the runs it starts. What the runtime refuses that
role, the console cannot do either; the two things it does on its own side, saving a
definition file and answering an approval, need a role whose view holds ``Write``
(``may_write``).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from membrane.console.tree import RunTree
from membrane.errors import CallerRefused, UnknownApproval
from membrane.json_types import JSONDict
from membrane.runtime.events import TERMINAL_KINDS
from membrane.tools.permissions import ApprovalRequest

__all__ = ["Approval", "RuntimeLink", "Session"]

#: The tool a role must see for the console to write files or answer approvals for it.
WRITE_TOOL = "Write"


class Session(Protocol):
    """What the console needs of a project session (``membrane.cli.backend.ProjectSession``)."""

    project: Path
    caller: JSONDict
    project_id: str
    runtime_info: JSONDict

    #: The connection: ``request`` and, for ``events/event``, ``notifications``.
    @property
    def client(self) -> Any: ...

    async def call(self, method: str, params: JSONDict | None = None) -> Any: ...


@dataclass
class Approval:
    """A call an ``ask`` rule holds until the console's user answers."""

    id: int
    request: ApprovalRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    allow: bool = False
    reason: str = ""


@dataclass
class RuntimeLink:
    """The session, the tree kept from its events, the approvals waiting for an answer and the
    listeners of the live pages (each gets a message per change)."""

    session: Session | None = None
    tree: RunTree = field(default_factory=RunTree)
    pending: dict[int, Approval] = field(default_factory=dict)
    answered: list[Approval] = field(default_factory=list)
    tools: tuple[str, ...] = ()
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _listeners: list[MemoryObjectSendStream[str]] = field(default_factory=list)

    # -- the connection ------------------------------------------------------------------

    def use(self) -> Session:
        if self.session is None:
            raise CallerRefused("the console is not connected to the runtime")
        return self.session

    async def attach(self, session: Session) -> None:
        """Take ``session``: read the role's view, subscribe to events, seed the tree with the
        stored runs."""
        self.session = session
        actions = await session.call("actions/list")
        self.tools = tuple(str(a["name"]) for a in actions["actions"])
        await session.call("events/subscribe")
        after: str | None = None
        while True:
            params: JSONDict = {"stored": True, "limit": 1000}
            if after is not None:
                params["after"] = after
            page = await session.call("runs/list", params)
            for run in page["runs"]:
                self.tree.seed(run)
            after = page.get("next")
            if after is None:
                break

    async def pump(self) -> None:
        """Fold the runtime's events into the tree and tell the live pages, until the
        connection ends."""
        client = self.use().client
        async for note in client.notifications:
            if note.method != "events/event":
                continue
            event = note.params.get("event")
            if not isinstance(event, Mapping):
                continue
            if self.tree.apply(event) is not None:
                self.notify("tree")
            if event.get("kind") in TERMINAL_KINDS:
                self.expire(str(event.get("run_id")))

    # -- rights --------------------------------------------------------------------------

    @property
    def role(self) -> str | None:
        role = (self.session.caller if self.session else {}).get("role")
        return role if isinstance(role, str) else None

    @property
    def may_write(self) -> bool:
        return WRITE_TOOL in self.tools

    def require_write(self, what: str) -> None:
        if not self.may_write:
            raise CallerRefused(
                f"the console's role ({self.role or 'none'}) may not {what}: its view has no "
                f"{WRITE_TOOL}; set console_role in the settings to a role that allows it",
                role=self.role,
            )

    # -- live pages ----------------------------------------------------------------------

    def notify(self, topic: str) -> None:
        for send in list(self._listeners):
            try:
                send.send_nowait(topic)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._listeners.remove(send)

    async def listen(self) -> AsyncIterator[str]:
        """The topics that changed (``tree``, ``inbox``), from now on."""
        send, receive = anyio.create_memory_object_stream[str](256)
        self._listeners.append(send)
        try:
            async with receive:
                async for topic in receive:
                    yield topic
        finally:
            if send in self._listeners:
                self._listeners.remove(send)
            send.close()

    # -- approvals -----------------------------------------------------------------------

    async def approve(self, request: ApprovalRequest) -> bool:
        """The approver the session answers ``approval/request`` with: the call waits in the
        inbox until the page answers it (or the runtime's approval timeout ends the wait)."""
        approval = Approval(id=next(self._ids), request=request)
        self.pending[approval.id] = approval
        self.notify("inbox")
        try:
            await approval.answered.wait()
        finally:
            self.pending.pop(approval.id, None)
            self.notify("inbox")
        return approval.allow

    def expire(self, run_id: str) -> None:
        """Drop the approvals of a run that ended (stopped while it waited): nothing waits for
        them any more, so the inbox no longer offers them."""
        for approval in [a for a in self.pending.values() if a.request.run_id == run_id]:
            self.pending.pop(approval.id, None)
            approval.answered.set()  # its wait ends with a refusal no one reads

    def answer(self, approval_id: int, *, allow: bool, reason: str) -> Approval:
        self.require_write("answer approvals")
        approval = self.pending.get(approval_id)
        if approval is None:
            raise UnknownApproval(
                f"no approval {approval_id} is waiting (answered, or its run gave up waiting)",
                approval=approval_id,
            )
        approval.allow, approval.reason = allow, reason
        self.answered.insert(0, approval)
        del self.answered[50:]
        approval.answered.set()
        return approval
