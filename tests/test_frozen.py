"""``@frozen`` behaves as ``@dataclass(frozen=True, slots=True)``, measured against a twin
built by ``dataclasses`` itself (that ``membrane explain`` then imports neither ``dataclasses``
nor ``inspect`` is pinned in ``tests/cli/test_start_imports.py``)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from membrane import _record
from membrane._frozen import FACTORY, frozen
from membrane._frozen import field as frozen_field


@frozen
class Made:
    """A value."""

    name: str
    tags: dict[str, int] = frozen_field(default_factory=dict)
    size: int = 0
    secret: str = frozen_field(default="", repr=False, compare=False)
    memo: dict[str, int] = frozen_field(default_factory=dict, init=False, repr=False, compare=False)

    def __init__(
        self, name: str, tags: dict[str, int] = FACTORY, size: int = 0, secret: str = ""
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "tags", {} if tags is FACTORY else tags)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "secret", secret)
        object.__setattr__(self, "memo", {})
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.size < 0:
            raise ValueError("size")


@dataclass(frozen=True, slots=True)
class Generated:
    """A value."""

    name: str
    tags: dict[str, int] = field(default_factory=dict)
    size: int = 0
    secret: str = field(default="", repr=False, compare=False)
    memo: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.size < 0:
            raise ValueError("size")


def both(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    return Made(*args, **kwargs), Generated(*args, **kwargs)


def shape(obj: object) -> object:
    """What ``dataclasses`` sees of ``obj``, with the class name left out."""
    return [(f.name, f.default, f.init, f.repr, f.compare, f.hash) for f in dataclasses.fields(obj)]


def test_fields_and_the_dataclass_functions_are_the_generated_ones() -> None:
    made, generated = both("a", {"x": 1}, size=2, secret="s")
    assert dataclasses.is_dataclass(made)
    assert shape(made) == shape(generated)
    assert Made.__match_args__ == Generated.__match_args__
    assert Made.__slots__ == Generated.__slots__
    assert not hasattr(made, "__dict__")
    assert dataclasses.asdict(made) == dataclasses.asdict(generated)
    assert dataclasses.astuple(made) == dataclasses.astuple(generated)
    changed = dataclasses.replace(made, size=5)
    assert type(changed) is Made
    assert (changed.name, changed.size, changed.tags) == ("a", 5, {"x": 1})
    with pytest.raises(ValueError, match="size"):
        dataclasses.replace(made, size=-1)  # __post_init__ runs, as on a generated class


def test_defaults_and_factories_are_the_generated_ones() -> None:
    made, generated = both("a")
    assert (made.tags, made.size, made.secret, made.memo) == (
        generated.tags,
        generated.size,
        generated.secret,
        generated.memo,
    )
    assert made.tags is not Made("b").tags  # a fresh dict per instance
    with pytest.raises(ValueError, match="size"):
        Made("a", size=-1)


def test_repr_equality_and_hash_are_the_generated_ones() -> None:
    made, generated = both("a", {"x": 1}, size=2, secret="s")
    assert repr(made) == repr(generated).replace("Generated", "Made")
    assert made == Made("a", {"x": 1}, size=2, secret="other")  # secret is not compared
    assert made != Made("a", {"x": 1}, size=3)
    assert made != generated  # another class is never equal
    assert made.__eq__(object()) is NotImplemented
    with pytest.raises(TypeError, match="unhashable"):  # tags are compared, and a dict
        hash(made)
    with pytest.raises(TypeError, match="unhashable"):
        hash(generated)

    @frozen
    class Pair:
        left: int
        right: str = frozen_field(default="", compare=False)

        def __init__(self, left: int, right: str = "") -> None:
            object.__setattr__(self, "left", left)
            object.__setattr__(self, "right", right)

    assert hash(Pair(1, "a")) == hash(Pair(1, "b")) == hash((1,))
    assert {Pair(1, "a"): 1}[Pair(1, "b")] == 1

    @frozen
    class Node:
        child: object = None

        def __init__(self, child: object = None) -> None:
            object.__setattr__(self, "child", child)

    holder: list[object] = []
    node = Node(holder)
    holder.append(node)
    assert (
        repr(node)
        == "test_repr_equality_and_hash_are_the_generated_ones.<locals>.Node(child=[...])"
    )


def test_fields_cannot_be_assigned_or_deleted() -> None:
    made, generated = both("a")
    for obj in (made, generated):
        with pytest.raises(dataclasses.FrozenInstanceError) as assigned:
            obj.size = 3  # type: ignore[misc]
        assert str(assigned.value) == "cannot assign to field 'size'"
        with pytest.raises(dataclasses.FrozenInstanceError) as deleted:
            del obj.size  # type: ignore[misc]
        assert str(deleted.value) == "cannot delete field 'size'"
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.other = 1  # type: ignore[attr-defined]


def test_pickle_and_copy_restore_every_field() -> None:
    made = Made("a", {"x": 1}, size=2, secret="s")
    for restored in (pickle.loads(pickle.dumps(made)), copy.copy(made), copy.deepcopy(made)):
        assert restored == made
        assert restored.secret == "s"


def test_an_init_that_does_not_take_the_fields_as_generated_is_refused() -> None:
    with pytest.raises(TypeError, match="takes"):

        @frozen
        class Swapped:
            a: int
            b: int

            def __init__(self, b: int, a: int) -> None:
                object.__setattr__(self, "a", a)
                object.__setattr__(self, "b", b)

    with pytest.raises(TypeError, match="b must default to 1"):

        @frozen
        class OtherDefault:
            a: int
            b: int = 1

            def __init__(self, a: int, b: int = 2) -> None:
                object.__setattr__(self, "a", a)
                object.__setattr__(self, "b", b)

    with pytest.raises(TypeError, match="b must default to <factory>"):

        @frozen
        class NoFactory:
            b: list[int] = frozen_field(default_factory=list)

            def __init__(self, b: list[int] | None = None) -> None:
                object.__setattr__(self, "b", b or [])

    with pytest.raises(TypeError, match="must call __post_init__"):

        @frozen
        class Unchecked:
            a: int

            def __init__(self, a: int) -> None:
                object.__setattr__(self, "a", a)

            def __post_init__(self) -> None:
                pass

    with pytest.raises(TypeError, match="write the __init__"):

        @frozen
        class NoInit:
            a: int


def test_the_fields_replace_copies_are_those_the_init_takes() -> None:
    made = Made("a", {"x": 1}, size=2, secret="s")
    assert [f.name for f in _record.fields(made)] == ["name", "tags", "size", "secret"]
    changed = _record.replace(made, size=5)
    assert (changed.name, changed.tags, changed.size, changed.secret) == ("a", {"x": 1}, 5, "s")
    assert changed.memo == {} and changed.memo is not made.memo  # made anew, as dataclasses does
    with pytest.raises(TypeError, match="no field 'memo'"):
        _record.replace(made, memo={})


def test_a_dataclasses_field_is_refused_rather_than_taken_for_a_default() -> None:
    with pytest.raises(TypeError, match=r"use membrane\._frozen\.field"):

        @frozen
        class Wrong:
            a: int = field(default=1)

            def __init__(self, a: int = 1) -> None:
                object.__setattr__(self, "a", a)
