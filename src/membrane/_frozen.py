"""``@frozen``: a frozen, slotted dataclass whose methods are not generated from text.

``@dataclass(frozen=True, slots=True)`` writes ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` as source text and compiles each one when
the class is defined: about 0.4 ms a class, every time a process imports it (the byte-code
cache holds the module, not those methods), which made up a third of the start of
``membrane explain``. ``@frozen`` builds the same class for about a tenth of that: the class
keeps its hand-written ``__init__`` (compiled once, into the module's byte code), and the other
methods are shared functions reading the fields, with what the generated ones do:

- ``__init__`` is the class's own; ``@frozen`` checks, once, that it takes exactly the fields,
  in their order, with their defaults (``FACTORY`` for a ``default_factory``, which it then
  calls), and that it calls ``__post_init__`` when the class has one;
- ``__repr__``, ``__eq__`` and ``__hash__`` are the dataclass's (fields with ``repr``,
  ``compare``, ``hash``); ``__setattr__``/``__delattr__`` raise ``FrozenInstanceError``;
  pickling and ``copy`` restore the fields as a frozen slotted dataclass does;
- it is a dataclass: ``dataclasses.fields``, ``replace``, ``asdict`` and ``is_dataclass``
  work, and type checkers read it as a frozen dataclass (``dataclass_transform``).

The ``__init__`` sets each field with ``object.__setattr__``, as the generated one does.

``membrane._record`` builds the classes every command's start needs without importing
``dataclasses`` at all, compiling one text per class (about 0.2 ms). ``@frozen`` is for the
classes only the resolution, the tools and the sandbox need (``membrane explain``, a run), where
``dataclasses`` is imported anyway: it compiles nothing per class, and takes the field options
(``repr``, ``compare``, ``init``) those classes declare.
"""

from __future__ import annotations

import dataclasses
from _thread import get_ident
from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError
from operator import attrgetter
from typing import Any, Final, TypeVar, dataclass_transform

__all__ = ["FACTORY", "frozen"]

_C = TypeVar("_C", bound=type)


class _Factory:
    """The default of a ``default_factory`` field in a hand-written ``__init__``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


#: ``def __init__(self, tools: Mapping[str, Tool] = FACTORY)``: the field's factory makes it.
FACTORY: Final[Any] = _Factory()


def _reader(names: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    """The tuple of ``names``' values of an object (what a generated method compares)."""
    if len(names) > 1:
        read: Callable[[object], tuple[Any, ...]] = attrgetter(*names)
        return read
    if names:
        (name,) = names
        return lambda obj: (getattr(obj, name),)
    return lambda obj: ()


def _check_init(cls: type, fields: tuple[Field[Any], ...]) -> None:
    """The class's ``__init__`` takes the fields as the generated one would."""
    where = f"@frozen {cls.__qualname__}.__init__"
    init = cls.__dict__.get("__init__")
    code = getattr(init, "__code__", None)
    if code is None:
        raise TypeError(f"{where}: write the __init__ (the fields, in order, with defaults)")
    wanted = [f for f in fields if f.init]
    positional = [f for f in wanted if not f.kw_only]
    keyword = [f for f in wanted if f.kw_only]
    names = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]
    expected = tuple(f.name for f in (*positional, *keyword))
    if code.co_kwonlyargcount != len(keyword) or names != expected:
        raise TypeError(f"{where} takes {names}, the fields are {expected}")
    defaults = init.__defaults__ or ()  # type: ignore[union-attr]
    with_defaults = [f.name for f in positional][len(positional) - len(defaults) :]
    given = dict(zip(with_defaults, defaults, strict=True))
    given.update(init.__kwdefaults__ or {})  # type: ignore[union-attr]
    for f in wanted:
        default = FACTORY if f.default_factory is not MISSING else f.default
        got = given.get(f.name, MISSING)
        if got is not default and (type(got) is not type(default) or got != default):
            raise TypeError(f"{where}: {f.name} must default to {default!r}")
    if "__post_init__" in cls.__dict__ and "__post_init__" not in code.co_names:
        raise TypeError(f"{where} must call __post_init__")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, Field))
def frozen(cls: _C) -> _C:
    """``cls`` as a frozen, slotted dataclass with its own ``__init__``."""
    made: Any = dataclasses.dataclass(init=False, repr=False, eq=False, slots=True)(cls)
    fields: tuple[Field[Any], ...] = dataclasses.fields(made)
    _check_init(made, fields)
    names = frozenset(f.name for f in fields)
    every = tuple(f.name for f in fields)
    compared = _reader(tuple(f.name for f in fields if f.compare))
    hashed = _reader(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))
    shown = tuple(f.name for f in fields if f.repr)
    showing: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = (id(self), get_ident())
        if key in showing:  # a value holding itself, as reprlib.recursive_repr shows it
            return "..."
        showing.add(key)
        try:
            inner = ", ".join([f"{name}={getattr(self, name)!r}" for name in shown])
        finally:
            showing.discard(key)
        return f"{self.__class__.__qualname__}({inner})"

    def __eq__(self: Any, other: object) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    def __setattr__(self: Any, name: str, value: object) -> None:
        if type(self) is made or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(made, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is made or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(made, self).__delattr__(name)

    def __getstate__(self: Any) -> list[Any]:
        return [getattr(self, name) for name in every]

    def __setstate__(self: Any, state: list[Any]) -> None:
        for name, value in zip(every, state, strict=False):
            object.__setattr__(self, name, value)

    methods = (__repr__, __eq__, __hash__, __setattr__, __delattr__, __getstate__, __setstate__)
    for method in methods:
        if made.__dict__.get(method.__name__) is None:  # ``__hash__ = None`` is not one
            method.__qualname__ = f"{made.__qualname__}.{method.__name__}"
            setattr(made, method.__name__, method)
    return made  # type: ignore[no-any-return]
