"""``membrane explain --parent``: the JSON a caller writes for the delegating parent, checked
by a pydantic model and turned into a ``ParentContext`` (``--call`` is read by the same JSON
reader)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from membrane.errors import InvalidDepth, InvalidRequest, MembraneError
from membrane.limits import depth_problem
from membrane.resolve import ParentContext
from membrane.resolve.ceiling import Ceiling
from membrane.resolve.permissions import permission_mode
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool, ToolContext

if TYPE_CHECKING:  # pydantic and the model layer are imported only when a --parent is given
    from pydantic import BaseModel

    from membrane.models.base import Message, MessageKind, Role

__all__ = ["parent_context", "read_json"]


def _message(role: Role, content: str, kind: MessageKind) -> Message:
    from membrane.models.base import Message

    return Message(role, content, kind=kind)


@functools.cache
def _parent_model() -> type[BaseModel]:
    """The pydantic model of ``--parent``, built when one is given (explain without it imports
    no pydantic)."""
    from pydantic import BaseModel, ConfigDict, Field, field_validator

    class _Strict(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)

    class ParentTool(_Strict):
        name: str = Field(min_length=1)
        origin: str = "builtin"
        deferred: bool = False
        mutating: bool = False

    class ParentMessage(_Strict):
        role: Literal["user", "assistant", "tool"]
        content: str = ""
        kind: Literal["text", "summary"] = "text"

    class Parent(_Strict):
        tools: list[ParentTool] | None = None
        system_prompt: str = ""
        model: str | None = None
        transcript: list[ParentMessage] = Field(default_factory=list)
        permission_mode: str | None = None
        depth: int = 0
        cwd: str | None = None
        ceiling: Any = None

        @field_validator("tools", mode="before")
        @classmethod
        def _names(cls, value: object) -> object:
            if isinstance(value, list):  # a bare name stands for {"name": NAME}
                return [{"name": item} if isinstance(item, str) else item for item in value]
            return value

    return Parent


def read_json(option: str, value: str) -> object:
    """``value`` is JSON text or ``@FILE``; ``InvalidRequest`` says which and where it broke."""
    source = option
    content = value
    if value.startswith("@"):
        path = Path(value[1:])
        source = f"{option} {path}"
        try:
            content = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidRequest(f"{option}: cannot read {path}: {exc}", field=option) from exc
    try:
        return json.loads(content)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            field=option,
        ) from exc


async def _absent(arguments: Mapping[str, Any], context: ToolContext) -> Any:
    raise InvalidRequest("a tool described in --parent cannot run")


def _check_parent_depth(raw: object, *, top_level: bool) -> None:
    """``--parent.depth`` is a non-negative safe integer (JSON booleans and fractions are not),
    and describes a delegating agent, so it has no place beside ``--top-level``."""
    if not isinstance(raw, Mapping) or "depth" not in raw:
        return
    if top_level:
        raise InvalidRequest(
            "--parent.depth cannot be combined with --top-level: a top-level agent runs at "
            "depth 0 under its host; drop one of them",
            field="depth",
        )
    value = raw["depth"]
    if depth_problem(value, exact=True) is not None:
        raise InvalidDepth(
            "--parent.depth: expected a non-negative whole number at most 2**53-1, got "
            f"{json.dumps(value)}",
            field="depth",
            value=repr(value),
        )


def parent_context(
    raw: object, *, registry: ToolRegistry, permission: str, cwd: Path, top_level: bool
) -> ParentContext:
    """The parent ``--parent`` describes (``raw``: its JSON, as read). A tool it names that
    ``registry`` holds is that tool; another is a stand-in that cannot run."""
    _check_parent_depth(raw, top_level=top_level)
    from pydantic import ValidationError

    from membrane.config.schema import first_problem

    try:
        parsed: Any = _parent_model().model_validate(raw)
    except ValidationError as exc:
        problem = first_problem(exc)
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in problem.loc)
        got = "" if problem.kind == "missing" else f" (got {problem.value!r})"
        what = "Input should be a JSON object" if problem.kind == "model_type" else problem.message
        raise InvalidRequest(
            f"--parent{where}: {what}{got}; expected an object with tools (names or "
            "{name, origin, deferred, mutating}), system_prompt, model, transcript "
            "([{role, content, kind}]), permission_mode, depth, cwd and ceiling (as a "
            "published event shows it)",
            field=where.lstrip("."),
        ) from None
    tools: dict[str, Tool] = {}
    if parsed.tools is None:
        tools = dict(registry.tools())
    for spec in parsed.tools or ():
        known = registry.get(spec.name)
        tools[spec.name] = known or Tool(
            name=spec.name,
            description=f"{spec.name} (held by the parent)",
            input_schema={"type": "object"},
            handler=_absent,
            origin=spec.origin,
            mutating=spec.mutating,
            deferred=spec.deferred,
        )
    # DESIGN rule 13: the parent's own mode caps its child, and so does what its ancestors
    # took away (``ceiling``, as the parent's ``published`` event shows it).
    ceiling = Ceiling.from_settings(permission)
    if parsed.permission_mode is not None:
        ceiling = ceiling.meet(
            Ceiling(mode=permission_mode(parsed.permission_mode)[0], mode_source="parent")
        )
    if parsed.ceiling is not None:
        try:
            ceiling = ceiling.meet(Ceiling.from_json(parsed.ceiling, where="--parent.ceiling"))
        except MembraneError as exc:
            raise InvalidRequest(
                f"--parent.ceiling: {exc.message}; write it as a published event shows it",
                field="ceiling",
            ) from None
    return ParentContext(
        ceiling=ceiling,
        tools=tools,
        system_prompt=parsed.system_prompt,
        model=parsed.model,
        transcript=tuple(_message(m.role, m.content, m.kind) for m in parsed.transcript),
        permission_mode=parsed.permission_mode or permission,
        depth=parsed.depth,
        cwd=parsed.cwd or str(cwd),
    )
