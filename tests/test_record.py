"""Records (``membrane._record``: ``@record(...)`` and ``@frozen``) behave as the dataclasses
they stand for, measured against twins built by ``dataclasses`` itself, whether the class writes
its own ``__init__`` (checked once against the fields) or has one compiled; and Membrane's own
value classes (settings, budgets, definitions) keep behaving as the frozen dataclasses they were.
``membrane agents list`` builds them without importing ``dataclasses`` (counted here, in a fresh
interpreter); that ``membrane explain`` imports neither ``dataclasses`` nor ``inspect`` is pinned
in ``tests/cli/test_start_imports.py``."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, get_type_hints

import pytest

from membrane import AgentDefinition, Budget, Settings
from membrane._record import FACTORY, field, fields, frozen, record, replace
from membrane.config.values import McpServerSpec
from membrane.errors import InvalidRequest
from process_support import cli_imports, probe_json


@frozen
class Written:
    """A value that writes its own ``__init__``."""

    name: str
    tags: dict[str, int] = field(default_factory=dict)
    size: int = 0
    secret: str = field(default="", repr=False, compare=False)
    memo: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    label: str = field(default="", kw_only=True)

    def __init__(
        self,
        name: str,
        tags: dict[str, int] = FACTORY,
        size: int = 0,
        secret: str = "",
        *,
        label: str = "",
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "tags", {} if tags is FACTORY else tags)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "secret", secret)
        object.__setattr__(self, "memo", {})
        object.__setattr__(self, "label", label)
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.size < 0:
            raise ValueError("size")


@record(frozen=True, slots=True)
class Compiled:
    """The same value, its ``__init__`` compiled."""

    name: str
    tags: dict[str, int] = field(default_factory=dict)
    size: int = 0
    secret: str = field(default="", repr=False, compare=False)
    memo: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    label: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        if self.size < 0:
            raise ValueError("size")


@dataclass(frozen=True, slots=True)
class Generated:
    """The same value, built by ``dataclasses``."""

    name: str
    tags: dict[str, int] = dataclasses.field(default_factory=dict)
    size: int = 0
    secret: str = dataclasses.field(default="", repr=False, compare=False)
    memo: dict[str, int] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    label: str = dataclasses.field(default="", kw_only=True)

    def __post_init__(self) -> None:
        if self.size < 0:
            raise ValueError("size")


BUILT = pytest.mark.parametrize("cls", [Written, Compiled], ids=["written", "compiled"])


def both(cls: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    return cls(*args, **kwargs), Generated(*args, **kwargs)


def shape(obj: Any) -> object:
    """What ``dataclasses`` sees of ``obj``, with the class name left out."""
    return [
        (f.name, f.default, f.default_factory, f.init, f.repr, f.compare, f.hash, f.kw_only)
        for f in dataclasses.fields(obj)
    ]


@BUILT
def test_fields_and_the_dataclass_functions_are_the_generated_ones(cls: Any) -> None:
    made, generated = both(cls, "a", {"x": 1}, size=2, secret="s", label="l")
    seen: object = made
    assert dataclasses.is_dataclass(seen)
    assert shape(made) == shape(generated)
    assert cls.__match_args__ == Generated.__match_args__ == ("name", "tags", "size", "secret")
    assert cls.__slots__ == Generated.__slots__
    assert not hasattr(made, "__dict__")
    assert dataclasses.asdict(made) == dataclasses.asdict(generated)
    assert dataclasses.astuple(made) == dataclasses.astuple(generated)
    changed = dataclasses.replace(made, size=5)
    assert type(changed) is cls
    assert (changed.name, changed.size, changed.tags, changed.label) == ("a", 5, {"x": 1}, "l")
    with pytest.raises(ValueError, match="size"):
        dataclasses.replace(made, size=-1)  # __post_init__ runs, as on a generated class


@BUILT
def test_defaults_factories_and_keyword_only_fields_are_the_generated_ones(cls: Any) -> None:
    made, generated = both(cls, "a")
    assert (made.tags, made.size, made.secret, made.memo, made.label) == (
        generated.tags,
        generated.size,
        generated.secret,
        generated.memo,
        generated.label,
    )
    assert made.tags is not cls("b").tags  # a fresh dict per instance
    assert made.memo is not cls("b").memo
    with pytest.raises(ValueError, match="size"):
        cls("a", size=-1)
    with pytest.raises(TypeError):  # label is keyword-only
        cls("a", {}, 0, "", "l")
    with pytest.raises(TypeError):  # memo is not taken
        cls("a", memo={})
    assert cls("a", label="l").label == "l"


@BUILT
def test_repr_equality_and_hash_are_the_generated_ones(cls: Any) -> None:
    made, generated = both(cls, "a", {"x": 1}, size=2, secret="s")
    assert repr(made) == repr(generated).replace("Generated", cls.__name__)
    assert made == cls("a", {"x": 1}, size=2, secret="other")  # secret is not compared
    assert made != cls("a", {"x": 1}, size=3)
    assert made != generated  # another class is never equal
    assert made.__eq__(object()) is NotImplemented
    with pytest.raises(TypeError, match="unhashable"):  # tags are compared, and a dict
        hash(made)
    with pytest.raises(TypeError, match="unhashable"):
        hash(generated)


def test_hash_follows_the_compared_fields_and_repr_a_value_holding_itself() -> None:
    @frozen
    class Pair:
        left: int
        right: str = field(default="", compare=False)

        def __init__(self, left: int, right: str = "") -> None:
            object.__setattr__(self, "left", left)
            object.__setattr__(self, "right", right)

    @record(frozen=True, slots=True)
    class One:
        left: int

    assert hash(Pair(1, "a")) == hash(Pair(1, "b")) == hash((1,)) == hash(One(1))
    assert {Pair(1, "a"): 1}[Pair(1, "b")] == 1

    @frozen
    class Node:
        child: object = None

    holder: list[object] = []
    node = Node(holder)
    holder.append(node)
    assert repr(node) == (
        "test_hash_follows_the_compared_fields_and_repr_a_value_holding_itself.<locals>"
        ".Node(child=[...])"
    )


@BUILT
def test_fields_cannot_be_assigned_or_deleted(cls: Any) -> None:
    made, generated = both(cls, "a")
    for obj in (made, generated):
        with pytest.raises(dataclasses.FrozenInstanceError) as assigned:
            obj.size = 3
        assert str(assigned.value) == "cannot assign to field 'size'"
        with pytest.raises(dataclasses.FrozenInstanceError) as deleted:
            del obj.size
        assert str(deleted.value) == "cannot delete field 'size'"
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.other = 1


@BUILT
def test_pickle_and_copy_restore_every_field(cls: Any) -> None:
    made = cls("a", {"x": 1}, size=2, secret="s", label="l")
    for restored in (pickle.loads(pickle.dumps(made)), copy.copy(made), copy.deepcopy(made)):
        assert restored == made
        assert (restored.secret, restored.label) == ("s", "l")


@record(slots=True)
class Mutable:
    """A record neither frozen nor hashable."""

    name: str
    items: list[int] = field(default_factory=list)


@record(frozen=True)
class Unslotted:
    """A frozen record with a ``__dict__``."""

    name: str
    size: int = 1


def test_a_record_that_is_not_frozen_or_not_slotted_is_the_generated_one() -> None:
    mutable = Mutable("a")
    mutable.name = "b"
    mutable.items.append(1)
    assert mutable == Mutable("b", [1])
    assert Mutable.__hash__ is None
    assert pickle.loads(pickle.dumps(mutable)) == mutable
    assert dataclasses.fields(Mutable)[1].default_factory is list
    unslotted = Unslotted("a")
    assert Unslotted.size == 1 and unslotted.__dict__ == {"name": "a", "size": 1}
    with pytest.raises(dataclasses.FrozenInstanceError):
        unslotted.size = 2
    assert hash(unslotted) == hash(Unslotted("a"))
    assert copy.deepcopy(unslotted) == unslotted
    assert pickle.loads(pickle.dumps(unslotted)) == unslotted


@BUILT
def test_fields_and_replace_copy_what_the_init_takes(cls: Any) -> None:
    made = cls("a", {"x": 1}, size=2, secret="s", label="l")
    assert [f.name for f in fields(made)] == ["name", "tags", "size", "secret", "label"]
    assert fields(cls) == fields(made)
    changed = replace(made, size=5)
    assert (changed.name, changed.tags, changed.size, changed.secret, changed.label) == (
        "a",
        {"x": 1},
        5,
        "s",
        "l",
    )
    assert changed.memo == {} and changed.memo is not made.memo  # made anew, as dataclasses does
    with pytest.raises(TypeError, match="no field 'memo'"):
        replace(made, memo={})


def test_an_init_that_does_not_take_the_fields_as_generated_is_refused() -> None:
    with pytest.raises(TypeError, match="takes"):

        @frozen
        class Swapped:
            a: int
            b: int

            def __init__(self, b: int, a: int) -> None:
                object.__setattr__(self, "a", a)
                object.__setattr__(self, "b", b)

    with pytest.raises(TypeError, match="takes"):

        @frozen
        class NotKeywordOnly:
            a: int = field(default=0, kw_only=True)

            def __init__(self, a: int = 0) -> None:
                object.__setattr__(self, "a", a)

    with pytest.raises(TypeError, match="b must default to 1"):

        @frozen
        class OtherDefault:
            a: int
            b: int = 1

            def __init__(self, a: int, b: int = 2) -> None:
                object.__setattr__(self, "a", a)
                object.__setattr__(self, "b", b)

    with pytest.raises(TypeError, match="b must default to 1"):

        @frozen
        class OtherKeywordDefault:
            b: int = field(default=1, kw_only=True)

            def __init__(self, *, b: int = 2) -> None:
                object.__setattr__(self, "b", b)

    with pytest.raises(TypeError, match="b must default to <factory>"):

        @frozen
        class NoFactory:
            b: list[int] = field(default_factory=list)

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

    with pytest.raises(TypeError, match="write a function"):

        @frozen
        class NotAFunction:
            a: int
            __init__ = object.__init__


def test_what_a_record_cannot_declare_is_refused() -> None:
    with pytest.raises(TypeError, match=r"use membrane\._record\.field"):

        @frozen
        class Wrong:
            a: int = dataclasses.field(default=1)

    with pytest.raises(TypeError, match="plain fields only"):

        @record()
        class Shared:
            a: ClassVar[int] = 1

    with pytest.raises(TypeError, match="no default after a field with one"):

        @record()
        class Misordered:
            a: int = 0
            b: int  # type: ignore[misc]

    with pytest.raises(ValueError, match="not both"):
        field(default=1, default_factory=list)


def test_equal_values_are_equal_and_hash_alike() -> None:
    assert Budget(tokens=5, seconds=2) == Budget(tokens=5, seconds=2.0)
    assert Budget(tokens=5) != Budget(tokens=6)
    same_values: object = (5, None, None, None, None)
    assert Budget(tokens=5) != same_values
    assert hash(Budget(turns=3)) == hash(Budget(turns=3))
    assert len({Budget(turns=3), Budget(turns=3), Budget(turns=4)}) == 2


def test_a_frozen_value_cannot_change() -> None:
    budget = Budget(tokens=5)
    with pytest.raises(AttributeError, match="cannot assign to field 'tokens'"):
        budget.tokens = 6  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del budget.tokens
    with pytest.raises(AttributeError):
        budget.other = 1  # type: ignore[attr-defined]
    assert budget.tokens == 5


def test_defaults_and_factories_are_applied_per_instance() -> None:
    first, second = McpServerSpec("a", command="a"), McpServerSpec("b", command="b")
    assert first.env == {} and first.env is not second.env
    assert AgentDefinition(name="x").keys is not AgentDefinition(name="y").keys


def test_post_init_checks_and_normalises() -> None:
    assert type(Budget(seconds=3).seconds) is float
    with pytest.raises(InvalidRequest):
        Budget(turns=-1)
    with pytest.raises(InvalidRequest):
        Settings(max_concurrency=0)


def test_repr_names_every_field() -> None:
    assert repr(Budget(turns=2)) == (
        "Budget(tokens=None, turns=2, tool_calls=None, children=None, seconds=None)"
    )


def test_dataclasses_helpers_keep_working() -> None:
    budget = Budget(tokens=1, turns=2)
    assert dataclasses.is_dataclass(budget)
    assert [f.name for f in dataclasses.fields(Budget)] == [
        "tokens",
        "turns",
        "tool_calls",
        "children",
        "seconds",
    ]
    assert dataclasses.replace(budget, turns=9) == Budget(tokens=1, turns=9)
    assert dataclasses.asdict(budget) == {
        "tokens": 1,
        "turns": 2,
        "tool_calls": None,
        "children": None,
        "seconds": None,
    }
    settings = dataclasses.replace(Settings(), max_depth=2)
    assert settings.max_depth == 2 and settings == Settings(max_depth=2)
    with pytest.raises(InvalidRequest):  # replace builds through __init__: the checks run
        dataclasses.replace(budget, turns=-1)


def test_copies_and_pickles_are_equal() -> None:
    definition = AgentDefinition(name="x", budget=Budget(turns=1), keys={"name": "name"})
    assert copy.deepcopy(definition) == definition
    assert copy.copy(definition) == definition
    assert pickle.loads(pickle.dumps(definition)) == definition
    budget = Budget(tokens=4, seconds=1.5)
    assert pickle.loads(pickle.dumps(budget)) == budget


HEAVY = ("dataclasses", "inspect", "ast", "dis", "tokenize")


def test_agents_list_imports_no_dataclasses(tmp_path: Path, isolated_home: Path) -> None:
    workspace = tmp_path / "workspace"
    shutil.copytree(Path(__file__).resolve().parents[1] / "examples" / "workspace", workspace)
    modules: list[set[str]] = []
    for _ in range(2):  # the first listing parses the files and fills the cache
        code, imported, printed = cli_imports("agents", "list", cwd=workspace)
        assert code == 0
        assert "scout" in printed
        modules.append(imported)
    assert "membrane.agents.fields" in modules[0]
    # The second hits the cache: every definition, the settings and the command line are built
    # without dataclasses (nor inspect, which it imports).
    assert "membrane.agents.fields" not in modules[1]
    assert sorted(modules[1] & set(HEAVY)) == []
    # No class on its path writes its own __init__ (the check of one is not imported), and
    # nothing asks for __dataclass_fields__ (nor the module that makes them).
    assert {"membrane._record_written", "membrane._record_twin"} & modules[1] == set()


@BUILT
def test_a_call_that_does_not_fit_fails_as_on_the_generated_class(cls: Any) -> None:
    def failure(made: Any, *args: Any, **kwargs: Any) -> str:
        with pytest.raises(TypeError) as raised:
            made(*args, **kwargs)
        return str(raised.value).replace(made.__qualname__, "<class>")

    for args, kwargs in [
        ((), {}),
        (("a", {}, 1, "s", "extra"), {}),
        (("a",), {"unknown": 1}),
        (("a",), {"memo": {}}),
        (("a", {}), {"tags": {}}),
        (("a",), {"label": "l", "size": 1, "other": 2}),
    ]:
        assert failure(cls, *args, **kwargs) == failure(Generated, *args, **kwargs)


@BUILT
def test_the_init_reads_as_the_generated_one(cls: Any) -> None:
    # A written ``__init__``'s return annotation is its module's text (``'None'``); a
    # factory's default is ``FACTORY``, shown as the generated class shows its own.
    params = [str(p) for p in inspect.signature(cls).parameters.values()]
    assert params == [str(p) for p in inspect.signature(Generated).parameters.values()]
    assert get_type_hints(cls.__init__) == get_type_hints(Generated.__init__)
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
    assert cls.__init__.__module__ == __name__


@record(frozen=True, slots=True)
class Point:
    """Two records of one shape: their fields differ only in names and defaults."""

    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)


@record(frozen=True, slots=True)
class Span:
    start: str
    end: str = "end"
    marks: dict[str, int] = field(default_factory=dict)


def test_records_of_one_shape_keep_their_own_names_and_defaults() -> None:
    point, span = Point(1), Span("a")
    assert (point.x, point.y, point.tags) == (1, 0, [])
    assert (span.start, span.end, span.marks) == ("a", "end", {})
    assert Span("a", "b", {"m": 1}) == Span(start="a", end="b", marks={"m": 1})
    assert str(inspect.signature(Span)) == (
        "(start: 'str', end: 'str' = 'end', marks: 'dict[str, int]' = <factory>) -> None"
    )
    with pytest.raises(
        TypeError, match=r"Point.__init__\(\) got an unexpected keyword argument 'start'"
    ):
        Point(start=1)


def _fresh() -> Any:
    """A new class of ``Compiled``'s fields: its ``__init__`` not compiled yet."""

    @record(frozen=True, slots=True)
    class Fresh:
        name: str
        tags: dict[str, int] = field(default_factory=dict)
        size: int = 0
        secret: str = field(default="", repr=False, compare=False)
        memo: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
        label: str = field(default="", kw_only=True)

        def __post_init__(self) -> None:
            if self.size < 0:
                raise ValueError("size")

    return Fresh


CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    (("a",), {}),
    (("a", {"x": 1}, 2, "s"), {"label": "l"}),
    ((), {"name": "a", "size": 3, "label": "l"}),
    (("a",), {"secret": "s", "tags": {"y": 2}}),
]


def test_instances_made_before_the_init_is_compiled_are_the_generated_ones() -> None:
    for compiled in (False, True):
        fresh = _fresh()
        if compiled:
            assert fresh.__init__.__qualname__.endswith("Fresh.__init__")  # compiled on reading
        for args, kwargs in CALLS:
            made, generated = fresh(*args, **kwargs), Generated(*args, **kwargs)
            assert [getattr(made, f.name) for f in dataclasses.fields(generated)] == [
                getattr(generated, f.name) for f in dataclasses.fields(generated)
            ]
        assert fresh("a").tags is not fresh("a").tags  # a fresh dict per instance
        assert fresh("a").memo is not fresh("a").memo
        with pytest.raises(ValueError, match="size"):
            fresh("a", size=-1)  # __post_init__ runs


def test_a_call_that_does_not_fit_fails_as_on_the_generated_class_before_a_compile() -> None:
    for args, kwargs in [
        ((), {}),
        (("a", {}, 1, "s", "extra"), {}),
        (("a",), {"unknown": 1}),
        (("a",), {"memo": {}}),
        (("a", {}), {"tags": {}}),
        ((), {"size": 1}),
    ]:
        fresh = _fresh()  # each call the first on its class
        with pytest.raises(TypeError) as raised:
            fresh(*args, **kwargs)
        with pytest.raises(TypeError) as expected:
            Generated(*args, **kwargs)
        assert str(raised.value).replace(fresh.__qualname__, "<class>") == str(
            expected.value
        ).replace(Generated.__qualname__, "<class>")


#: Counts the ``__init__`` compiled for records in a fresh interpreter (compiles of text, not
#: of a module's file): none when classes are defined or make their first instances, one per
#: shape once they have made more.
_COMPILES = """
import json, sys
seen = []
def hook(event, args):
    if event == "compile" and args[1] == "<string>":
        seen.append(args[1])
sys.addaudithook(hook)
from membrane._record import _INTERPRETED_CALLS, field, record

@record(frozen=True, slots=True)
class A:
    a: int
    b: str = ""

@record(frozen=True, slots=True)
class B:
    c: str
    d: int = 1

@record(frozen=True, slots=True)
class C:
    e: int
    f: list[int] = field(default_factory=list)

@record()
class D:
    g: int

defined = len(seen)
made = [A(1, "x"), B("y"), A(2), B("z", 2)]
for n in range(_INTERPRETED_CALLS):
    C(n), D(n)
interpreted = len(seen) - defined
made += [A(3) for _ in range(_INTERPRETED_CALLS)] + [B("w") for _ in range(_INTERPRETED_CALLS)]
one_shape = len(seen) - defined
C(1), D(1)
print(json.dumps({
    "defined": defined, "interpreted": interpreted, "one_shape": one_shape,
    "all": len(seen) - defined,
    "values": [[m.a, m.b] if isinstance(m, A) else [m.c, m.d] for m in made[:4]],
}))
"""


def test_an_init_is_compiled_once_per_shape_after_its_first_instances() -> None:
    counted = probe_json(_COMPILES)
    assert counted["defined"] == 0  # defining a record compiles nothing
    assert counted["interpreted"] == 0  # nor making its first instances
    assert counted["one_shape"] == 1  # A and B share one shape
    assert counted["all"] == 3  # C and D have a shape each
    assert counted["values"] == [[1, "x"], ["y", 1], [2, ""], ["z", 2]]
