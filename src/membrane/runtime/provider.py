"""The provider contract: what a transport can enforce, and what passes between it and the
runtime (``Provider``, ``ProviderChild``, ``ChildSpec``, ``ChildOutcome``, the setup callback).

A ``Provider`` is an execution transport (in-process, a child process, later ACP or Ray). It
advertises ``SubagentCapabilities`` truthfully, and ``check_capabilities`` rejects a request
that names a control the provider cannot honour, before anything else happens (DESIGN rule 7):
a request never degrades silently. A ``response_schema`` counts as such a control: only a
provider that makes the final answer validate against it advertises ``structured_output``.

``resume``: the provider continues a stored conversation: given ``ChildSpec.resumed``, its
child starts from ``ChildSpec.transcript`` instead of a fresh one. ``SubagentRuntime.resume``
asks for this capability and refuses a provider without it.

``create(request, setup)`` receives a ``ChildSpec`` (everything resolved for one child) and the
one setup callback. The provider builds the child's private ``Scope`` and calls ``setup`` on it
before returning; nothing it returns is observable until the runtime publishes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from membrane.agents.definition import UNSET
from membrane.errors import UnsupportedCapability
from membrane.json_types import JSONObject
from membrane.loop.calls import Emit
from membrane.loop.outcome import ChildOutcome
from membrane.loop.spending import Spending
from membrane.models.base import Message, Usage
from membrane.models.limiter import Lane
from membrane.runtime.request import SubagentStartRequest
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import ReadApproval

__all__ = [
    "ChildComposition",
    "ChildOutcome",
    "ChildSpec",
    "Provider",
    "ProviderChild",
    "QueuedChild",
    "SetupCallback",
    "SubagentCapabilities",
    "check_capabilities",
]


@dataclass(frozen=True, slots=True)
class SubagentCapabilities:
    """Which start-request controls a provider enforces (seed 001).

    ``structured_output``: the final answer is checked against the request's
    ``response_schema`` (and parsed into ``RunResult.structured``). ``resume``: a stored run
    continues on it (see the module docstring). Both default to ``False``, so a provider
    written before a flag existed refuses the control instead of ignoring it.

    ``queued``: the children are driven by another process (a queue's ``membrane worker``),
    which claims each run's lease and records its end; the runtime that starts them publishes
    them, holds no lease on them, and follows their end in the store.
    """

    persona: bool
    tool_filter: bool
    depth_limit: bool
    structured_output: bool = False
    resume: bool = False
    queued: bool = False

    def to_dict(self) -> dict[str, bool]:
        return {
            "persona": self.persona,
            "tool_filter": self.tool_filter,
            "depth_limit": self.depth_limit,
            "structured_output": self.structured_output,
            "resume": self.resume,
            "queued": self.queued,
        }


@dataclass(frozen=True, slots=True)
class ChildComposition:
    """What setup installed, for the provider to use.

    ``system`` is the rendered system prompt (persona section first); ``persona`` is the
    effective persona text (the child's shadow, else the deployment's, else ``None``).
    """

    system: str
    persona: str | None
    sections: tuple[tuple[str, str], ...]
    response_schema: JSONObject | None = None


#: Installs the child's composition into its still-private scope.
SetupCallback = Callable[[Scope], ChildComposition]


@dataclass(slots=True)
class ChildSpec:
    """One child, fully resolved and validated, ready for a provider to build.

    ``task`` already carries the resolver's prefix (inherited context); ``transcript`` is the
    parent's conversation so far, which a ``fork`` provider copies (for a resume: the run's own
    stored conversation, and ``resumed`` is true); ``emit`` reports lifecycle events (turn,
    tool_call, tool_result, vetoed_call) and works only after publication.

    One is made per start and handed to the provider alone, which owns it from then on; it is
    not frozen (a frozen value's 21 fields cost a call each to set, about 3% of a start). What
    the child may do is decided by its scope, through the setup callback, never by this value.
    """

    run_id: str
    agent: str
    request: SubagentStartRequest
    registry: ToolRegistry
    task: str
    depth: int
    emit: Emit
    parent_id: str | None = None
    cwd: Path | None = None
    model: str | None = None
    #: The child runs in the ``plan`` permission mode: a default model that chooses by the
    #: mode (``opusplan``) means its planning model.
    planning: bool = False
    #: The models tried in order after ``model`` on a failure another model can fix.
    fallback_models: tuple[str, ...] = ()
    thinking: str | None = None
    #: The definition's ``tool_choice`` (resolved: a mode or a callable tool's name).
    tool_choice: str | None = None
    max_turns: int | None = None
    grace_turns: int = 5
    response_schema: JSONObject | None = None
    transcript: tuple[Message, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    #: The extensions the resolver loaded for this child; only they are bound (hooks included).
    extensions: tuple[str, ...] = ()
    #: The child continues a stored run (``SubagentRuntime.resume``), not a fresh start.
    resumed: bool = False
    #: Whether its sandboxed commands may use the network (``EffectiveAuthority.network``);
    #: ``None`` (a spec made by hand): the sandbox policy's own choice.
    network: bool | None = None
    #: Its definition's own read roots (real paths, held under its ceiling): its built-in
    #: reads and every sandboxed process it runs read them too.
    read_paths: tuple[Path, ...] = ()
    #: Asks the host about its built-in reads outside the read roots (the settings'
    #: ``read_outside = "ask"``: ``ToolContext.ask_read``); ``None``: they are refused.
    ask_read: ReadApproval | None = None
    #: Its working folder is writable (``EffectiveAuthority.writes``: the decision its prompt
    #: follows too); ``None``: the provider decides from the child's view (a spec made by hand).
    writes: bool | None = None
    #: The budgets the child draws on (DESIGN rule 12); a provider that runs the agent loop
    #: hands it over, and the runtime enforces ``children`` and ``seconds`` for every provider.
    spending: Spending | None = None
    #: What a response of a model (by name) costs in micro-dollars (``Prices.cost``).
    price: Callable[[str | None, Usage], int | None] | None = None
    #: The agent definition's own request limits (``requests_per_minute``,
    #: ``max_concurrent_requests``), shared by all its runs; ``None``: none of its own.
    request_lane: Lane | None = None
    #: Awaited before each model request of a provider that runs the agent loop: the store's
    #: durability barrier (``Store.barrier``), so a turn's end is durable before the next one.
    barrier: Callable[[], Awaitable[None]] | None = None


class ProviderChild(Protocol):
    """A built, unpublished child. The runtime runs it once, after publication.

    ``stop()`` asks for a graceful end; a cancelled ``run()`` must also release what the child
    holds (a process group, a connection). ``discard()`` drops a child that will never be
    published (publication failed after ``create()``).
    """

    @property
    def scope(self) -> Scope:
        """The child's private scope (its view is what the child may see and call)."""
        ...

    async def run(self) -> ChildOutcome: ...

    def steer(self, message: str) -> bool:
        """Inject a user message after the current tool call; ``False`` when unsupported."""
        ...

    def notify(self, message: str, *, on_delivered: Callable[[], None] | None = None) -> bool:
        """Queue a runtime notice (``task_notification``) for the child's next turn boundary.

        Unlike ``steer()`` it never skips the calls still pending from the current reply, and
        it never restarts a child that has given its final answer. ``False`` when the transport
        cannot deliver notices or the child has ended. ``on_delivered()`` must be called once
        the notice is in the child's conversation, and never for a notice that is dropped
        (the runtime's outbox keeps an unacknowledged notice and delivers it again later).
        """
        ...

    def discard(self) -> None:
        """Release what ``create()`` acquired; the child is never run. Idempotent."""
        ...

    def stop(self) -> None:
        """End the run soon with status ``stopped``; before ``run()``, it never starts."""
        ...

    def messages(self) -> Sequence[Message]:
        """The conversation so far (empty when the transport keeps it elsewhere), as an
        immutable sequence; asked at every turn, so made in constant time where it can be
        (``Conversation``), with ``messages()[n:]`` costing only the messages past ``n``."""
        ...


@runtime_checkable
class QueuedChild(ProviderChild, Protocol):
    """A child another process drives (a provider that advertises ``queued``)."""

    def leave(self) -> None:
        """Stop following the run here (the runtime closes); it goes on where it is driven.
        ``run()`` then returns soon, and nothing of the run is stopped."""
        ...


class Provider(Protocol):
    """An execution transport for children."""

    name: str
    capabilities: SubagentCapabilities

    async def create(self, request: ChildSpec, setup: SetupCallback) -> ProviderChild: ...


def check_capabilities(
    request: SubagentStartRequest, provider: Provider, *, role_filters: bool = False
) -> None:
    """Reject every control present in ``request`` that ``provider`` does not advertise.

    ``role_filters`` says the caller's role maps to a restriction, which needs ``tool_filter``
    as much as the request's own filter does.
    """
    if (
        (request.persona is UNSET or request.persona is None)
        and request.tool_filter is None
        and request.max_depth is None
        and not role_filters
        and request.response_schema is None
    ):
        return  # no control asked for: nothing a provider could lack
    caps = provider.capabilities
    structured = caps.structured_output is True
    wanted: list[tuple[str, bool]] = [
        ("persona", request.persona not in (UNSET, None) and not caps.persona),
        ("tool_filter", request.tool_filter is not None and not caps.tool_filter),
        ("max_depth", request.max_depth is not None and not caps.depth_limit),
        ("role", role_filters and not caps.tool_filter),
        ("response_schema", request.response_schema is not None and not structured),
    ]
    missing = [name for name, unsupported in wanted if unsupported]
    if not missing:
        return
    flag = {
        "max_depth": "depth_limit",
        "role": "tool_filter",
        "response_schema": "structured_output",
    }
    needs = ", ".join(f"{name} (needs {flag.get(name, name)})" for name in missing)
    raise UnsupportedCapability(
        f"provider {provider.name!r} cannot honour {needs}; it advertises "
        f"{caps.to_dict()}. Drop the control from the request or use a provider that "
        "supports it (the in-process provider supports all of them).",
        provider=provider.name,
        controls=missing,
        capabilities=caps.to_dict(),
    )
