"""Reading a frontmatter with PyYAML's C safe loader where the result is YAML 1.2's.

Membrane reads YAML 1.2 (ruamel): ``off`` is a string, ``010`` is ten, ``1:20`` is a string.
PyYAML's C loader (libyaml) reads YAML 1.1, about 14x faster. ``load_mapping`` composes the text
with it and accepts the result only where both versions mean the same thing; anything else, and
anything it cannot read, is ``None``, and the caller reads the text with ruamel (which also
gives the precise error positions and the value repairs). It never guesses:

* a quoted or block scalar is a string in both versions: accepted when it is tagged a string;
* a plain scalar is accepted when YAML 1.1 reads it as a string that starts with a letter (YAML
  1.2's only other plain words, ``null``/``true``/``false`` in their three spellings, are the
  same in 1.1), as a null (``~``, ``null``, empty), as ``true``/``false``, as a decimal
  integer without a leading zero, or as a decimal fraction. ``yes``/``no``/``on``/``off``,
  octal, hexadecimal and sexagesimal numbers, exponents, underscores, ``.inf``, timestamps and
  any other string starting with a digit, a sign, a dot or ``~`` fall back;
* a merge key (``<<``), an explicit tag of another kind, an alias (``*name``), a key that is
  not a scalar, a repeated key (an error in 1.2, the last one wins in PyYAML), several
  documents, or a top level that is not a mapping fall back.

Without libyaml (``yaml.__with_libyaml__`` false) everything falls back.
"""

from __future__ import annotations

import re
from typing import Any, Final

import yaml

__all__ = ["load_mapping"]

_STR: Final = "tag:yaml.org,2002:str"
_NULL: Final = "tag:yaml.org,2002:null"
_BOOL: Final = "tag:yaml.org,2002:bool"
_INT: Final = "tag:yaml.org,2002:int"
_FLOAT: Final = "tag:yaml.org,2002:float"
_MAP: Final = "tag:yaml.org,2002:map"
_SEQ: Final = "tag:yaml.org,2002:seq"

_NULLS: Final = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS: Final = frozenset({"true", "True", "TRUE", "false", "False", "FALSE"})
_DECIMAL: Final = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FRACTION: Final = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+")
#: A plain string starting with one of these might be a number, a null or a special float in
#: one version and not the other.
_AMBIGUOUS_START: Final = frozenset("0123456789+-.~")

_LOADER: Final = getattr(yaml, "CSafeLoader", None) if yaml.__with_libyaml__ else None


class _Fallback(Exception):
    """The text means something else in YAML 1.1, or cannot be judged here."""


def load_mapping(yaml_text: str) -> tuple[dict[str, Any], dict[str, int]] | None:
    """The frontmatter's mapping and the 0-based YAML line of each top-level key, read with the
    C loader; ``None`` where YAML 1.1 and 1.2 could differ or the C loader cannot read it."""
    if _LOADER is None:
        return None
    if not yaml_text.strip():
        return {}, {}
    loader = _LOADER(yaml_text)
    try:
        node = loader.get_single_node()
        if not isinstance(node, yaml.MappingNode):
            return None
        _check(node, set())
        data = loader.construct_document(node)
    except (yaml.YAMLError, _Fallback, RecursionError, ValueError, TypeError, OverflowError):
        return None
    finally:
        loader.dispose()
    lines = {str(key.value): key.start_mark.line for key, _ in node.value}
    return {str(key): value for key, value in data.items()}, lines


def _check(node: yaml.Node, seen: set[int]) -> None:
    """Raise ``_Fallback`` unless ``node`` reads the same in YAML 1.1 and 1.2."""
    if id(node) in seen:
        raise _Fallback  # an alias: ruamel decides
    seen.add(id(node))
    if isinstance(node, yaml.ScalarNode):
        _check_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        if node.tag != _SEQ:
            raise _Fallback
        for item in node.value:
            _check(item, seen)
    elif isinstance(node, yaml.MappingNode):
        if node.tag != _MAP:
            raise _Fallback
        keys: set[tuple[str, str]] = set()
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                raise _Fallback
            _check(key, seen)
            if (key.tag, key.value) in keys:
                raise _Fallback  # a repeated key: an error with its position from ruamel
            keys.add((key.tag, key.value))
            _check(value, seen)
    else:  # pragma: no cover - the composer makes only these three
        raise _Fallback


def _check_scalar(node: yaml.ScalarNode) -> None:
    tag, text = node.tag, node.value
    if node.style:  # quoted or block: a string in both versions
        if tag != _STR:
            raise _Fallback
        return
    if tag == _STR:
        if text[:1] in _AMBIGUOUS_START or text in _NULLS or text in _BOOLS:
            raise _Fallback
    elif tag == _NULL:
        if text not in _NULLS:
            raise _Fallback
    elif tag == _BOOL:
        if text not in _BOOLS:
            raise _Fallback  # yes/no/on/off: strings in YAML 1.2
    elif tag == _INT:
        if _DECIMAL.fullmatch(text) is None:
            raise _Fallback  # octal, hexadecimal, sexagesimal, underscores
    elif tag == _FLOAT:
        if _FRACTION.fullmatch(text) is None:
            raise _Fallback
    else:  # a merge key, a timestamp, an explicit tag of another kind
        raise _Fallback
