"""Seed 003 section 7, the resolution exercise, as one golden test."""

from __future__ import annotations

from resolve_support import builtins, deployment, extension_tools

from membrane.agents.frontmatter import parse_definition
from membrane.config.values import ModelEntry, Settings
from membrane.models.base import Message
from membrane.resolve import CallParams, ParentContext, resolve

REVIEWER = """\
---
name: reviewer
model: acme/file-model
thinking: high
max_turns: 8
inherit_context: false
run_in_background: false
isolated: false
isolation: off
prompt_mode: append
tools: read, grep, ext:alpha/search
disallowed_tools: grep
extensions: alpha, beta
exclude_extensions: beta
---
Review only the authorization boundary.
"""

PARENT_PROMPT = "You are the lead engineer of this repository."

SYSTEM = f"""\
{PARENT_PROMPT}

# Subagent
The instructions above belong to the agent that started you. You now work as the subagent \
'reviewer' on the task you are given. Your working folder is /srv/project; where the \
instructions above name another folder, that folder is the parent's, not yours.

<active_agent name="reviewer">
You are the subagent "reviewer".
</active_agent>

# Environment
- Working folder: /srv/project
- Delegation depth: 1 of at most 3
- Permission mode: default

# Tools
Your tools: Read, search.
You cannot change files: every tool you have only reads. Report what should change instead \
of changing it.

<agent_instructions>
Review only the authorization boundary.
</agent_instructions>"""


def test_the_seed_resolution_exercise() -> None:
    definition = parse_definition(REVIEWER, path=".membrane/agents/project.md", root="project")
    call = CallParams.from_mapping(
        {
            "model": "acme/call-model",
            "thinking": "minimal",
            "max_turns": 2,
            "inherit_context": True,
            "run_in_background": True,
            "isolated": True,
            "isolation": "worktree",
        }
    )
    parent = ParentContext(
        tools=builtins(),
        system_prompt=PARENT_PROMPT,
        model="acme/parent-model",
        transcript=(Message("user", "Ship the login change."), Message("assistant", "On it.")),
    )
    deploy = deployment(
        extensions={
            "alpha": extension_tools("alpha", ["search", "write_remote"]),
            "beta": extension_tools("beta", ["lint"]),
        },
        # The exercise's deployment serves the acme models it names.
        settings=Settings(models={"acme/file-model": ModelEntry("openai", "file-model")}),
    )
    authority = resolve(definition, call, parent, deploy)
    out = authority.to_json()
    assert out["definition"].pop("dialect") == "membrane"
    assert out["definition"].pop("fields")["isolation"] == {
        "value": "off", "source": "frontmatter", "key": "isolation", "line": 9
    }  # fmt: skip
    assert out == {
        "definition": {
            "name": "reviewer",
            "root": "project",
            "path": ".membrane/agents/project.md",
        },
        "invocation": {
            "model": {"value": "acme/file-model", "source": "frontmatter"},
            "thinking": {"value": "high", "source": "frontmatter"},
            "max_turns": {"value": 8, "source": "frontmatter"},
            "inherit_context": {"value": False, "source": "frontmatter"},
            "run_in_background": {"value": False, "source": "frontmatter"},
            "isolated": {"value": False, "source": "frontmatter"},
            "isolation": {"value": "off", "source": "frontmatter"},
            "permission": {"value": "default", "source": "parent"},
            "tool_choice": {"value": None, "source": "default"},
        },
        "prompt": {"mode": "append", "system": SYSTEM, "task_prefix": ""},
        "extensions": {"loaded": ["alpha"], "excluded": ["beta"]},
        "tools": {
            "callable": ["Read", "search"],
            "left_out": {
                "Bash": "not selected",
                "Edit": "not selected",
                "Glob": "not selected",
                "Grep": "disallowed_tools",
                "Write": "not selected",
                "lint": "extension excluded",
                "write_remote": "not selected",
            },
            "skills": {"selected": None, "left_out": {}, "preloaded": []},
            "servers": {},
        },
        "checkout": {
            "kind": "main",
            "path": "/srv/project",
            "read_roots": [],
            "read_roots_left_out": {},
        },
        "permissions": {
            "mode": "default",
            "inherits_parent_rules": False,
            "tools": {},
            # Nothing was taken away above this child (DESIGN rule 13).
            "ceiling": {
                "mode": {"value": "bypassPermissions", "source": None},
                "denied": [],
                "allowed": [],
                "rules": [],
                "network": {"value": True, "source": None},
                "root": {"value": None, "source": None},
                "read_roots": {"value": None, "source": None},
            },
        },
        "warnings": [],
    }
    assert not authority.may_delegate
