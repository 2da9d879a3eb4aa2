"""The check of a record's own ``__init__`` (``membrane._record``): done once, when the class is
built, and imported only by a class that writes one. It is given the fields and the sentinels
(``MISSING``, ``FACTORY``) it compares with, and imports nothing of ``membrane._record``."""

from __future__ import annotations

TYPE_CHECKING = False  # not ``typing``'s: this module imports nothing it does not use
if TYPE_CHECKING:
    from typing import Any

__all__ = ["check_init"]


def check_init(cls: type, init: Any, taken: list[Any], *, missing: object, factory: object) -> None:
    """The class's own ``__init__`` takes the fields (``membrane._record.Field``) as the
    generated one would: ``factory`` as a default factory's default, ``missing`` for none."""
    where = f"{cls.__qualname__}.__init__"
    code = getattr(init, "__code__", None)
    if code is None:
        raise TypeError(f"{where}: write a function (the fields, in order, with defaults)")
    positional = [f for f in taken if not f.kw_only]
    keywords = [f for f in taken if f.kw_only]
    names = code.co_varnames[1 : code.co_argcount]
    named = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    expected = tuple(f.name for f in positional)
    expected_named = tuple(f.name for f in keywords)
    if names != expected or named != expected_named:
        wanted = expected + (("*", *expected_named) if expected_named else ())
        got = names + (("*", *named) if named else ())
        raise TypeError(f"{where} takes {got}, the fields are {wanted}")
    defaults = init.__defaults__ or ()
    with_defaults = [f.name for f in positional][len(positional) - len(defaults) :]
    given = dict(zip(with_defaults, defaults, strict=True))
    given.update(init.__kwdefaults__ or {})
    for f in taken:
        default = factory if f.default_factory is not missing else f.default
        got = given.get(f.name, missing)
        if got is not default and (type(got) is not type(default) or got != default):
            raise TypeError(f"{where}: {f.name} must default to {default!r}")
    if "__post_init__" in cls.__dict__ and "__post_init__" not in code.co_names:
        raise TypeError(f"{where} must call __post_init__")
