"""``ask`` over the socket: the client that started a run answers the calls its rules hold.

A client says in ``initialize`` that it can answer (``capabilities: {"approval": true}``).
When a run it started (``runs/start``, ``runs/resume``) or any child below that run hits an
``ask`` permission rule (or a command hook's ``ask``), the server sends that connection the
JSON-RPC request::

    {"jsonrpc": "2.0", "id": "approval-1", "method": "approval/request",
     "params": {"runId": "...", "agent": "...", "tool": "Bash", "arguments": {...},
                "rule": "Bash(git push:*)", "subject": "git push origin main"}}

and the call waits for the reply ``{"decision": "allow"}`` (anything else, ``deny`` included, is a
refusal: ``tool-call-denied``). No capable client, a client that has gone, an error reply or no
reply within the server's approval timeout (``membrane serve --approval-timeout``, default
``APPROVAL_TIMEOUT``, 120 s) is ``approval-unavailable``: a call no one can approve never runs.

The answering client travels with the run in a context variable set around its start, as the
run's model does (``membrane.server.host``): every child the run starts inherits it, and a run
that another client started never reaches this one.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Final

import anyio

from membrane.errors import ApprovalUnavailable
from membrane.json_types import JSONDict, JSONValue
from membrane.limits import APPROVAL_TIMEOUT
from membrane.server.connection import Peer
from membrane.server.framing import Response, encode
from membrane.tools.permissions import ApprovalRequest, Approver

__all__ = [
    "APPROVAL_CAPABILITY",
    "APPROVAL_METHOD",
    "APPROVAL_TIMEOUT",
    "ClientApprover",
    "answered_by",
    "answering",
    "client_approver",
    "socket_approver",
]

APPROVAL_METHOD: Final = "approval/request"
#: The ``initialize`` capability a client sets to answer ``approval/request``.
APPROVAL_CAPABILITY: Final = "approval"
_STATE_KEY: Final = "approver"

_ANSWERING: ContextVar[ClientApprover | None] = ContextVar("membrane_server_approver", default=None)


class ClientApprover:
    """Sends ``approval/request`` to one connection and waits for its answer."""

    __slots__ = ("_conn", "_ids", "_waiting", "timeout")

    def __init__(self, conn: Peer, *, timeout: float = APPROVAL_TIMEOUT) -> None:
        self._conn = conn
        self._ids = itertools.count(1)
        self._waiting: dict[str, tuple[anyio.Event, list[Response]]] = {}
        self.timeout = timeout
        conn.on_response = self._deliver

    def _deliver(self, response: Response) -> None:
        waiting = self._waiting.get(str(response.id))
        if waiting is not None:
            waiting[1].append(response)
            waiting[0].set()

    async def __call__(self, request: ApprovalRequest) -> bool:
        request_id = f"approval-{next(self._ids)}"
        arrived = anyio.Event()
        box: list[Response] = []
        self._waiting[request_id] = (arrived, box)
        params: JSONDict = {
            "runId": request.run_id,
            "agent": request.agent,
            "tool": request.tool,
            "arguments": dict(request.arguments),
            "rule": request.reason,
            "subject": request.subject,
        }
        try:
            await self._conn.send(
                encode(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "method": APPROVAL_METHOD,
                        "params": params,
                    }
                )
            )
            with anyio.move_on_after(self.timeout):
                async with anyio.create_task_group() as group:

                    async def gone() -> None:
                        await self._conn.gone.wait()
                        group.cancel_scope.cancel()

                    async def answer() -> None:
                        await arrived.wait()
                        group.cancel_scope.cancel()

                    group.start_soon(gone)
                    group.start_soon(answer)
        finally:
            self._waiting.pop(request_id, None)
        if not box:
            why = (
                "the client that started the run has disconnected"
                if self._conn.gone.is_set()
                else f"the client that started the run did not answer within {self.timeout:g} s"
            )
            raise _unavailable(request, why)
        response = box[0]
        result = response.result
        if response.error is not None or not isinstance(result, dict):
            raise _unavailable(request, "the client's answer was an error, not a decision")
        return result.get("decision") == "allow"


def client_approver(
    conn: Peer, capabilities: object, *, timeout: float = APPROVAL_TIMEOUT
) -> ClientApprover | None:
    """The approver of ``conn`` when its ``initialize`` capabilities say it can answer (kept on
    the connection), waiting ``timeout`` seconds for each answer; else ``None``."""
    if not isinstance(capabilities, dict) or capabilities.get(APPROVAL_CAPABILITY) is not True:
        conn.state.pop(_STATE_KEY, None)
        return None
    approver = ClientApprover(conn, timeout=timeout)
    conn.state[_STATE_KEY] = approver
    return approver


@contextlib.contextmanager
def answered_by(conn: Peer) -> Iterator[None]:
    """Around a start on ``conn``: the runs it starts ask ``conn`` (when it can answer)."""
    found = conn.state.get(_STATE_KEY)
    token = _ANSWERING.set(found if isinstance(found, ClientApprover) else None)
    try:
        yield
    finally:
        _ANSWERING.reset(token)


async def socket_approver(request: ApprovalRequest) -> bool:
    """A served project's approver: the client that started the run's tree answers."""
    approver = _ANSWERING.get()
    if approver is None:
        raise _unavailable(
            request, "no client that can answer approvals started this run (see approval/request)"
        )
    return await approver(request)


def answering(approver: Approver) -> Callable[[JSONDict], Awaitable[JSONValue]]:
    """The client side: a handler for ``approval/request`` that puts each request to
    ``approver`` (``membrane run``'s terminal prompt) and answers with its decision."""

    async def handle(params: JSONDict) -> JSONValue:
        arguments = params.get("arguments")
        subject, run_id = params.get("subject"), params.get("runId")
        request = ApprovalRequest(
            tool=str(params.get("tool") or ""),
            arguments=arguments if isinstance(arguments, dict) else {},
            subject=subject if isinstance(subject, str) else None,
            reason=str(params.get("rule") or "an ask rule"),
            agent=str(params.get("agent") or "main"),
            run_id=run_id if isinstance(run_id, str) else None,
        )
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return {"decision": "allow" if answer is True else "deny"}

    return handle


def _unavailable(request: ApprovalRequest, why: str) -> ApprovalUnavailable:
    subject = f" (`{request.subject}`)" if request.subject else ""
    return ApprovalUnavailable(
        f"the call to {request.tool}{subject} needs approval ({request.reason}), and {why}; "
        "use a command or path the rules allow",
        tool=request.tool,
        rule=request.reason,
        subject=request.subject,
    )
