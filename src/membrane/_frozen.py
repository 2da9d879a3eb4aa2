"""``@frozen``: a frozen, slotted dataclass built without generated code or ``dataclasses``.

``@dataclass(frozen=True, slots=True)`` writes ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` as source text and compiles each one when the
class is defined: about 0.4 ms a class, every time a process imports it (the byte-code cache
holds the module, not those methods), and ``dataclasses`` imports ``inspect`` (with ``ast``,
``dis`` and ``tokenize``). ``@frozen`` builds the same class for about a tenth of that, without
that import: the class keeps its hand-written ``__init__`` (compiled once, into the module's
byte code), and the other methods are shared functions reading the fields, with what the
generated ones do:

- ``__init__`` is the class's own; ``@frozen`` checks, once, that it takes exactly the fields
  (those not declared ``init=False``), in their order, with their defaults (``FACTORY`` for a
  ``default_factory``, which it then calls), and that it calls ``__post_init__`` when the class
  has one;
- ``__repr__``, ``__eq__`` and ``__hash__`` are the dataclass's (fields with ``repr``,
  ``compare``, ``hash``); ``__setattr__``/``__delattr__`` raise
  ``dataclasses.FrozenInstanceError``; pickling and ``copy`` restore the fields as a frozen
  slotted dataclass does;
- it is a dataclass when asked: ``dataclasses.fields``, ``replace``, ``asdict`` and
  ``is_dataclass`` work, ``__dataclass_fields__`` being made by ``dataclasses`` itself, from
  the same declarations, the first time anything reads it; and type checkers read it as a
  frozen dataclass (``dataclass_transform``). ``membrane._record.fields`` and ``replace`` take
  it too (without importing ``dataclasses``): its fields are those its ``__init__`` takes.

Options are declared with this module's ``field`` (``default``, ``default_factory``, ``init``,
``repr``, ``compare``, ``hash``). The ``__init__`` sets each field with ``object.__setattr__``,
as the generated one does.

``membrane._record`` builds the classes every command's start needs from one compiled text per
class (about 0.2 ms); ``@frozen`` is for the classes the resolution, the tools and the sandbox
add (``membrane explain``, a run), which declare field options and their own ``__init__``.
"""

from __future__ import annotations

from _thread import get_ident
from operator import attrgetter

from membrane._record import MISSING
from membrane._record import Field as _RecordField

TYPE_CHECKING = False  # not ``typing``'s: this module imports nothing it does not use
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Final, TypeVar, dataclass_transform

    _C = TypeVar("_C", bound=type)
else:

    def dataclass_transform(**_: object) -> object:
        return lambda function: function


__all__ = ["FACTORY", "Field", "field", "frozen"]


class _Factory:
    """The default of a ``default_factory`` field in a hand-written ``__init__``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


#: ``def __init__(self, tools: Mapping[str, Tool] = FACTORY)``: the field's factory makes it.
FACTORY: Final[Any] = _Factory()


class Field(_RecordField):
    """One declared field of a ``@frozen`` class, with the options ``dataclasses.field`` has."""

    __slots__ = ("compare", "hash", "init", "repr")

    def __init__(
        self,
        default: Any = MISSING,
        default_factory: Any = MISSING,
        *,
        init: bool = True,
        repr: bool = True,
        compare: bool = True,
        hash: bool | None = None,
    ) -> None:
        super().__init__(default, default_factory)
        self.init = init
        self.repr = repr
        self.compare = compare
        self.hash = hash

    @property
    def hashed(self) -> bool:
        return self.compare if self.hash is None else self.hash


def field(
    *,
    default: Any = MISSING,
    default_factory: Callable[[], Any] | Any = MISSING,
    init: bool = True,
    repr: bool = True,
    compare: bool = True,
    hash: bool | None = None,
) -> Any:
    """A field's declaration when a plain default does not say enough, as
    ``dataclasses.field``."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("a field has a default or a default factory, not both")
    return Field(default, default_factory, init=init, repr=repr, compare=compare, hash=hash)


def _reader(names: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    """The tuple of ``names``' values of an object (what a generated method compares)."""
    if len(names) > 1:
        read: Callable[[object], tuple[Any, ...]] = attrgetter(*names)
        return read
    if names:
        (name,) = names
        return lambda obj: (getattr(obj, name),)
    return lambda obj: ()


def _declared(cls: type) -> list[Field]:
    """The fields ``cls`` declares, in order, as ``dataclasses`` reads them."""
    # The class's own annotations (``inspect`` is not imported for them).
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    declared = []
    for name, annotation in annotations.items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar", "InitVar", "KW_ONLY")):
            raise TypeError(f"@frozen {cls.__qualname__}.{name}: declare plain fields only")
        value = cls.__dict__.get(name, MISSING)
        if type(value).__module__ == "dataclasses":  # its options would be taken for a default
            raise TypeError(f"@frozen {cls.__qualname__}.{name}: use membrane._frozen.field")
        found = value if isinstance(value, Field) else Field(value)
        found.name = name
        declared.append(found)
    return declared


def _check_init(cls: type, declared: list[Field]) -> None:
    """The class's ``__init__`` takes the fields as the generated one would."""
    where = f"@frozen {cls.__qualname__}.__init__"
    init = cls.__dict__.get("__init__")
    code = getattr(init, "__code__", None)
    if code is None:
        raise TypeError(f"{where}: write the __init__ (the fields, in order, with defaults)")
    wanted = [f for f in declared if f.init]
    names = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]
    expected = tuple(f.name for f in wanted)
    if code.co_kwonlyargcount or names != expected:
        raise TypeError(f"{where} takes {names}, the fields are {expected}")
    defaults = init.__defaults__ or ()  # type: ignore[union-attr]
    with_defaults = [f.name for f in wanted][len(wanted) - len(defaults) :]
    given = dict(zip(with_defaults, defaults, strict=True))
    for f in wanted:
        default = FACTORY if f.default_factory is not MISSING else f.default
        got = given.get(f.name, MISSING)
        if got is not default and (type(got) is not type(default) or got != default):
            raise TypeError(f"{where}: {f.name} must default to {default!r}")
    if "__post_init__" in cls.__dict__ and "__post_init__" not in code.co_names:
        raise TypeError(f"{where} must call __post_init__")


#: The frozen dataclasses made for ``__dataclass_fields__``, one per ``@frozen`` class read so.
_TWINS: list[type] = []


class _DataclassFields:
    """A ``@frozen`` class's ``__dataclass_fields__``, made on first use by ``dataclasses``
    from a frozen dataclass with the same fields, which then replaces this descriptor."""

    def __get__(self, instance: object, owner: type) -> object:
        import dataclasses

        annotations = owner.__dict__["__annotations__"]  # noqa: RUF063 - as _declared
        kept: dict[str, object] = {}
        body: dict[str, object] = {"__module__": owner.__module__, "__annotations__": kept}
        for f in owner.__dict__["_frozen_fields"]:
            kept[f.name] = annotations[f.name]
            options = {"init": f.init, "repr": f.repr, "compare": f.compare, "hash": f.hash}
            if f.default_factory is not MISSING:
                options["default_factory"] = f.default_factory
            elif f.default is not MISSING:
                options["default"] = f.default
            body[f.name] = dataclasses.field(**options)
        twin: Any = dataclasses.dataclass(frozen=True)(type(owner.__name__, (), body))
        # Kept: a class is a reference cycle, so a dropped twin would be left to the garbage
        # collector (and found by a cycle count taken while a child runs).
        _TWINS.append(twin)
        type.__setattr__(owner, "__dataclass_fields__", twin.__dataclass_fields__)
        type.__setattr__(owner, "__dataclass_params__", twin.__dataclass_params__)
        return twin.__dataclass_fields__


def _frozen_error(message: str) -> AttributeError:
    from dataclasses import FrozenInstanceError  # only when a frozen field is written

    return FrozenInstanceError(message)


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def frozen(cls: _C) -> _C:
    """``cls`` as a frozen, slotted dataclass with its own ``__init__``."""
    declared = _declared(cls)
    _check_init(cls, declared)
    names = frozenset(f.name for f in declared)
    every = tuple(f.name for f in declared)
    compared = _reader(tuple(f.name for f in declared if f.compare))
    hashed = _reader(tuple(f.name for f in declared if f.hashed))
    shown = tuple(f.name for f in declared if f.repr)
    showing: set[tuple[int, int]] = set()
    made: Any = None

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
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(made, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is made or name in names:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(made, self).__delattr__(name)

    def __getstate__(self: Any) -> list[Any]:
        return [getattr(self, name) for name in every]

    def __setstate__(self: Any, state: list[Any]) -> None:
        for name, value in zip(every, state, strict=False):
            object.__setattr__(self, name, value)

    body = {
        name: value
        for name, value in cls.__dict__.items()
        if name not in names and name not in ("__dict__", "__weakref__")
    }
    methods = (__repr__, __eq__, __hash__, __setattr__, __delattr__, __getstate__, __setstate__)
    for method in methods:
        if body.get(method.__name__) is None:  # ``__hash__ = None`` is not one of the class's
            method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
            body[method.__name__] = method
    body["__slots__"] = every
    body["__qualname__"] = cls.__qualname__
    body["__match_args__"] = tuple(f.name for f in declared if f.init)
    body["_frozen_fields"] = tuple(declared)
    body["_record_fields"] = tuple(f for f in declared if f.init)
    body["__dataclass_fields__"] = _DataclassFields()
    made = type(cls)(cls.__name__, cls.__bases__, body)
    return made  # type: ignore[no-any-return]
