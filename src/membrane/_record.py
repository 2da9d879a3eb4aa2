"""Value classes declared as dataclasses are, built without the ``dataclasses`` module.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis`` and ``tokenize``) and compiles
each generated method from its own text, about 0.4 ms a class; the classes every command
builds at start (definitions, settings, the command line's declarations) would cost more than
the rest of ``membrane agents list``. ``record`` gives a class what ``dataclass`` would
(``__init__`` with defaults, default factories and ``__post_init__``; ``__repr__``; ``__eq__``;
``__hash__`` when frozen; a frozen class's ``__setattr__`` and ``__delattr__``; ``__slots__``;
``__match_args__``) and compiles only ``__init__`` (its signature is the fields'): the other
methods are closures over the field names. It covers what Membrane's hot classes declare: their
own fields, no base class with fields, no ``InitVar``, ``ClassVar`` or keyword-only field.

``dataclasses.fields``, ``replace`` and ``asdict`` keep working on a record:
``__dataclass_fields__`` is built by ``dataclasses`` itself, from the same declarations, the
first time anything asks for it. Membrane's own code reads ``fields`` from here.
"""

from __future__ import annotations

import sys
from operator import attrgetter

TYPE_CHECKING = False  # not ``typing``'s: this module imports no more than ``operator``
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Final, TypeVar, dataclass_transform

    T = TypeVar("T")
else:

    def dataclass_transform(**_: object) -> object:
        return lambda function: function


__all__ = ["MISSING", "Field", "FrozenInstanceError", "field", "fields", "record", "replace"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: No default (or no default factory) was declared.
MISSING: Final = _Missing()


class FrozenInstanceError(AttributeError):
    """A field of a frozen record was assigned or deleted."""


class Field:
    """One declared field: its name, and its default or its default factory (or ``MISSING``)."""

    __slots__ = ("default", "default_factory", "name")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING) -> None:
        self.name = ""
        self.default: Any = default
        self.default_factory: Any = default_factory

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r})"


def field(
    *, default: Any = MISSING, default_factory: Callable[[], Any] | _Missing = MISSING
) -> Any:
    """A field's declaration when a plain default does not say enough (``default_factory``)."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("a field has a default or a default factory, not both")
    return Field(default, default_factory)


def fields(record_or_class: object) -> tuple[Field, ...]:
    """The fields of a record class (or of one of its instances), in declaration order."""
    cls = record_or_class if isinstance(record_or_class, type) else type(record_or_class)
    found: tuple[Field, ...] = cls.__dict__["_record_fields"]
    return found


def replace(value: T, /, **changes: object) -> T:
    """A copy of the record ``value`` with ``changes``, built by its ``__init__``."""
    declared = fields(value)
    unknown = changes.keys() - {f.name for f in declared}
    if unknown:
        raise TypeError(f"{type(value).__qualname__} has no field {sorted(unknown)[0]!r}")
    for f in declared:
        changes.setdefault(f.name, getattr(value, f.name))
    return type(value)(**changes)


class _DataclassFields:
    """A record's ``__dataclass_fields__``, made on first use by ``dataclasses`` from a
    dataclass with the same fields, which then replaces this descriptor on the class."""

    def __init__(self, frozen: bool) -> None:
        self.frozen = frozen

    def __get__(self, instance: object, owner: type) -> object:
        import dataclasses

        annotations = owner.__dict__["__annotations__"]  # noqa: RUF063 - no ``inspect`` here
        kept: dict[str, object] = {}
        body: dict[str, object] = {"__module__": owner.__module__, "__annotations__": kept}
        for f in fields(owner):
            kept[f.name] = annotations[f.name]
            if f.default_factory is not MISSING:
                body[f.name] = dataclasses.field(default_factory=f.default_factory)
            elif f.default is not MISSING:
                body[f.name] = f.default
        twin: Any = dataclasses.dataclass(frozen=self.frozen)(type(owner.__name__, (), body))
        type.__setattr__(owner, "__dataclass_fields__", twin.__dataclass_fields__)
        type.__setattr__(owner, "__dataclass_params__", twin.__dataclass_params__)
        return twin.__dataclass_fields__


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _init(cls: type, declared: list[Field], *, frozen: bool) -> object:
    """``cls.__init__``, the one method compiled from text (its signature is the fields').

    As ``dataclasses`` does, it is compiled in the module's namespace and annotated with the
    fields' types, so ``typing.get_type_hints`` reads it as it reads any function there."""
    scope: dict[str, object] = {"_MISSING": MISSING, "_set": object.__setattr__}
    params = []
    body = []
    for f in declared:
        name = f.name
        if f.default_factory is not MISSING:
            scope[f"_fact_{name}"] = f.default_factory
            params.append(f"{name}=_MISSING")
            value = f"_fact_{name}() if {name} is _MISSING else {name}"
        else:
            if f.default is not MISSING:
                scope[f"_dflt_{name}"] = f.default
                params.append(f"{name}=_dflt_{name}")
            else:
                params.append(name)
            value = name
        body.append(f"  _set(self, {name!r}, {value})" if frozen else f"  self.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("  self.__post_init__()")
    text = "\n".join(
        [
            f"def __create_fn__({', '.join(scope)}):",
            f" def __init__(self, {', '.join(params)}):",
            *(body or ["  pass"]),
            " return __init__",
        ]
    )
    module = sys.modules.get(cls.__module__)
    made: dict[str, Any] = {}
    exec(text, module.__dict__ if module is not None else {}, made)  # made from field names
    init = made["__create_fn__"](**scope)
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    init.__annotations__ = {f.name: annotations[f.name] for f in declared}
    init.__annotations__["return"] = "None"
    return init


def _methods(cls: type, declared: list[Field], *, frozen: bool, slots: bool) -> dict[str, object]:
    """The methods of ``cls``: ``__init__`` compiled, the others closures over its fields."""
    names = tuple(f.name for f in declared)
    key = attrgetter(*names) if names else (lambda self: ())

    def __eq__(self: object, other: object) -> object:
        if other.__class__ is self.__class__:
            return bool(key(self) == key(other))
        return NotImplemented

    def __hash__(self: object) -> int:
        return hash(key(self))

    def __repr__(self: object) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    def __getstate__(self: object) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in names)

    def __setstate__(self: object, state: tuple[object, ...]) -> None:
        for name, value in zip(names, state, strict=True):
            object.__setattr__(self, name, value)

    methods: dict[str, object] = {
        "__init__": _init(cls, declared, frozen=frozen),
        "__repr__": __repr__,
        "__eq__": __eq__,
        # As a dataclass with ``eq``: hashable when frozen, else not.
        "__hash__": __hash__ if frozen else None,
    }
    if frozen:
        methods["__setattr__"] = _frozen_setattr
        methods["__delattr__"] = _frozen_delattr
    if slots:  # copy and pickle set the state through the slots, past a frozen __setattr__
        methods["__getstate__"] = __getstate__
        methods["__setstate__"] = __setstate__
    for name, function in methods.items():
        if name not in ("__hash__", "__setattr__", "__delattr__") or function is __hash__:
            function.__qualname__ = f"{cls.__qualname__}.{name}"  # type: ignore[attr-defined]
    return methods


def _build(cls: type, *, frozen: bool, slots: bool) -> type:
    # The class's own annotations, as ``dataclasses`` reads them (``inspect`` is not imported).
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    declared = []
    for name, annotation in annotations.items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar", "InitVar")):
            raise TypeError(f"{cls.__qualname__}.{name}: a record declares plain fields only")
        value = cls.__dict__.get(name, MISSING)
        found = value if isinstance(value, Field) else Field(value)
        found.name = name
        declared.append(found)
    attributes = {
        name: value
        for name, value in _methods(cls, declared, frozen=frozen, slots=slots).items()
        if name not in cls.__dict__ or (name == "__hash__" and cls.__dict__[name] is None)
    }
    attributes["_record_fields"] = tuple(declared)
    attributes["__dataclass_fields__"] = _DataclassFields(frozen)
    attributes["__match_args__"] = tuple(f.name for f in declared)
    if slots:
        body = {
            name: value
            for name, value in cls.__dict__.items()
            if name not in annotations and name not in ("__dict__", "__weakref__")
        }
        body.update(attributes)
        body["__slots__"] = tuple(f.name for f in declared)
        body["__qualname__"] = cls.__qualname__
        return type(cls)(cls.__name__, cls.__bases__, body)
    for f in declared:
        if f.default is MISSING and f.name in cls.__dict__:
            delattr(cls, f.name)  # a default factory's declaration
        elif f.default is not MISSING:
            setattr(cls, f.name, f.default)
    for name, value in attributes.items():
        setattr(cls, name, value)
    return cls


@dataclass_transform(field_specifiers=(field,))
def record(*, frozen: bool = False, slots: bool = False) -> Callable[[type[T]], type[T]]:
    """Make the decorated class a record: ``@record(frozen=True, slots=True)`` as
    ``@dataclass(frozen=True, slots=True)``."""

    def build(cls: type[T]) -> type[T]:
        return _build(cls, frozen=frozen, slots=slots)

    return build
