"""Agent definitions: the tolerant frontmatter parser, the catalog and the writer."""

from __future__ import annotations

from membrane.agents.catalog import Catalog, Dispatch, Root, builtin_definitions
from membrane.agents.definition import UNSET, AgentDefinition, DefinitionWarning, Unset
from membrane.agents.frontmatter import parse_definition, read_definition
from membrane.agents.translation import Dialect
from membrane.agents.writer import render_definition, update_definition_text, write_definition

__all__ = [
    "UNSET",
    "AgentDefinition",
    "Catalog",
    "DefinitionWarning",
    "Dialect",
    "Dispatch",
    "Root",
    "Unset",
    "builtin_definitions",
    "parse_definition",
    "read_definition",
    "render_definition",
    "update_definition_text",
    "write_definition",
]
