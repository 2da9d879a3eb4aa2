"""One JSON schema per command's ``--json`` output (docs/cli.md describes the same shapes).

Every top-level object is closed (``additionalProperties: false``) and names its required keys,
so a key a command drops, renames or adds fails its test. Warnings everywhere are
``{code, message, file, line}``; a failing command writes ``FAILURE`` on stderr.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ACTIONS",
    "ACTION_RESULT",
    "AGENT",
    "AGENTS",
    "BY_COMMAND",
    "CONSOLE",
    "DOCTOR",
    "ERROR",
    "EVENT",
    "EXPLAIN",
    "FAILURE",
    "INIT",
    "LINEAGE",
    "MCP_LIST",
    "MCP_SERVE",
    "NOTICE",
    "OUTBOX",
    "REQUEUED",
    "RESULT",
    "RUNS",
    "RUNS_PRUNED",
    "SCHEDULE",
    "SCHEDULES",
    "SCHEDULE_REMOVED",
    "SERVE",
    "SHOW",
    "SKILLS",
    "STARTED",
    "VALIDATE",
    "WARNING",
    "WORKFLOW",
    "closed",
    "nullable",
]

Schema = dict[str, Any]

STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
BOOLEAN: Schema = {"type": "boolean"}
OBJECT: Schema = {"type": "object"}
CODE: Schema = {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$"}


def nullable(schema: Schema) -> Schema:
    """``schema`` or ``null``."""
    return {"anyOf": [schema, {"type": "null"}]}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def closed(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    """An object with exactly these keys: all of ``required``, any of ``optional``."""
    return {
        "type": "object",
        "required": sorted(required),
        "additionalProperties": False,
        "properties": {**required, **(optional or {})},
    }


WARNING = closed({"code": CODE, "message": STRING, "file": STRING, "line": nullable(INTEGER)})
ERROR = closed({"code": CODE, "message": STRING, "data": OBJECT})
#: ``--json`` on stderr when a command fails.
FAILURE = closed({"error": ERROR, "exit_code": INTEGER})

_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
USAGE = closed({kind: INTEGER for kind in _TOKENS})
#: A cost in US dollars; ``null`` when a model's price is not known (never 0 for unknown).
COST = nullable(NUMBER)

_SHADOW = closed({"root": STRING, "path": STRING})
#: An agent's model as a start with no ``--model`` resolves it, and whether it can start.
AGENT_MODEL = closed(
    {
        "written": nullable(STRING),
        "spec": nullable(STRING),
        "provider": nullable(STRING),
        "model": nullable(STRING),
        "via": nullable(STRING),
        "source": STRING,
        "fallback": nullable(WARNING),
        "can_start": BOOLEAN,
        "reason": nullable(STRING),
    }
)
#: ``agents list --json``.
AGENTS = closed(
    {
        "agents": array(
            closed(
                {
                    "name": STRING,
                    "root": STRING,
                    "dialect": STRING,
                    "path": STRING,
                    "enabled": BOOLEAN,
                    "description": nullable(STRING),
                    "shadows": array(_SHADOW),
                    "model": AGENT_MODEL,
                    "warnings": array(WARNING),
                }
            )
        ),
        "warnings": array(WARNING),
        "errors": array(ERROR),
    }
)
#: ``agents validate --json``.
VALIDATE = closed(
    {
        "files": INTEGER,
        "usable": INTEGER,
        "unusable": INTEGER,
        "can_start": INTEGER,
        "agents": array(closed({"name": STRING, "path": STRING, "model": AGENT_MODEL})),
        "warnings": array(WARNING),
        "errors": array(ERROR),
    }
)
#: ``explain --json``: the contract's sections (docs/resolution.md describes each).
EXPLAIN = closed(
    {
        key: OBJECT
        for key in (
            "definition", "invocation", "prompt", "extensions", "tools", "checkout",
            "permissions", "sandbox", "model", "budget", "settings",
        )
    }
    | {"warnings": array(WARNING)}
    | {"authority_digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}}
    | {"role": nullable(STRING)}
)  # fmt: skip

#: ``agents show --json``: the definition as read, every field it sets.
AGENT = {
    "type": "object",
    "required": ["name", "root", "path", "dialect", "body", "lines", "warnings", "shadows"],
    "properties": {
        "name": STRING,
        "root": STRING,
        "path": STRING,
        "dialect": STRING,
        "body": STRING,
        "lines": {"type": "object", "additionalProperties": INTEGER},
        "warnings": array(WARNING),
        "shadows": array(_SHADOW),
    },
}

#: ``actions list --json``.
ACTIONS = closed(
    {
        "actions": array(
            {
                "type": "object",
                "required": ["name", "description", "inputSchema"],
                "properties": {"name": STRING, "description": STRING, "inputSchema": OBJECT},
            }
        )
    }
)
#: ``actions run --json``: whatever the tool returned, under ``result``.
ACTION_RESULT = closed({"result": {}})

#: ``doctor --json``.
DOCTOR = closed(
    {
        "runtime": closed(
            {
                "socket": STRING,
                "answers": BOOLEAN,
                "runtimeInfo": nullable(OBJECT),
                "note": nullable(STRING),
            }
        ),
        "caller": closed(
            {
                "role": nullable(STRING),
                "source": STRING,
                "owner": BOOLEAN,
                "claimed_role": nullable(STRING),
            }
        ),
        "project": closed(
            {
                "root": STRING,
                "id": STRING,
                "state": STRING,
                "state_exists": BOOLEAN,
                "state_check": {"anyOf": [{"type": "null"}, {"const": "ok"}, array(STRING)]},
            }
        ),
        "sandbox": {"type": "object", "required": ["machine"]},
        "mcp_servers": {
            "type": "object",
            "additionalProperties": closed({"command": nullable(STRING), "url": nullable(STRING)}),
        },
        "external_clis": array({"type": "object", "required": ["id", "status"]}),
        "skills": closed(
            {"roots": array(STRING), "skills": array(STRING), "warnings": array(WARNING)}
        ),
        "problems": array(closed({"problem": STRING, "fix": STRING})),
    },
    {
        "queue": closed(
            {"database": STRING, "queue": STRING, "reachable": BOOLEAN},
            {
                "error": STRING,
                "waiting": INTEGER,
                "running": INTEGER,
                "workers": array(
                    closed(
                        {
                            "worker": STRING,
                            "runs": INTEGER,
                            "state": {"enum": ["alive", "gone", "unknown"]},
                        }
                    )
                ),
            },
        )
    },
)

#: ``init --json``.
INIT = closed({"written": array(STRING), "kept": array(STRING)})

#: ``skills list --json``.
SKILLS = closed(
    {
        "roots": array(STRING),
        "skills": array(
            closed(
                {
                    "name": STRING,
                    "description": STRING,
                    "folder": STRING,
                    "root": STRING,
                    "shadows": array(STRING),
                }
            )
        ),
        "warnings": array(WARNING),
    }
)

#: ``mcp list --json``.
MCP_LIST = closed(
    {
        "servers": array(
            closed(
                {
                    "name": STRING,
                    "transport": STRING,
                    "target": STRING,
                    "state": STRING,
                    "reason": nullable(STRING),
                    "tools": array(STRING),
                    "cached": BOOLEAN,
                }
            )
        )
    }
)
#: ``mcp serve --json`` and ``run``/``resume --json``: each warning on stderr, one JSON line.
NOTICE = closed({"warning": WARNING})
#: ``mcp serve --http PORT --json``: its one announcement on stderr, or a warning.
MCP_SERVE = {"anyOf": [NOTICE, closed({"listening": STRING, "token": STRING})]}

_SCHEDULE_FIELDS: dict[str, Schema] = {
    "schedule_id": STRING,
    "agent": STRING,
    "task": STRING,
    "kind": {"enum": ["in", "at", "cron"]},
    "timezone": STRING,
    "next_due": nullable(NUMBER),
    "created_at": NUMBER,
    "cron": nullable(STRING),
    "catch_up": {"enum": ["once", "skip"]},
    "last": nullable(OBJECT),
    "role": nullable(STRING),
    "next_run_local": nullable(STRING),
    "next_run_iso": nullable(STRING),
}
#: ``schedule add --json``: the schedule.
SCHEDULE = closed(_SCHEDULE_FIELDS)
#: ``schedule list --json``.
SCHEDULES = closed({"schedules": array(SCHEDULE)})
#: ``schedule remove --json``.
SCHEDULE_REMOVED = closed({"removed": STRING})

_RUN_ROW = closed(
    {
        "run_id": STRING,
        "agent": STRING,
        "parent_id": nullable(STRING),
        "depth": INTEGER,
        "status": STRING,
        "created_at": NUMBER,
        "pending_notices": INTEGER,
        "usage": USAGE,
        "usage_total": USAGE,
        "cost": COST,
        "cost_total": COST,
        "held_by": nullable(STRING),
    },
    {"budget": OBJECT},
)
#: ``runs --json``.
RUNS = closed({"state": STRING, "runs": array(_RUN_ROW)})
#: ``runs prune --json``: what went, by kind.
RUNS_PRUNED = closed(
    {
        "state": STRING,
        "pruned": closed(
            {
                key: INTEGER
                for key in (
                    "sessions",
                    "events",
                    "messages",
                    "outbox",
                    "dead_letters",
                    "receipts",
                    "lineage_edges",
                    "freed_bytes",
                )
            }
        ),
    }
)

#: One line of ``run --json`` / ``resume --json`` before the last: a lifecycle event.
EVENT = closed(
    {
        "seq": INTEGER,
        "run_id": STRING,
        "parent_id": nullable(STRING),
        "agent": STRING,
        "kind": {
            "enum": [
                "published", "turn", "usage", "model_note", "model_attempt_failed",
                "tool_call", "tool_result",
                "vetoed_call", "hook", "agent_update", "question", "answer", "completed",
                "error", "stopped",
            ]
        },
        "data": OBJECT,
        "at": NUMBER,
    }
)  # fmt: skip
#: The last line of ``run --json`` / ``resume --json``: how the run ended.
RESULT = closed(
    {
        "kind": {"const": "result"},
        "run_id": STRING,
        "agent": STRING,
        "status": {"enum": ["completed", "wrapped_up", "stopped", "aborted", "error"]},
        "text": STRING,
        "turns": INTEGER,
        "usage": USAGE,
        "usage_total": USAGE,
        "cost": COST,
        "cost_total": COST,
    },
    {"error": ERROR, "structured": {}, "worktree": OBJECT},
)
#: ``run --background --json``: the one line once the run has started.
STARTED = closed(
    {
        "kind": {"const": "started"},
        "run_id": STRING,
        "agent": STRING,
        "parent_id": nullable(STRING),
        "depth": INTEGER,
        "status": STRING,
        "background": BOOLEAN,
        "pid": INTEGER,
        "log": nullable(STRING),
    },
    {"queue_position": INTEGER, "result": OBJECT},
)


def _lineage_node(depth: int) -> Schema:
    children: Schema = array(_lineage_node(depth - 1)) if depth else array(OBJECT)
    return closed(
        {"run_id": STRING, "agent": nullable(STRING), "status": nullable(STRING),
         "children": children},
        {"edge": closed({"status": STRING, "agent": STRING, "model": nullable(STRING),
                         "spawn_fingerprint": OBJECT, "brief_digest": STRING,
                         "summary": nullable(STRING)})},
    )  # fmt: skip


#: ``lineage --json``: the delegation tree (three levels checked).
LINEAGE = closed({"state": STRING, "roots": array(_lineage_node(3))})

_OUTBOX_ITEM = closed(
    {
        "id": INTEGER,
        "kind": nullable(STRING),
        "recipient": STRING,
        "attempts": INTEGER,
        "created_at": NUMBER,
        "last_error": nullable(STRING),
    },
    {"dead_at": NUMBER, "next_attempt_at": NUMBER},
)
#: ``outbox list --json``.
OUTBOX = closed({"state": STRING, "dead": BOOLEAN, "items": array(_OUTBOX_ITEM)})
#: ``outbox retry --json``: the requeued item.
REQUEUED = closed(
    {"id": INTEGER, "recipient": STRING, "attempts": INTEGER, "next_attempt_at": NUMBER}
)

#: ``workflow show|approve|accept-light|decline-light|waive|decide --json``: the planning state.
WORKFLOW = {
    "type": "object",
    "required": [
        "workflow", "phase", "steps", "auto_skipped_rounds", "waived_rounds", "decisions",
        "evidence", "version",
    ],
    "additionalProperties": False,
    "properties": {
        "workflow": STRING,
        "phase": STRING,
        "steps": {"type": "object", "additionalProperties": OBJECT},
        "auto_skipped_rounds": array(STRING),
        "waived_rounds": array(STRING),
        "decisions": {"type": "object", "additionalProperties": STRING},
        # The assets the finishing worker registered: kind, url, title, run_id.
        "evidence": array({"type": "object", "additionalProperties": STRING}),
        "version": INTEGER,
    },
    # The stamps of the answers given so far, e.g. ``approved_at``.
    "patternProperties": {"^[a-z_]+_at$": NUMBER},
}  # fmt: skip

#: ``show RUN_ID --json``: the run, its tool calls, transcript, events and lineage.
SHOW = {
    "type": "object",
    "required": ["run", "children", "tool_calls", "transcript", "events", "lineage"],
    "additionalProperties": False,
    "properties": {
        "run": {
            "type": "object",
            "required": [
                "run_id",
                "agent",
                "status",
                "usage",
                "usage_total",
                "cost",
                "cost_total",
                "worktree",
                "text",
            ],
            "properties": {"authority_digest": nullable(STRING), "cost": COST, "cost_total": COST},
        },
        "children": array(
            closed(
                {
                    "run_id": STRING,
                    "agent": STRING,
                    "status": STRING,
                    "usage": USAGE,
                    "usage_total": USAGE,
                    "cost": COST,
                    "cost_total": COST,
                }
            )
        ),
        "tool_calls": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "name", "arguments", "result", "result_truncated", "is_error"],
            },
        },
        "transcript": {"type": "array"},
        "events": {
            "type": "array",
            "items": {"type": "object", "required": ["seq", "kind", "at", "data"]},
        },
        "lineage": {"type": "array"},
    },
}

#: ``serve --json``: the one line on stderr once the socket answers.
SERVE = closed(
    {
        "listening": STRING,
        "pid": INTEGER,
        "default_role": nullable(STRING),
        "owner_role": nullable(STRING),
    }
)


#: ``console --json``: the one line on stdout once the page answers.
CONSOLE = closed({"url": STRING, "port": INTEGER, "role": nullable(STRING)})


#: ``worker --json``: each notice on stderr (ready, then one per run it drives or requeues).
WORKER = {
    "anyOf": [
        closed(
            {
                "event": {"const": "ready"},
                "worker": STRING,
                "queue": STRING,
                "database": STRING,
                "concurrency": INTEGER,
            }
        ),
        closed(
            {"event": STRING, "run_id": STRING},
            {"agent": STRING, "status": STRING, "worker": STRING, "error": STRING},
        ),
        closed({"event": STRING}, {"pid": INTEGER, "error": STRING}),
    ]
}


#: The schema of each command's ``--json`` output (for a stream, of its last line; for a server,
#: of its notice on stderr).
BY_COMMAND: dict[str, Schema] = {
    "actions list": ACTIONS,
    "actions run": ACTION_RESULT,
    "agents list": AGENTS,
    "agents show": AGENT,
    "agents validate": VALIDATE,
    "console": CONSOLE,
    "doctor": DOCTOR,
    "explain": EXPLAIN,
    "init": INIT,
    "lineage": LINEAGE,
    "mcp list": MCP_LIST,
    "mcp serve": MCP_SERVE,
    "outbox list": OUTBOX,
    "outbox retry": REQUEUED,
    "resume": RESULT,
    "run": RESULT,
    "runs list": RUNS,
    "runs prune": RUNS_PRUNED,
    "schedule add": SCHEDULE,
    "schedule list": SCHEDULES,
    "schedule remove": SCHEDULE_REMOVED,
    "serve": SERVE,
    "show": SHOW,
    "worker": WORKER,
    "skills list": SKILLS,
    **{
        f"workflow {act}": WORKFLOW
        for act in ("show", "approve", "accept-light", "decline-light", "waive", "decide")
    },
}
