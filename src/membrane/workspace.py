"""``membrane.workspace``: the import path of ``Workspace``, which lives in
``membrane.runtime.workspace`` (beside ``SubagentRuntime.open``, which opens one)."""

from membrane.runtime.workspace import Workspace, memory_file, require_folder

__all__ = ["Workspace", "memory_file", "require_folder"]
