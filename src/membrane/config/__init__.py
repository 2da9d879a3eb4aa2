"""Settings: the validated values (``Settings``, roles, rate limits) and their loading from the
``config.toml`` layers."""

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
    RateLimit,
    RoleSpec,
    Settings,
)

__all__ = [
    "DEFAULT_TOOLS",
    "McpServerSpec",
    "ModelEntry",
    "RateLimit",
    "RoleSpec",
    "Settings",
    "global_config_path",
    "load_settings",
    "membrane_home",
    "project_config_path",
]
