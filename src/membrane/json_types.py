"""Types for the JSON values that cross Membrane's public API.

Tool arguments, tool schemas, error ``data``, stored payloads and model messages are all JSON:
they are written to the store, sent over the wire and shown to a model. These aliases say so in
signatures instead of ``Any``, so a type checker catches a non-JSON value where one is produced
and makes a reader narrow what it takes out.

* ``JSONValue``: any JSON value. Containers are read-only views (``Sequence``, ``Mapping``), so
  a ``list`` or ``tuple`` of JSON values, and a ``dict`` of them, are all accepted.
* ``JSONObject``: a JSON object given to Membrane or held in a frozen value; read-only.
* ``JSONDict``: a JSON object Membrane builds and hands over; the caller owns it and may change
  it.

They describe shapes only: nothing checks a value at run time against them (the store and the
wire reject what JSON cannot carry, each with its own error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ForwardRef, TypeAlias

__all__ = ["JSONDict", "JSONObject", "JSONValue"]

if TYPE_CHECKING:
    JSONValue: TypeAlias = (
        bool | int | float | str | Sequence["JSONValue"] | Mapping[str, "JSONValue"] | None
    )
else:
    # The self-reference names this module, so ``typing.get_type_hints`` resolves it from any
    # module that imports only ``JSONObject`` (a bare string would be looked up there).
    _JSON_VALUE = ForwardRef("JSONValue", module=__name__)
    JSONValue = bool | int | float | str | Sequence[_JSON_VALUE] | Mapping[str, _JSON_VALUE] | None

JSONObject: TypeAlias = Mapping[str, JSONValue]
JSONDict: TypeAlias = dict[str, JSONValue]
