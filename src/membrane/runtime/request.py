"""``SubagentStartRequest``: what a caller asks for when it starts a child.

Three independent composition controls ride on the request (seed 001):

* ``persona``: ``UNSET`` inherits the deployment persona; ``""`` shadows it with an empty
  section; any other string is a strict ``{{name}}`` template.
* ``tool_filter``: a ``Restriction`` (or ``{"allow": [...], "deny": [...]}``) over the live
  global registry, validated against it when the child starts.
* ``max_depth``: an absolute cap on the child's delegation depth; ``None`` leaves it unbounded.

Construction checks everything that needs no registry; ``validate_request`` repeats those checks
and adds the registry ones, and ``SubagentRuntime.start()`` calls it, so neither path relies on
the other having run (a request built with ``dataclasses.replace`` or ``object.__setattr__`` is
checked all the same).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from membrane.agents.definition import UNSET, Unset
from membrane.config.budget import Budget
from membrane.errors import InvalidRequest
from membrane.json_types import JSONObject
from membrane.limits import check_depth
from membrane.resolve import CallParams
from membrane.runtime.persona import check_persona
from membrane.tools.argument_rules import request_rules
from membrane.tools.registry import ToolRegistry
from membrane.tools.restriction import Restriction
from membrane.tools.rules import PermissionRule
from membrane.tools.schemas import schema_problem

__all__ = ["NO_CALL", "SubagentStartRequest", "allowed_agent_names", "validate_request"]

#: The call parameters of a request that gives none: nothing asked.
NO_CALL = CallParams()


@dataclass(frozen=True, slots=True)
class SubagentStartRequest:
    """One start. ``agent_type`` is dispatched through the catalog; ``task`` is the brief.

    ``persona=None`` is the same as leaving it out (inherit the deployment persona).
    ``parent_id`` names the calling agent's session (``None``: a top-level agent, depth 0).
    ``background`` fills ``call.run_in_background`` when the call leaves it out (frontmatter
    still wins). ``response_schema`` is a JSON Schema the child's final answer must match.
    ``role`` is the caller's trusted role; its ``settings.roles`` entry becomes a restriction.
    ``budget`` (a ``Budget``, or a mapping such as ``{"tokens": 200000, "children": 20}``) is
    what the child and its subtree may spend, within what remains of its ancestors' budgets.
    """

    agent_type: str
    task: str
    #: One shared value when the caller gives none (a ``CallParams`` is frozen).
    call: CallParams = NO_CALL
    persona: str | Unset | None = UNSET
    tool_filter: Restriction | JSONObject | None = None
    max_depth: int | None = None
    parent_id: str | None = None
    request_id: str | None = None
    background: bool | None = None
    response_schema: JSONObject | None = None
    role: str | None = None
    budget: Budget | JSONObject | None = None
    #: Argument rules for this child alone, as a definition's ``rules:`` writes them (or
    #: ``PermissionRule`` values); they narrow, never grant, and a resume keeps them.
    rules: tuple[PermissionRule, ...] | Sequence[JSONObject] | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        if self.rules is not None and not all(isinstance(r, PermissionRule) for r in self.rules):
            object.__setattr__(self, "rules", request_rules(self.rules))
        # ``is not None`` first: an ABC's isinstance costs more than the usual request's None.
        if self.budget is not None and isinstance(self.budget, Mapping):
            object.__setattr__(self, "budget", Budget.parse(self.budget))
        if self.tool_filter is not None and isinstance(self.tool_filter, Mapping):
            restriction = Restriction.from_mapping(self.tool_filter, label="toolFilter")
            object.__setattr__(self, "tool_filter", restriction)

    @property
    def restriction(self) -> Restriction | None:
        """The tool filter as a ``Restriction`` (``None`` when the request has none)."""
        value = self.tool_filter
        if value is None or isinstance(value, Restriction):
            return value
        return Restriction.from_mapping(value, label="toolFilter")


def check_fields(request: SubagentStartRequest) -> None:
    """Every check that needs nothing but the request itself."""
    _text(request.agent_type, "agent_type", "the subagent type to start, e.g. 'reviewer'")
    _text(request.task, "task", "the brief for the child")
    if not isinstance(request.call, CallParams):
        raise InvalidRequest(
            f"call must be a CallParams, got {type(request.call).__name__}", field="call"
        )
    if request.persona is not UNSET and request.persona is not None:
        check_persona(request.persona, where="persona")
    if request.tool_filter is not None and not isinstance(
        request.tool_filter, Restriction | Mapping
    ):
        raise InvalidRequest(
            "tool_filter must be a Restriction or a mapping with 'allow' and/or 'deny', "
            f"got {type(request.tool_filter).__name__}",
            field="tool_filter",
        )
    if request.rules is not None and not isinstance(request.rules, list | tuple):
        raise InvalidRequest(
            f"rules must be a list of argument rules, got {type(request.rules).__name__}",
            field="rules",
        )
    if request.max_depth is not None:
        check_depth(request.max_depth, what="max_depth")
    if request.parent_id is not None:
        _text(request.parent_id, "parent_id", "a non-empty string or None")
    if request.request_id is not None:
        _text(request.request_id, "request_id", "a non-empty string or None")
    if request.role is not None:
        _text(request.role, "role", "a non-empty string or None")
    if request.background is not None:
        if not isinstance(request.background, bool):
            raise InvalidRequest(
                f"background must be true, false or None, got {request.background!r}",
                field="background",
            )
        asked = request.call.run_in_background
        if asked is not UNSET and asked != request.background:
            raise InvalidRequest(
                f"background={request.background} disagrees with call.run_in_background="
                f"{asked}; give only one of them",
                field="background",
            )
    if request.response_schema is not None:
        check_response_schema(request.response_schema)
    if request.budget is not None:
        Budget.parse(request.budget)


def validate_request(request: object, *, registry: ToolRegistry) -> SubagentStartRequest:
    """The whole check: the request's own fields, then its tool filter against ``registry``.

    Raises ``InvalidRequest``, ``InvalidPersona``, ``InvalidDepth``, ``EmptyToolFilter`` or
    ``UnknownToolInFilter``.
    """
    if not isinstance(request, SubagentStartRequest):
        raise InvalidRequest(
            f"expected a SubagentStartRequest, got {type(request).__name__}", field="request"
        )
    check_fields(request)
    restriction = request.restriction
    if restriction is not None:
        restriction.validate(registry)
    return request


def check_response_schema(schema: object) -> Mapping[str, Any]:
    """A JSON-serialisable mapping that is valid JSON Schema and whose every ``$ref`` resolves.

    The same check as a tool's input schema (``membrane.tools.schemas``): the meta-schema, then
    each ``$ref``/``$dynamicRef`` against the schema itself and the meta-schemas only, so a
    dangling or remote reference is refused here rather than failing after the child ran.
    """
    if not isinstance(schema, Mapping):
        raise InvalidRequest(
            f"response_schema must be a JSON Schema object, got {type(schema).__name__}",
            field="response_schema",
        )
    try:
        plain = json.loads(json.dumps(schema, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(
            f"response_schema must hold only JSON values: {exc}", field="response_schema"
        ) from exc
    problem = schema_problem(plain)
    if problem is not None:
        raise InvalidRequest(
            f"response_schema is not a usable JSON Schema at {problem.where}: {problem.what}",
            field="response_schema",
            path=problem.where,
        )
    return schema


def _text(value: object, name: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{name} must be {what}; got {value!r}", field=name)
    return value


def allowed_agent_names(allowed: Collection[str] | None) -> tuple[str, ...] | None:
    """A start's ``allowed_agents`` as a tuple (``None``: any); a string or a blank name is
    ``invalid-request``."""
    if allowed is None:
        return None
    if isinstance(allowed, str) or not all(isinstance(a, str) and a.strip() for a in allowed):
        raise InvalidRequest(
            "allowed_agents must be a list of agent names (or '*'), not a string",
            field="allowed_agents",
        )
    return tuple(allowed)
