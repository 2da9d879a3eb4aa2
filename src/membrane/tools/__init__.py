"""Tools: the spec, the live registry, restrictions, scopes and the one resolver (``ToolView``)."""
