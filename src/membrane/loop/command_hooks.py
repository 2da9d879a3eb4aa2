"""Running a child's command hooks (Claude Code's ``hooks``) in its sandbox and checkout.

``CommandHooks`` holds the hooks of one child (``membrane.agents.command_hooks``). Each hook runs
as ``bash -c COMMAND``, a real subprocess under the same boundary as the child's ``Bash``: its
checkout as the working directory, the sandbox backend the settings choose (its writes confined
to what the child may write), the child's environment plus ``CLAUDE_PROJECT_DIR`` (the checkout),
and Claude Code's JSON on stdin: ``session_id`` (the run id), ``hook_event_name``, ``cwd``,
``permission_mode``, ``agent``, and per event ``tool_name``/``tool_input``, ``tool_response``
(``PostToolUse``), ``prompt`` (``UserPromptSubmit``) or ``stop_hook_active`` (``SubagentStop``).

What a hook's ending means, as in Claude Code:

* exit 2: *block*; its stderr is the reason the model reads;
* exit 0: its stdout, when it is a JSON object, may decide: ``decision: "block"`` with a
  ``reason`` blocks, ``continue: false`` with a ``stopReason`` blocks too, and
  ``hookSpecificOutput.permissionDecision`` (``allow``, ``deny``, ``ask``, with
  ``permissionDecisionReason``) answers a ``PreToolUse``; ``hookSpecificOutput.
  additionalContext`` is context for the model. A ``UserPromptSubmit`` hook's plain stdout is
  context too;
* any other exit, a timeout or a command that cannot start: a non-blocking error, recorded.

Every run is recorded as a ``hook`` event (event, command, tool, outcome, exit code). Hooks never
widen authority: they run only for calls the child's view already holds, an ``allow`` lifts no
permission rule (the call still meets them all), and ``ask`` goes to the host's approver by the
same path as an ``ask`` rule.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, cast

from anyio import to_thread

from membrane.agents.command_hooks import CommandHook
from membrane.builtin_tools.paths import checkout_root
from membrane.errors import MembraneError, ToolBlocked, ToolCallDenied
from membrane.json_types import JSONDict, JSONObject, JSONValue
from membrane.loop.permissions import PermissionGate
from membrane.sandbox.runner import Sandbox, SandboxPolicy
from membrane.tools.spec import Tool, ToolContext, ToolOutput

__all__ = ["CommandHookGate", "CommandHooks", "HookOutcome"]

#: What a hook reported: one of ``ok``, ``block``, ``allow``, ``deny``, ``ask``, ``error``,
#: ``timeout``.
_SHOWN: Final = 2000
Emit = Callable[[str, Mapping[str, Any]], None]


def _ignore(kind: str, data: Mapping[str, Any]) -> None:
    return None


@dataclass(frozen=True, slots=True)
class HookOutcome:
    """How one hook ended. ``decision``: ``ok``, ``block``, ``allow``, ``deny``, ``ask``,
    ``error`` or ``timeout``; ``reason``: what the model (or the approver) reads;
    ``context``: text the hook adds for the model."""

    decision: str
    reason: str | None = None
    context: str | None = None
    exit_code: int | None = None

    @property
    def blocks(self) -> bool:
        return self.decision in ("block", "deny")


class CommandHooks:
    """The command hooks of one child. ``policy``: the deployment's sandbox; ``emit``: the
    child's event callback (each run is a ``hook`` event); ``mode``: its permission mode."""

    __slots__ = ("_emit", "_hooks", "_policy", "mode")

    def __init__(
        self,
        hooks: Sequence[CommandHook],
        *,
        policy: SandboxPolicy | None = None,
        emit: Emit = _ignore,
        mode: str = "default",
    ) -> None:
        self._hooks = tuple(hooks)
        self._policy = policy if policy is not None else SandboxPolicy()
        self._emit = emit
        self.mode = mode

    @property
    def hooks(self) -> tuple[CommandHook, ...]:
        return self._hooks

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def of(self, event: str, tool: str | None = None) -> tuple[CommandHook, ...]:
        """The hooks of ``event`` that match ``tool`` (every one, for a non-tool event)."""
        return tuple(
            h for h in self._hooks if h.event == event and (tool is None or h.matches(tool))
        )

    async def run(
        self, hook: CommandHook, context: ToolContext, fields: JSONDict, *, tool: str | None = None
    ) -> HookOutcome:
        """Run ``hook`` with Claude Code's JSON (``fields`` added) on its stdin."""
        root = checkout_root(context)
        payload: JSONDict = {
            "session_id": context.run_id or "",
            "transcript_path": None,
            "cwd": str(root),
            "permission_mode": self.mode,
            "hook_event_name": hook.event,
            "agent": context.agent,
            **fields,
        }
        outcome = await self._spawn(hook, context, root, payload)
        data: JSONDict = {
            "event": hook.event,
            "command": hook.command,
            "decision": outcome.decision,
            "exit_code": outcome.exit_code,
        }
        if tool is not None:
            data["tool"] = tool
        if outcome.reason:
            data["reason"] = _clip(outcome.reason)
        self._emit("hook", data)
        return outcome

    async def _spawn(
        self, hook: CommandHook, context: ToolContext, root: Path, payload: JSONDict
    ) -> HookOutcome:
        shell = shutil.which("bash")
        if shell is None:
            return HookOutcome("error", "no `bash` executable was found on PATH")
        socket = context.env.get("MEMBRANE_SOCKET")
        runtime_socket = Path(socket) if socket else None
        agent, writes = context.agent, not context.read_only
        policy = self._policy.for_agent(network=context.network, read_paths=context.read_paths)
        try:
            sandbox = await to_thread.run_sync(
                lambda: Sandbox.for_checkout(
                    policy, root, agent=agent, writes=writes, runtime_socket=runtime_socket
                )
            )
            done = await sandbox.run(
                [shell, "-c", hook.command],
                cwd=root,
                timeout=hook.timeout,
                env={**os.environ, **context.env, "CLAUDE_PROJECT_DIR": str(root)},
                stdin=json.dumps(payload, ensure_ascii=False, default=str).encode(),
            )
        except (OSError, MembraneError) as exc:
            return HookOutcome("error", f"the hook could not start: {exc}")
        if done.timed_out:
            return HookOutcome("timeout", f"the hook did not finish within {hook.timeout:g} s")
        if done.exit_code == 2:
            return HookOutcome("block", done.stderr.strip() or "blocked by a hook", exit_code=2)
        if done.exit_code != 0:
            why = done.stderr.strip() or f"the hook exited with {done.exit_code}"
            return HookOutcome("error", why, exit_code=done.exit_code)
        return _decision(hook.event, done.stdout)

    async def prompt_submitted(self, prompt: str, context: ToolContext) -> list[str]:
        """Run the settings' ``SubagentStart`` hooks of a subagent, then the
        ``UserPromptSubmit`` hooks on the child's task; the context they add, in order. Raises
        ``tool-blocked`` when a ``UserPromptSubmit`` hook blocks the task (the run ends with
        it); a ``SubagentStart`` hook cannot stop the start, as in Claude Code."""
        added: list[str] = []
        for hook in self.of("SubagentStart"):
            fields: JSONDict = {"agent_id": context.run_id or "", "agent_type": context.agent}
            outcome = await self.run(hook, context, fields)
            if outcome.context:
                added.append(outcome.context)
        for hook in self.of("UserPromptSubmit"):
            outcome = await self.run(hook, context, {"prompt": prompt})
            if outcome.blocks:
                reason = outcome.reason or "no reason given"
                raise ToolBlocked(
                    f"the agent's UserPromptSubmit hook `{hook.command}` blocked its task: "
                    f"{reason}",
                    tool=None,
                    hook=hook.command,
                    reason=reason,
                )
            if outcome.context:
                added.append(outcome.context)
        return added

    async def stop_refused(self, context: ToolContext, *, active: bool) -> str | None:
        """Run the ``SubagentStop`` hooks (and a top-level run's ``Stop`` hooks of the
        settings) when the child gives its final answer: the reason of
        the first that blocks (the child goes on working with it), or ``None``. ``active``:
        the child already went on once because of one (Claude Code's ``stop_hook_active``)."""
        for hook in (*self.of("SubagentStop"), *self.of("Stop")):
            outcome = await self.run(hook, context, {"stop_hook_active": active})
            if outcome.blocks:
                return outcome.reason or "a SubagentStop hook asked to go on"
        return None


def _decision(event: str, stdout: str) -> HookOutcome:
    """What a hook that exited 0 said on its stdout."""
    text = stdout.strip()
    try:
        said = json.loads(text) if text.startswith("{") else None
    except ValueError:
        said = None
    if not isinstance(said, dict):
        # Plain stdout is context only where Claude Code shows it to the model.
        context = text if text and event == "UserPromptSubmit" else None
        return HookOutcome("ok", context=context, exit_code=0)
    specific = said.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    extra = specific.get("additionalContext")
    context = extra if isinstance(extra, str) and extra.strip() else None
    if said.get("continue") is False:
        reason = said.get("stopReason")
        return HookOutcome("block", _text(reason, "a hook stopped it"), context, 0)
    permission = specific.get("permissionDecision")
    if event == "PreToolUse" and permission in ("allow", "deny", "ask"):
        reason = specific.get("permissionDecisionReason")
        return HookOutcome(permission, _text(reason, None), context, 0)
    decision = said.get("decision")
    if decision == "block":
        return HookOutcome("block", _text(said.get("reason"), "blocked by a hook"), context, 0)
    if decision == "approve" and event == "PreToolUse":
        return HookOutcome("allow", _text(said.get("reason"), None), context, 0)
    return HookOutcome("ok", context=context, exit_code=0)


def _text(value: object, default: str | None) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else default


class CommandHookGate:
    """The child's call gate when it has tool hooks: its ``PreToolUse`` hooks, then its
    permission rules (``rules``, which also ask the approver for a hook's ``ask``); after a call
    succeeds, its ``PostToolUse`` hooks, whose feedback joins the result the model reads."""

    __slots__ = ("hooks", "rules")

    def __init__(self, hooks: CommandHooks, rules: PermissionGate) -> None:
        self.hooks = hooks
        self.rules = rules

    async def check(self, tool: Tool, arguments: JSONObject, context: ToolContext) -> None:
        asked: list[str] = []
        for hook in self.hooks.of("PreToolUse", tool.name):
            fields: JSONDict = {"tool_name": tool.name, "tool_input": dict(arguments)}
            outcome = await self.hooks.run(hook, context, fields, tool=tool.name)
            rule = f"PreToolUse hook `{hook.command}`"
            if outcome.blocks:
                reason = outcome.reason or "no reason given"
                raise ToolCallDenied(
                    f"the call to {tool.name} was blocked by the agent's {rule}: {reason}",
                    tool=tool.name,
                    rule=rule,
                    subject=None,
                    reason=reason,
                )
            if outcome.decision == "ask":
                asked.append(rule + (f" ({outcome.reason})" if outcome.reason else ""))
        for rule in asked:
            await self.rules.approve(tool, arguments, context, rule=rule, subject=None)
        await self.rules.check(tool, arguments, context)

    async def after(
        self, tool: Tool, arguments: JSONObject, context: ToolContext, result: object
    ) -> object:
        """``result`` with what the ``PostToolUse`` hooks said for the model."""
        feedback: list[str] = []
        for hook in self.hooks.of("PostToolUse", tool.name):
            fields: JSONDict = {
                "tool_name": tool.name,
                "tool_input": dict(arguments),
                "tool_response": _response(result),
            }
            outcome = await self.hooks.run(hook, context, fields, tool=tool.name)
            if outcome.decision == "block" and outcome.reason:
                feedback.append(outcome.reason)
            if outcome.context:
                feedback.append(outcome.context)
        return _with_feedback(result, feedback) if feedback else result

    def __repr__(self) -> str:
        return f"CommandHookGate({len(self.hooks.hooks)} hooks, {self.rules!r})"


def _response(result: object) -> JSONValue:
    """A tool's result as the JSON a ``PostToolUse`` hook reads."""
    value = result.text or result.structured if isinstance(result, ToolOutput) else result
    try:
        return cast(JSONValue, json.loads(json.dumps(value, default=str)))
    except ValueError:
        return str(value)


def _with_feedback(result: object, feedback: list[str]) -> object:
    note = "\n".join(f"[PostToolUse hook] {line}" for line in feedback)
    if isinstance(result, str):
        return f"{result}\n\n{note}"
    if isinstance(result, dict):
        return {**result, "hook_feedback": feedback}
    if isinstance(result, ToolOutput):
        if result.text:
            return replace(result, text=f"{result.text}\n\n{note}")
        return {"result": result.structured, "hook_feedback": feedback}
    return {"result": _response(result), "hook_feedback": feedback}


def _clip(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
