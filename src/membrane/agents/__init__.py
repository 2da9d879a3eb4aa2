"""Agent definitions: the tolerant frontmatter parser, the catalog and the writer."""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports

if typing.TYPE_CHECKING:
    from membrane.agents.catalog import Catalog, builtin_definitions
    from membrane.agents.definition import (
        UNSET,
        AgentDefinition,
        DefinitionWarning,
        Dispatch,
        Unset,
    )
    from membrane.agents.dialect import Dialect
    from membrane.agents.frontmatter import parse_definition, read_definition
    from membrane.agents.roots import Root
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

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Catalog": "membrane.agents.catalog",
        "Dispatch": "membrane.agents.definition",
        "Root": "membrane.agents.roots",
        "builtin_definitions": "membrane.agents.catalog",
        "UNSET": "membrane.agents.definition",
        "AgentDefinition": "membrane.agents.definition",
        "DefinitionWarning": "membrane.agents.definition",
        "Unset": "membrane.agents.definition",
        "parse_definition": "membrane.agents.frontmatter",
        "read_definition": "membrane.agents.frontmatter",
        "Dialect": "membrane.agents.translation",
        "render_definition": "membrane.agents.writer",
        "update_definition_text": "membrane.agents.writer",
        "write_definition": "membrane.agents.writer",
    },
    globals(),
)
