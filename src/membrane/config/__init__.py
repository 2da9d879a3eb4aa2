"""Settings: the validated values (``Settings``, roles, rate limits) and their loading from the
``config.toml`` layers."""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports

if typing.TYPE_CHECKING:
    from membrane.config.budget import Budget
    from membrane.config.load import (
        global_config_path,
        load_settings,
        membrane_home,
        project_config_path,
    )
    from membrane.config.values import (
        DEFAULT_TOOLS,
        McpServerSpec,
        ModelEntry,
        ModelPrice,
        ProductRule,
        RateLimit,
        Retention,
        RoleSpec,
        Settings,
    )

__all__ = [
    "DEFAULT_TOOLS",
    "Budget",
    "McpServerSpec",
    "ModelEntry",
    "ModelPrice",
    "ProductRule",
    "RateLimit",
    "Retention",
    "RoleSpec",
    "Settings",
    "global_config_path",
    "load_settings",
    "membrane_home",
    "project_config_path",
]

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Budget": "membrane.config.budget",
        "global_config_path": "membrane.config.load",
        "load_settings": "membrane.config.load",
        "membrane_home": "membrane.config.load",
        "project_config_path": "membrane.config.load",
        "DEFAULT_TOOLS": "membrane.config.values",
        "McpServerSpec": "membrane.config.values",
        "ModelEntry": "membrane.config.values",
        "ModelPrice": "membrane.config.values",
        "ProductRule": "membrane.config.values",
        "RateLimit": "membrane.config.values",
        "Retention": "membrane.config.values",
        "RoleSpec": "membrane.config.values",
        "Settings": "membrane.config.values",
    },
    globals(),
)
