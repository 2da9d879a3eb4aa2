"""Every error Membrane raises, each with a stable kebab-case ``code``.

The codes are part of the public contract: they appear in JSON-RPC error objects,
in CLI output (``file:line: code: message``) and in tool results a model sees.
Messages may change; codes do not.

Two branches, as a user meets them:

* a *developer's mistake* (``ConfigError``): a bad definition, filter, setting or request.
  Fix the input and try again.
* a *run's failure* (``RunError``): something went wrong while a child was starting or running.

::

    MembraneError
    ├── ConfigError
    │   ├── DefinitionError ............ definition-invalid
    │   ├── SettingsError .............. settings-invalid
    │   ├── ToolFilterError ............ tool-filter-invalid
    │   │   ├── EmptyToolFilter ........ empty-tool-filter
    │   │   └── UnknownToolInFilter .... unknown-tool-in-filter
    │   ├── ToolSpecError .............. tool-spec-invalid
    │   ├── ExtensionError ............. extension-invalid
    │   ├── InvalidRequest ............. invalid-request
    │   ├── InvalidDepth ............... invalid-depth
    │   ├── InvalidPersona ............. invalid-persona
    │   ├── UnknownSubagent ............ unknown-subagent        NotFound
    │   ├── ToolChoiceInvalid .......... tool-choice-invalid
    │   ├── UnsupportedCapability ...... unsupported-capability
    │   ├── UnknownAgent ............... unknown-agent           NotFound
    │   ├── InvalidSchedule ............ invalid-schedule
    │   ├── UnknownSchedule ............ unknown-schedule        NotFound
    │   ├── ExtraNotInstalled .......... extra-not-installed
    │   ├── UnknownModel ............... unknown-model           NotFound
    │   ├── ModelNotAllowed ............ model-not-allowed
    │   ├── ModelPriceUnknown .......... model-price-unknown
    │   ├── UnknownWorkflow ............ unknown-workflow        NotFound
    │   ├── WorkflowInvalid ............ workflow-invalid
    │   ├── StateInsideCheckout ........ state-inside-checkout
    │   ├── DefinitionChanged .......... definition-changed
    │   ├── NoOpenQuestion ............. no-open-question
    │   └── ScriptError ................ model-script-invalid
    └── RunError
        ├── ToolCallError .............. tool-call-error
        │   ├── ToolNotVisible ......... tool-not-visible
        │   ├── ToolArgumentsInvalid ... tool-arguments-invalid
        │   ├── ToolFailed ............. tool-failed
        │   ├── ToolBlocked ............ tool-blocked
        │   ├── ToolCallDenied ......... tool-call-denied        PermissionRefused
        │   └── ApprovalUnavailable .... approval-unavailable    PermissionRefused
        ├── PathOutsideCheckout ........ path-outside-checkout
        │   ├── PathProtected .......... path-protected
        │   └── HardLinkRefused ........ hard-link-refused
        ├── DepthLimitExceeded ......... depth-limit-exceeded
        ├── BudgetExceeded ............. budget-exceeded
        ├── SetupFailed ................ setup-failed
        ├── ChildFailed ................ child-failed
        ├── WorktreeUnavailable ........ worktree-unavailable
        ├── SandboxUnavailable ......... sandbox-unavailable
        ├── ModelError ................. model-error
        │   ├── ModelAuthFailed ........ model-auth-failed
        │   ├── ModelRateLimited ....... model-rate-limited      retryable
        │   ├── ModelContextExceeded ... model-context-exceeded
        │   ├── ModelUnavailable ....... model-unavailable
        │   ├── ModelResponseTooLarge .. model-response-too-large
        │   └── ModelTimeout ........... model-timeout
        ├── StructuredOutputInvalid .... structured-output-invalid
        ├── ExtensionHookFailed ........ extension-hook-failed
        ├── UnknownRun ................. unknown-run             NotFound
        ├── UnknownApproval ............ unknown-approval        NotFound
        ├── UnknownSkill ............... unknown-skill           NotFound
        ├── McpServerUnavailable ....... mcp-server-unavailable
        ├── McpToolError ............... mcp-tool-error
        ├── RequestPending ............. request-pending         retryable
        ├── RunLeased .................. run-leased              retryable
        ├── QueueUnavailable ........... queue-unavailable       retryable
        ├── WorkflowRefused ............ workflow-refused
        ├── StoreError ................. store-error
        │   ├── StoreNotMembrane ....... store-not-membrane
        │   └── StoreDamaged ........... store-damaged
        ├── RateLimited ................ rate-limited            retryable
        ├── Interrupted ................ interrupted
        ├── NoParent ................... no-parent
        ├── ParentEnded ................ parent-ended
        └── ServerError ................ server-error
            ├── RuntimeAlreadyRunning .. runtime-already-running
            ├── SocketPathTooLong ...... socket-path-too-long
            ├── RuntimeUnavailable ..... runtime-unavailable
            ├── RuntimeRoleMismatch .... runtime-role-mismatch
            ├── RuntimeBuildMismatch ... runtime-build-mismatch
            ├── TooManyConnections ..... too-many-connections    retryable
            ├── TooManyWaits ........... too-many-waits          retryable
            ├── TooManyBufferedBytes ... too-many-buffered-bytes retryable
            ├── UnknownProject ......... unknown-project         NotFound
            ├── TokenInvalid ........... token-invalid           PermissionRefused
            ├── CallerRefused .......... caller-refused          PermissionRefused
            │   ├── ProjectRefused ..... project-refused         PermissionRefused
            │   └── ConsoleRefused ..... console-refused         PermissionRefused
            └── ProtocolError .......... protocol-error

Families that cross the two branches, for what a caller wants to catch (each class above that
names one is also an instance of it, so ``except NotFound`` catches ``UnknownAgent`` and
``UnknownRun`` alike; the branch still decides the CLI's exit code):

* ``NotFound`` (``not-found``): a name or id that refers to nothing: an agent, a subagent type,
  a model, a run, a skill, a schedule, a workflow, a project.
* ``PermissionRefused`` (``permission-refused``): a rule or an identity check said no: a call a
  permission rule denied or no one could approve, a caller or token the runtime refuses.
* ``ToolCallError`` (``tool-call-error``, a ``RunError``): one tool call refused or failed; the
  agent loop answers it as an error tool result and the run goes on.
* ``retryable``: a class attribute, ``True`` where the same request may succeed later unchanged
  (a rate limit, a pending receipt, a leased run).
"""

from __future__ import annotations

from typing import ClassVar, cast

from membrane.json_types import JSONDict

__all__ = [
    "ApprovalUnavailable",
    "BudgetExceeded",
    "CallerRefused",
    "ChildFailed",
    "ConfigError",
    "ConsoleRefused",
    "DefinitionChanged",
    "DefinitionError",
    "DepthLimitExceeded",
    "EmptyToolFilter",
    "ExtensionError",
    "ExtensionHookFailed",
    "ExtraNotInstalled",
    "HardLinkRefused",
    "Interrupted",
    "InvalidDepth",
    "InvalidPersona",
    "InvalidRequest",
    "InvalidSchedule",
    "McpServerUnavailable",
    "McpToolError",
    "MembraneError",
    "ModelAuthFailed",
    "ModelContextExceeded",
    "ModelError",
    "ModelNotAllowed",
    "ModelPriceUnknown",
    "ModelRateLimited",
    "ModelResponseTooLarge",
    "ModelTimeout",
    "ModelUnavailable",
    "NoOpenQuestion",
    "NoParent",
    "NotFound",
    "ParentEnded",
    "PathOutsideCheckout",
    "PathProtected",
    "PermissionRefused",
    "ProjectRefused",
    "ProtocolError",
    "QueueUnavailable",
    "RateLimited",
    "RequestPending",
    "RunError",
    "RunLeased",
    "RuntimeAlreadyRunning",
    "RuntimeBuildMismatch",
    "RuntimeRoleMismatch",
    "RuntimeUnavailable",
    "SandboxUnavailable",
    "ScriptError",
    "ServerError",
    "SettingsError",
    "SetupFailed",
    "SocketPathTooLong",
    "StateInsideCheckout",
    "StoreDamaged",
    "StoreError",
    "StoreNotMembrane",
    "StructuredOutputInvalid",
    "TokenInvalid",
    "TooManyBufferedBytes",
    "TooManyConnections",
    "TooManyWaits",
    "ToolArgumentsInvalid",
    "ToolBlocked",
    "ToolCallDenied",
    "ToolCallError",
    "ToolChoiceInvalid",
    "ToolFailed",
    "ToolFilterError",
    "ToolNotVisible",
    "ToolSpecError",
    "UnknownAgent",
    "UnknownApproval",
    "UnknownModel",
    "UnknownProject",
    "UnknownRun",
    "UnknownSchedule",
    "UnknownSkill",
    "UnknownSubagent",
    "UnknownToolInFilter",
    "UnknownWorkflow",
    "UnsupportedCapability",
    "WorkflowInvalid",
    "WorkflowRefused",
    "WorktreeUnavailable",
    "error_class",
]


class MembraneError(Exception):
    """Base of every Membrane error. ``code`` is stable; ``message`` is for people; ``data`` holds
    the context as plain, JSON-serialisable values (also available as attributes). It is typed
    ``object``, not ``JSONValue``: raising sites pass whatever context they hold, so a reader
    narrows."""

    code: ClassVar[str] = "membrane-error"
    retryable: ClassVar[bool] = False
    """``True`` where the same request may succeed later, unchanged (``RateLimited``,
    ``ModelRateLimited``, ``RequestPending``, ``RunLeased``)."""

    def __init__(self, message: str, **data: object) -> None:
        super().__init__(message)
        self.message = message
        self.data: dict[str, object] = data
        for key, value in data.items():
            setattr(self, key, value)

    def to_dict(self) -> JSONDict:
        """The error as the wire and ``--json`` output carry it."""
        # ``data`` holds JSON values by this class's contract; raising sites are not typed so.
        return {"code": self.code, "message": self.message, "data": cast(JSONDict, dict(self.data))}

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class ConfigError(MembraneError):
    """The developer's mistake: a bad definition, filter, setting or request."""

    code = "config-error"


class RunError(MembraneError):
    """A run's failure: something went wrong while a child was starting or running."""

    code = "run-error"


class NotFound(MembraneError):
    """A family: a name or id that refers to nothing this caller can reach (an agent, a
    subagent type, a model, a run, a skill, a schedule, a workflow, a project)."""

    code = "not-found"


class PermissionRefused(MembraneError):
    """A family: a rule or an identity check refused (a tool call denied or left without an
    approver, a caller or token the runtime does not accept)."""

    code = "permission-refused"


class ToolCallError(RunError):
    """A family: one tool call was refused or failed. The agent loop answers it as an error tool
    result and the run goes on."""

    code = "tool-call-error"


class DefinitionError(ConfigError):
    """An agent definition file cannot be understood. Carries ``path``, ``line`` (1-based, or
    ``None``), ``field`` (or ``None``) and ``hint``."""

    code = "definition-invalid"

    def __init__(
        self,
        message: str,
        *,
        path: str,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
        **data: object,
    ) -> None:
        super().__init__(message, path=path, line=line, field=field, hint=hint, **data)

    def __str__(self) -> str:
        where = (
            self.data["path"]
            if self.data.get("line") is None
            else (f"{self.data['path']}:{self.data['line']}")
        )
        text = f"{where}: {self.message}"
        if self.data.get("hint"):
            text += f" ({self.data['hint']})"
        return text


class SettingsError(ConfigError):
    """A settings file or value is invalid."""

    code = "settings-invalid"


class ToolFilterError(ConfigError):
    """A tool filter cannot be installed."""

    code = "tool-filter-invalid"


class EmptyToolFilter(ToolFilterError):
    """A filter gives neither ``allow`` nor ``deny``."""

    code = "empty-tool-filter"


class UnknownToolInFilter(ToolFilterError):
    """A filter names something outside the current global restrictable set. Carries ``name`` (the
    offending entry) and ``suggestion`` (closest real name or ``None``)."""

    code = "unknown-tool-in-filter"


class ToolSpecError(ConfigError):
    """A tool definition is malformed (bad name, bad schema, duplicate)."""

    code = "tool-spec-invalid"


class ExtensionError(ConfigError):
    """An extension cannot be loaded or misbehaved in ``setup``."""

    code = "extension-invalid"


class InvalidRequest(ConfigError):
    """A start request, call or RPC payload is malformed."""

    code = "invalid-request"


class InvalidDepth(ConfigError):
    """A depth value is not a non-negative safe integer, or a derived depth overflows."""

    code = "invalid-depth"


class InvalidPersona(ConfigError):
    """A persona template has a placeholder that cannot be filled."""

    code = "invalid-persona"


class UnknownSubagent(ConfigError, NotFound):
    """An agent type cannot be dispatched and the fallback policy fails closed."""

    code = "unknown-subagent"


class ToolChoiceInvalid(ConfigError):
    """A definition's ``tool_choice`` names a tool the agent cannot call. The message names only
    the requested tool, never one hidden from the agent."""

    code = "tool-choice-invalid"


class UnknownAgent(ConfigError, NotFound):
    """``membrane run NAME`` (or a host's top-level start) names no usable agent: unknown,
    ambiguous, disabled, or a file by that name that cannot be read (its error in
    ``data.file_error``). Carries ``requested``, ``reason`` and ``closest`` (names)."""

    code = "unknown-agent"


class UnsupportedCapability(ConfigError):
    """A request names a control that its provider does not advertise."""

    code = "unsupported-capability"


class DefinitionChanged(ConfigError):
    """A save from the console's editor over a definition file that changed on disk since the
    editor read it: nothing is written. Carries ``path``."""

    code = "definition-changed"


class ScriptError(ConfigError):
    """A scripted-model file is malformed or has run out of turns."""

    code = "model-script-invalid"


class ToolNotVisible(ToolCallError):
    """A tool name is not in the caller's view. The message and data never name or hint at hidden
    tools: only the requested name appears."""

    code = "tool-not-visible"


class ToolArgumentsInvalid(ToolCallError):
    """Tool arguments fail the tool's JSON Schema. Carries ``tool``, ``path`` and ``reason``."""

    code = "tool-arguments-invalid"


class ToolFailed(ToolCallError):
    """A tool's handler raised. Carries ``tool``."""

    code = "tool-failed"


class ToolBlocked(ToolCallError):
    """A hook blocked a call (an extension's ``before_tool_call``) or a child's task (its
    ``UserPromptSubmit`` command hook). Carries ``tool``, ``extension`` or ``hook``, ``reason``."""

    code = "tool-blocked"


class ToolCallDenied(ToolCallError, PermissionRefused):
    """A permission rule (``deny``, or an ``ask`` the host refused) stopped a call before it
    ran. Carries ``tool``, ``rule`` (as written, or ``null``), ``subject`` (the command or path
    the rule matched) and ``reason``, which tells the model what it may do instead."""

    code = "tool-call-denied"


class ApprovalUnavailable(ToolCallError, PermissionRefused):
    """A call needed the host's approval (an ``ask`` rule) and no one can answer: no approver
    is installed (a non-interactive run). Carries ``tool``, ``rule`` and ``subject``."""

    code = "approval-unavailable"


class PathOutsideCheckout(RunError):
    """A mutating tool was asked to touch a path outside the child's checkout."""

    code = "path-outside-checkout"


class PathProtected(PathOutsideCheckout):
    """A mutating tool was asked to write control files inside the checkout: ``.git`` or
    ``.membrane`` (except the agent's own memory folder). Carries ``path`` and ``protected``."""

    code = "path-protected"


class HardLinkRefused(PathOutsideCheckout):
    """A mutating tool was asked to change a file that has other hard links: another name of the
    same file may lie outside the checkout (or in a control path), which no path check can see.
    Carries ``path`` and ``links``."""

    code = "hard-link-refused"


class DepthLimitExceeded(RunError):
    """A start would create a child deeper than the cap. Carries ``depth`` and ``max_depth``."""

    code = "depth-limit-exceeded"


class BudgetExceeded(RunError):
    """A run would spend past a budget it draws on (its own or an ancestor's, DESIGN rule 12).
    Carries ``kind`` (``tokens``, ``cost``, ``turns``, ``tool_calls``, ``children`` or ``seconds``),
    ``limit``, ``used``, ``owner`` (the run whose budget it is) and ``run_id`` (the run that
    crossed it). The run that crossed it ends with this error; a refused start publishes
    nothing."""

    code = "budget-exceeded"


class SetupFailed(RunError):
    """Unpublished child setup failed; everything it built was rolled back."""

    code = "setup-failed"


class ChildFailed(RunError):
    """A foreground child ended without completing (``error``, ``aborted`` or ``stopped``). Carries
    ``run_id``, ``agent``, ``status``, ``error`` (the child's error, or ``None``) and ``result``
    (the child's whole result, text included), so a parent sees a failed delegation as a
    failure."""

    code = "child-failed"


class WorktreeUnavailable(RunError):
    """A worktree was allowed and requested but cannot be created."""

    code = "worktree-unavailable"


class SandboxUnavailable(RunError):
    """The settings ask for a sandbox backend this machine does not offer, or the sandbox could
    not be set up for a call. Carries ``backend`` and ``reason``."""

    code = "sandbox-unavailable"


class ModelError(RunError):
    """The model provider failed."""

    code = "model-error"


class ModelAuthFailed(ModelError):
    """The provider refused the credentials, or no key is configured (never retried). Carries
    ``provider`` and, for a missing key, ``env`` (the variable that was read). The key itself is
    never carried."""

    code = "model-auth-failed"


class ModelRateLimited(ModelError):
    """The provider kept answering 429 after the bounded retries. Carries ``retry_after``."""

    code = "model-rate-limited"
    retryable = True


class ModelContextExceeded(ModelError):
    """The request is larger than the model's context window (413, or the provider says so)."""

    code = "model-context-exceeded"


class ModelUnavailable(ModelError):
    """The provider stayed unreachable, overloaded or failing (5xx, 529) after the retries."""

    code = "model-unavailable"


class ModelResponseTooLarge(ModelError):
    """A streamed reply carried more text and tool-call arguments than the model's
    ``max_response_bytes``: the stream is closed and the run ends. Carries ``limit``."""

    code = "model-response-too-large"


class ModelTimeout(ModelError):
    """The provider did not answer within the request timeout, after the retries."""

    code = "model-timeout"


class UnknownModel(ConfigError, NotFound):
    """A model spec names no known provider, alias or ``[models.NAME]`` entry. Carries ``spec`` and
    ``known`` (the aliases and entries the settings define)."""

    code = "unknown-model"


class ModelNotAllowed(ConfigError):
    """A model outside the settings' ``allowed_models`` was asked for (a definition's model or
    one of its fallbacks, a call's, the deployment's default). Carries ``spec`` (as written),
    ``model`` (``provider:model`` it names) and ``allowed``."""

    code = "model-not-allowed"


class ModelPriceUnknown(ConfigError):
    """A ``cost`` budget is in force and a child's model (or one of its fallbacks) has no known
    price: neither the settings' ``[models.NAME] price`` nor the price table. Carries
    ``model``. Refused at the start, never charged as zero."""

    code = "model-price-unknown"


class StructuredOutputInvalid(RunError):
    """A final answer never validated against the requested response schema. Carries ``path`` (JSON
    path of the last problem) and ``reason``."""

    code = "structured-output-invalid"


class ExtensionHookFailed(RunError):
    """An extension's lifecycle hook raised. Carries ``extension`` and ``event``."""

    code = "extension-hook-failed"


class UnknownRun(RunError, NotFound):
    """A run id is unknown to this caller (or belongs to another parent)."""

    code = "unknown-run"


class UnknownApproval(RunError, NotFound):
    """An answer from ``membrane console`` to an approval that no longer waits: answered
    already, or its run gave up waiting (the approval timeout) or ended. Carries ``approval``."""

    code = "unknown-approval"


class RequestPending(RunError):
    """A ``request_id`` whose first attempt is still pending (in another process, or one that
    crashed before its receipt's TTL ran out): nothing was done now. Carries ``request_id``."""

    code = "request-pending"
    retryable = True


class RunLeased(RunError):
    """A run is being driven by another process (its lease is live). Carries ``owner``."""

    code = "run-leased"
    retryable = True


class QueueUnavailable(RunError):
    """The queue children go on (``provider = "dbos"``) cannot be reached: its database is
    down, or no ``membrane worker`` has prepared it yet. Carries ``queue`` and ``cause``
    (never a password)."""

    code = "queue-unavailable"
    retryable = True


class UnknownWorkflow(ConfigError, NotFound):
    """A definition opts into a workflow (``workflow: NAME``) the runtime was not given.
    Carries ``workflow``, ``agent`` and ``known``."""

    code = "unknown-workflow"


class WorkflowInvalid(ConfigError):
    """A workflow definition is malformed (an unknown phase, step or decision, an unreachable
    phase, a transition out of a terminal phase). Carries ``workflow``."""

    code = "workflow-invalid"


class StateInsideCheckout(ConfigError):
    """A new store would be created inside a git checkout or a project folder, where a child
    writing in its checkout could change it (DESIGN rule 9). Carries ``path``, ``folder`` (the
    checkout or project) and ``marker`` (``.git`` or ``.membrane``)."""

    code = "state-inside-checkout"


class WorkflowRefused(RunError):
    """A workflow step or transition its run's current phase does not allow, or that waits for
    a step or a host decision; nothing was written. Carries ``workflow``, ``phase`` and
    ``missing``."""

    code = "workflow-refused"


class StoreError(RunError):
    """The durable store failed or holds malformed data."""

    code = "store-error"


class StoreNotMembrane(StoreError):
    """The state file is not a Membrane store: not a SQLite database, or a SQLite database of
    another application (another ``application_id``, or tables but no Membrane schema). Nothing
    was written to it. Carries ``path``."""

    code = "store-not-membrane"


class StoreDamaged(StoreError):
    """The state file is a Membrane store that fails its check: its write-ahead log's header is
    not SQLite's (commits that live only there cannot be read), its schema is gone or disagrees
    with its recorded version, or ``PRAGMA quick_check`` reports damage. Nothing was written to
    it. Carries ``path`` and ``problems``."""

    code = "store-damaged"


class UnknownSkill(RunError, NotFound):
    """A ``Skill`` call named a skill the calling agent was not given. Carries ``skill``."""

    code = "unknown-skill"


class InvalidSchedule(ConfigError):
    """A schedule request is malformed: not exactly one of ``--in``/``--at``/``--cron``
    (``delay_seconds``/``run_at``/``cron``), a naive timestamp, a bad cron expression or time
    zone. Carries ``field``."""

    code = "invalid-schedule"


class UnknownSchedule(ConfigError, NotFound):
    """No schedule has that id. Carries ``schedule_id``."""

    code = "unknown-schedule"


class ExtraNotInstalled(ConfigError):
    """An optional part of Membrane needs a package that is not installed. Carries ``extra``
    (install ``membrane[EXTRA]``) and ``package``."""

    code = "extra-not-installed"


class McpServerUnavailable(RunError):
    """An MCP server is not running, crashed, hung or did not answer within its timeout.
    Carries ``server`` and ``reason``."""

    code = "mcp-server-unavailable"


class McpToolError(RunError):
    """An MCP server answered a tool call with ``isError``. Carries ``server`` and ``tool``."""

    code = "mcp-tool-error"


class RateLimited(RunError):
    """A call exceeded its tool's sliding window (``[rate_limits.TOOL]``). Carries ``tool``
    and ``retry_after_seconds``: when the oldest call in the window leaves it."""

    code = "rate-limited"
    retryable = True


class Interrupted(RunError):
    """A command was interrupted with Ctrl-C (SIGINT) and stopped (exit code 130). A run it
    followed was stopped with its children and carries ``run_id``, ``stopped`` and ``resume``
    (the command that continues it)."""

    code = "interrupted"


class NoParent(RunError):
    """``AskParent`` was called by a run that has no parent to ask (a top-level run, started
    by a host). Carries ``run_id``."""

    code = "no-parent"


class ParentEnded(RunError):
    """``AskParent`` asked a parent that has ended, or the parent ended while the question
    waited for its answer. Carries ``run_id`` (the asking run), ``parent_id`` and
    ``status`` (the parent's)."""

    code = "parent-ended"


class NoOpenQuestion(ConfigError):
    """An answer (a message of kind ``answer``) was sent to a run that has no open
    ``AskParent`` question. Carries ``run_id``."""

    code = "no-open-question"


class ServerError(RunError):
    """The machine runtime (``membrane serve``) or the way to it failed."""

    code = "server-error"


class RuntimeAlreadyRunning(ServerError):
    """Another ``membrane serve`` holds the socket's lock. Carries ``pid`` and ``socket``."""

    code = "runtime-already-running"


class SocketPathTooLong(ServerError):
    """A socket path the kernel cannot take, even through its folder's descriptor: Unix
    socket addresses hold at most 107 bytes. Carries ``socket`` and ``limit``."""

    code = "socket-path-too-long"


class RuntimeUnavailable(ServerError):
    """No runtime answers on the socket, and none could be started. Carries ``socket``."""

    code = "runtime-unavailable"


class RuntimeRoleMismatch(ServerError):
    """The running runtime's default role is not the one asked for, and runs are in flight,
    so it cannot be restarted. Carries ``running`` and ``requested``."""

    code = "runtime-role-mismatch"


class RuntimeBuildMismatch(ServerError):
    """The runtime that answers runs another build of Membrane than the command, and runs are
    in flight, so it is not restarted. Carries ``running`` and ``requested`` (build hashes)
    and ``version``."""

    code = "runtime-build-mismatch"


class TooManyConnections(ServerError):
    """``membrane serve`` holds as many connections as its settings allow, in all or from this
    peer process (``server_max_connections``, ``server_max_connections_per_peer``); the
    connection is closed. Carries ``limit`` and ``scope`` (``total`` or ``peer``)."""

    code = "too-many-connections"
    retryable = True


class TooManyWaits(ServerError):
    """A connection has as many ``runs/wait`` calls in flight as the settings allow
    (``server_max_waits_per_connection``). Carries ``limit``."""

    code = "too-many-waits"
    retryable = True


class TooManyBufferedBytes(ServerError):
    """``membrane serve`` holds as many bytes of partial request lines, over all connections
    together, as its settings allow (``server_max_buffered_bytes``): the connection whose line
    would pass the limit is closed, and its partial line dropped. Carries ``limit``."""

    code = "too-many-buffered-bytes"
    retryable = True


class UnknownProject(ServerError, NotFound):
    """A ``projectId`` the runtime does not serve. Carries ``project_id``."""

    code = "unknown-project"


class TokenInvalid(ServerError, PermissionRefused):
    """A ``MEMBRANE_TOKEN`` that this runtime did not mint, or whose run has ended."""

    code = "token-invalid"


class CallerRefused(ServerError, PermissionRefused):
    """The socket's peer is not the server's own user (checked with its peer credentials)."""

    code = "caller-refused"


class ProjectRefused(CallerRefused):
    """A project the caller may not open: a run's token asking for another project, or a
    caller other than the owner asking for one the owner did not register; or a project whose
    code (an extension, an MCP server's command) lies where a live run may write. Carries
    ``reason`` (``token``, ``not-registered``, ``writable-by-run``) and ``root``."""

    code = "project-refused"


class ConsoleRefused(CallerRefused):
    """A request ``membrane console`` refuses before it acts: no console token (neither in the
    URL nor in the cookie it set), a ``Host`` or ``Origin`` that is not the console's own, or a
    form post without the page's CSRF token. Carries ``reason`` (``token``, ``host``,
    ``origin``, ``csrf``)."""

    code = "console-refused"


class ProtocolError(ServerError):
    """A frame the other side could not read: not JSON-RPC, too large, or cut off."""

    code = "protocol-error"


def error_class(code: str) -> type[MembraneError] | None:
    """The class whose stable ``code`` this is (families and branches included, and subclasses
    defined elsewhere once imported), or ``None``: how an error that crossed the wire or was
    kept in a receipt is raised again as itself."""
    pending: list[type[MembraneError]] = [MembraneError]
    while pending:
        cls = pending.pop()
        if cls.code == code:
            return cls
        pending.extend(cls.__subclasses__())
    return None
