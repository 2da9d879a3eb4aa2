"""Value classes declared as dataclasses are, built without the ``dataclasses`` module.

``@dataclass`` imports ``inspect`` (and with it ``ast``, ``dis`` and ``tokenize``) and compiles
each generated method from its own text when the class is defined, about 0.4 ms a class, every
time a process imports it (the byte-code cache holds the module, not those methods): the
classes every command builds at start would cost more than the rest of
``membrane agents list``. ``@record(frozen=..., slots=...)`` builds the class
``@dataclass(frozen=..., slots=...)`` would, and ``@frozen`` is ``@record(frozen=True,
slots=True)``:

- ``__init__``: a class that writes its own keeps it (compiled once, into the module's byte
  code, which is what makes a class cheap to define), checked once against the fields: it takes
  exactly those not declared ``init=False``, in their order (the ``kw_only`` ones after a
  ``*``), with their defaults (``FACTORY`` for a ``default_factory``, which it then calls), and
  it calls ``__post_init__`` when the class has one (``membrane._record_written`` checks it,
  imported only for such a class). A class that does not gets one compiled
  from text (its signature is the fields'), the one method that is, and only once it is
  needed: its first instances are made by a generic ``__init__`` that reads the fields (a
  command makes one instance of many classes, or none), and it is compiled when the class has
  made ``_INTERPRETED_CALLS`` of them, when something reads ``cls.__init__``, or for a call
  the generic one does not bind plainly (so that it fails with the compiled one's error).
  Classes whose fields differ only in names and defaults share that compile, each with its
  own copy of the code (``CodeType.replace``);
- ``__repr__``, ``__eq__`` and, when frozen, ``__hash__`` are the dataclass's (fields with
  ``repr``, ``compare``, ``hash``), shared functions reading the fields; a frozen class's
  ``__setattr__``/``__delattr__`` raise ``dataclasses.FrozenInstanceError`` (imported only
  then); a slotted one's pickling and ``copy`` restore the fields past them; ``__slots__`` and
  ``__match_args__`` are the dataclass's;
- it is a dataclass when asked: ``dataclasses.fields``, ``replace``, ``asdict`` and
  ``is_dataclass`` work, ``__dataclass_fields__`` being made by ``dataclasses`` itself, from the
  same declarations, the first time anything reads it (``membrane._record_twin``, imported
  only then); type checkers read it as a dataclass
  (``dataclass_transform``).

Options are declared with this module's ``field`` (``default``, ``default_factory``, ``init``,
``repr``, ``compare``, ``hash``, ``kw_only``). A record declares its own fields: no base class
with fields, no ``ClassVar``, ``InitVar`` or ``KW_ONLY`` annotation. Membrane's own code reads
``fields`` and ``replace`` from here (without importing ``dataclasses``): a record's fields, for
them, are those its ``__init__`` takes.
"""

from __future__ import annotations

import sys
from _thread import get_ident
from operator import attrgetter
from types import CellType, CodeType, FunctionType, MethodType

TYPE_CHECKING = False  # not ``typing``'s: this module imports nothing it does not use
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Final, TypeVar, dataclass_transform

    T = TypeVar("T")
    _C = TypeVar("_C", bound=type)
else:

    def dataclass_transform(**_: object) -> object:
        return lambda function: function


__all__ = ["FACTORY", "MISSING", "Field", "field", "fields", "frozen", "record", "replace"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: No default (or no default factory) was declared.
MISSING: Final = _Missing()


class _Factory:
    """The default of a ``default_factory`` field in an ``__init__``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


#: ``def __init__(self, tools: Mapping[str, Tool] = FACTORY)``: the field's factory makes it.
FACTORY: Final[Any] = _Factory()


class Field:
    """One declared field: its name, its default or default factory (or ``MISSING``), and the
    options ``dataclasses.field`` has."""

    __slots__ = ("compare", "default", "default_factory", "hash", "init", "kw_only", "name", "repr")

    def __init__(
        self,
        default: Any = MISSING,
        default_factory: Any = MISSING,
        *,
        init: bool = True,
        repr: bool = True,
        compare: bool = True,
        hash: bool | None = None,
        kw_only: bool = False,
    ) -> None:
        self.name = ""
        self.default: Any = default
        self.default_factory: Any = default_factory
        self.init = init
        self.repr = repr
        self.compare = compare
        self.hash = hash
        self.kw_only = kw_only

    @property
    def hashed(self) -> bool:
        return self.compare if self.hash is None else self.hash

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r})"


def field(
    *,
    default: Any = MISSING,
    default_factory: Callable[[], Any] | Any = MISSING,
    init: bool = True,
    repr: bool = True,
    compare: bool = True,
    hash: bool | None = None,
    kw_only: bool = False,
) -> Any:
    """A field's declaration when a plain default does not say enough, as
    ``dataclasses.field``."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("a field has a default or a default factory, not both")
    return Field(
        default,
        default_factory,
        init=init,
        repr=repr,
        compare=compare,
        hash=hash,
        kw_only=kw_only,
    )


def fields(record_or_class: object) -> tuple[Field, ...]:
    """The fields a record class (or one of its instances) takes in its ``__init__``, in
    declaration order."""
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
    dataclass with the same fields (``membrane._record_twin``), which then replaces this
    descriptor on the class."""

    def __init__(self, frozen: bool) -> None:
        self.frozen = frozen

    def __get__(self, instance: object, owner: type) -> object:
        from membrane._record_twin import dataclass_fields  # only when something asks

        return dataclass_fields(owner, frozen=self.frozen, missing=MISSING)


def _frozen_error(message: str) -> AttributeError:
    from dataclasses import FrozenInstanceError  # only when a frozen field is written

    return FrozenInstanceError(message)


def _declared(cls: type) -> list[Field]:
    """The fields ``cls`` declares, in order, as ``dataclasses`` reads them."""
    # The class's own annotations (``inspect`` is not imported for them).
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    declared = []
    for name, annotation in annotations.items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar", "InitVar", "KW_ONLY")):
            raise TypeError(f"{cls.__qualname__}.{name}: a record declares plain fields only")
        value = cls.__dict__.get(name, MISSING)
        if type(value).__module__ == "dataclasses":  # its options would be taken for a default
            raise TypeError(f"{cls.__qualname__}.{name}: use membrane._record.field")
        found = value if isinstance(value, Field) else Field(value)
        found.name = name
        declared.append(found)
    return declared


def _check_order(cls: type, declared: list[Field]) -> None:
    """The fields can be an ``__init__``'s parameters: no positional one without a default
    after one with a default (``dataclasses`` refuses the class too)."""
    defaulted = False
    for f in declared:
        if not f.init or f.kw_only:
            continue
        if f.default is MISSING and f.default_factory is MISSING:
            if defaulted:
                raise TypeError(f"{cls.__qualname__}.{f.name}: no default after a field with one")
        else:
            defaulted = True


#: The code of each shape of ``__init__`` compiled so far, by its text: the text names the
#: fields ``f0``, ``f1``, ... (in declaration order), so classes whose fields differ only in
#: their names and default values share one compile, each with a copy of the code that has
#: its own names (``CodeType.replace``; the defaults are the function's, not the code's).
_SHAPES: dict[str, CodeType] = {}


def _shape_code(text: str) -> CodeType:
    code = _SHAPES.get(text)
    if code is None:
        module = compile(text, "<string>", "exec")  # made from field positions alone
        (create,) = [c for c in module.co_consts if isinstance(c, CodeType)]
        (code,) = [c for c in create.co_consts if isinstance(c, CodeType)]
        _SHAPES[text] = code
    return code


def _compiled_init(cls: type, declared: tuple[Field, ...], *, frozen: bool, post_init: bool) -> Any:
    """``cls.__init__`` as ``dataclasses`` compiles it from text, its signature the fields'.

    As ``dataclasses`` does, it runs in the module's namespace and is annotated with the
    fields' types, so ``typing.get_type_hints`` reads it as it reads any function there."""
    scope: dict[str, object] = {"_FACTORY": FACTORY, "_set": object.__setattr__}
    names = {"_FACTORY": "_FACTORY", "_set": "_set", "self": "self"}
    params: list[str] = []
    named: list[str] = []
    defaults: list[object] = []
    kwdefaults: dict[str, object] = {}
    body: list[str] = []
    for index, f in enumerate(declared):
        name = f"f{index}"
        names[name] = f.name
        default: object = f.default
        if f.default_factory is not MISSING:
            default = FACTORY
            scope[f"_fact_{name}"] = f.default_factory
            names[f"_fact_{name}"] = f"_fact_{f.name}"
            value = f"_fact_{name}()"
            if f.init:
                value = f"{value} if {name} is _FACTORY else {name}"
        elif f.default is not MISSING:
            value = name
            if not f.init:
                scope[f"_dflt_{name}"] = f.default
                names[f"_dflt_{name}"] = f"_dflt_{f.name}"
                value = f"_dflt_{name}"
        elif f.init:
            value = name
        else:
            continue  # an ``init=False`` field without a default is not set, as by dataclasses
        if f.init:
            param = name if default is MISSING else f"{name}=_FACTORY"
            if f.kw_only:
                named.append(param)
                if default is not MISSING:
                    kwdefaults[f.name] = default
            else:
                params.append(param)
                if default is not MISSING:
                    defaults.append(default)
        body.append(f"  _set(self, {name!r}, {value})" if frozen else f"  self.{name} = {value}")
    if post_init:
        body.append("  self.__post_init__()")
    signature = ", ".join(["self", *params, *(["*", *named] if named else [])])
    text = "\n".join(
        [
            f"def __create_fn__({', '.join(scope)}):",
            f" def __init__({signature}):",
            *(body or ["  pass"]),
            " return __init__",
        ]
    )
    code = _shape_code(text)

    def renamed(found: tuple[object, ...]) -> tuple[Any, ...]:
        return tuple([names.get(n, n) if type(n) is str else n for n in found])

    code = code.replace(
        co_varnames=renamed(code.co_varnames),
        co_names=renamed(code.co_names),
        co_consts=renamed(code.co_consts),
        co_freevars=renamed(code.co_freevars),
    )
    module = sys.modules.get(cls.__module__)
    closure = tuple([CellType(scope[n]) for n in _shape_code(text).co_freevars])
    init: Any = FunctionType(
        code, module.__dict__ if module is not None else {}, "__init__", tuple(defaults), closure
    )
    init.__kwdefaults__ = kwdefaults or None
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    init.__annotations__ = {f.name: annotations[f.name] for f in declared if f.init}
    init.__annotations__["return"] = None  # as the generated one's
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


#: How many instances a record makes through the interpreted ``__init__`` before its own is
#: compiled: a compile costs as much as a few dozen interpreted calls of a small class.
_INTERPRETED_CALLS = 32


class _CompiledInit:
    """A record's compiled ``__init__`` before it is compiled. Its first ``_INTERPRETED_CALLS``
    instances are made by one generic ``__init__`` that reads the fields (``interpret``), which
    sets them as the compiled one would; after that, or as soon as anything reads
    ``cls.__init__``, the method is compiled and put on the class in its place. A process
    compiles only the ``__init__`` of the classes it makes many instances of: the CLI imports
    many classes that a command makes one instance of, or none. A call the generic one does
    not bind plainly (a missing, extra or repeated argument) is left to the compiled one, so
    that it fails with the error the compiled one raises."""

    __slots__ = (
        "calls",
        "declared",
        "frozen",
        "owner",
        "positional",
        "post_init",
        "required",
        "taken",
    )

    def __init__(self, declared: tuple[Field, ...], *, frozen: bool, post_init: bool) -> None:
        self.owner: type = object
        self.declared = declared
        self.frozen = frozen
        self.post_init = post_init
        self.calls = 0
        self.positional = tuple([f.name for f in declared if f.init and not f.kw_only])
        self.taken = frozenset([f.name for f in declared if f.init])
        self.required = tuple(
            [
                f.name
                for f in declared
                if f.init and f.default is MISSING and f.default_factory is MISSING
            ]
        )

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is not None and self.calls < _INTERPRETED_CALLS:
            self.calls += 1
            return MethodType(self.interpret, instance)
        init = self.compiled()
        return init if instance is None else init.__get__(instance, owner)

    def compiled(self) -> Any:
        """The compiled ``__init__``, now on the class."""
        init = _compiled_init(
            self.owner, self.declared, frozen=self.frozen, post_init=self.post_init
        )
        type.__setattr__(self.owner, "__init__", init)
        return init

    def interpret(self, instance: Any, *args: object, **kwargs: object) -> None:
        """``instance.__init__(*args, **kwargs)``, read from the fields."""
        given = dict(zip(self.positional, args, strict=False))
        if len(args) > len(self.positional):
            return self.compiled()(instance, *args, **kwargs)  # type: ignore[no-any-return]
        for name, value in kwargs.items():
            if name in given or name not in self.taken:
                return self.compiled()(instance, *args, **kwargs)  # type: ignore[no-any-return]
            given[name] = value
        for name in self.required:
            if name not in given:
                return self.compiled()(instance, *args, **kwargs)  # type: ignore[no-any-return]
        put = object.__setattr__ if self.frozen else setattr
        for f in self.declared:
            if f.default_factory is not MISSING:
                value = given.get(f.name, FACTORY) if f.init else FACTORY
                if value is FACTORY:
                    value = f.default_factory()
            elif f.init:
                value = given.get(f.name, f.default)
            elif f.default is not MISSING:
                value = f.default
            else:
                continue  # an ``init=False`` field without a default is not set
            put(instance, f.name, value)
        if self.post_init:
            instance.__post_init__()
        return None


def _reader(names: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    """The tuple of ``names``' values of an object (what a generated method compares)."""
    if len(names) > 1:
        read: Callable[[object], tuple[Any, ...]] = attrgetter(*names)
        return read
    if names:
        (name,) = names
        return lambda obj: (getattr(obj, name),)
    return lambda obj: ()


def _build(cls: type, *, frozen: bool, slots: bool) -> Any:
    declared = _declared(cls)
    taken = [f for f in declared if f.init]
    own_init = cls.__dict__.get("__init__")
    compiled = None
    if own_init is None:
        _check_order(cls, declared)
        compiled = _CompiledInit(
            tuple(declared), frozen=frozen, post_init=hasattr(cls, "__post_init__")
        )
    else:
        from membrane._record_written import check_init  # only for a class that writes one

        check_init(cls, own_init, taken, missing=MISSING, factory=FACTORY)
    every = tuple([f.name for f in declared])
    names = frozenset(every)
    compared = _reader(tuple([f.name for f in declared if f.compare]))
    hashed = _reader(tuple([f.name for f in declared if f.hashed]))
    shown = tuple([f.name for f in declared if f.repr])
    showing: set[tuple[int, int]] = set()
    made: Any = cls

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
        # Through the slots, past a frozen __setattr__, as a slotted dataclass's does.
        for name, value in zip(every, state, strict=False):
            object.__setattr__(self, name, value)

    methods: list[Any] = [__repr__, __eq__]
    if frozen:  # as a dataclass with ``eq``: hashable when frozen, else not
        methods += (__hash__, __setattr__, __delattr__)
    if slots:
        methods += (__getstate__, __setstate__)
    attributes: dict[str, object] = {"__init__": own_init if compiled is None else compiled}
    if not frozen and cls.__dict__.get("__hash__") is None:
        attributes["__hash__"] = None
    for method in methods:
        if cls.__dict__.get(method.__name__) is None:  # ``__hash__ = None`` is not the class's
            method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
            attributes[method.__name__] = method
    attributes["__match_args__"] = tuple([f.name for f in taken if not f.kw_only])
    attributes["_record_declared"] = tuple(declared)
    attributes["_record_fields"] = tuple(taken)
    attributes["__dataclass_fields__"] = _DataclassFields(frozen)
    if slots:
        body = {
            name: value
            for name, value in cls.__dict__.items()
            if name not in names and name not in ("__dict__", "__weakref__")
        }
        body.update(attributes)
        body["__slots__"] = every
        body["__qualname__"] = cls.__qualname__
        made = type(cls)(cls.__name__, cls.__bases__, body)
        if compiled is not None:
            compiled.owner = made
        return made
    for f in declared:
        if f.default is not MISSING:
            setattr(cls, f.name, f.default)
        elif f.name in cls.__dict__:
            delattr(cls, f.name)  # a default factory's declaration
    for name, value in attributes.items():
        setattr(cls, name, value)
    if compiled is not None:
        compiled.owner = cls
    return cls


@dataclass_transform(field_specifiers=(field, Field))
def record(*, frozen: bool = False, slots: bool = False) -> Callable[[type[T]], type[T]]:
    """Make the decorated class a record: ``@record(frozen=True, slots=True)`` as
    ``@dataclass(frozen=True, slots=True)``."""

    def build(cls: type[T]) -> type[T]:
        built: type[T] = _build(cls, frozen=frozen, slots=slots)
        return built

    return build


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def frozen(cls: _C) -> _C:
    """``cls`` as ``@record(frozen=True, slots=True)`` makes it (a frozen, slotted dataclass)."""
    built: _C = _build(cls, frozen=True, slots=True)
    return built
