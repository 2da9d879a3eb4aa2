"""The full check of a tool's input schema (imported only for a schema that is not plainly
valid, see :mod:`membrane.tools.schemas`): the meta-schema of its dialect, and every ``$ref``
looked up with the ``referencing`` machinery the validator uses, against the schema itself and
the JSON Schema meta-schemas only: nothing is fetched over the network."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from referencing import Specification
    from referencing._core import Resolver  # public type, exported only from here

__all__ = ["first_problem"]

#: Keywords that point at another schema; each must resolve when the tool is registered.
_REFERENCES = ("$ref", "$dynamicRef")
#: Keywords whose values are instance data, not subschemas: a ``$ref`` inside them is data.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})


def first_problem(plain: dict[str, Any]) -> tuple[str, str] | None:
    """Where (a ``/``-joined path, ``(root)`` at the top) and what the first problem of
    ``plain`` is under its dialect's meta-schema and its references, or ``None``."""
    import referencing.jsonschema
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    # The JSON Schema meta-schemas, the only documents a ``$ref`` may reach outside its schema.
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]

    cls = validator_for(plain)
    try:
        cls.check_schema(plain)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(root)"
        return where, exc.message
    dialect = str(cls.META_SCHEMA.get("$schema", ""))
    specification = referencing.jsonschema.specification_with(
        dialect, default=referencing.jsonschema.DRAFT202012
    )
    root = specification.create_resource(plain)
    resolver = REGISTRY.resolver_with_root(root)
    return _first_unresolvable(plain, resolver, specification, [])


def _first_unresolvable(
    node: object,
    resolver: Resolver[Any],
    specification: Specification[Any],
    path: list[str],
) -> tuple[str, str] | None:
    if isinstance(node, list):
        for index, item in enumerate(node):
            found = _first_unresolvable(item, resolver, specification, [*path, str(index)])
            if found:
                return found
        return None
    if not isinstance(node, dict):
        return None
    if isinstance(specification.id_of(node), str | None):
        # A nested ``$id`` moves the base URI that relative references resolve against.
        resolver = resolver.in_subresource(specification.create_resource(node))
    for keyword in _REFERENCES:
        ref = node.get(keyword)
        if isinstance(ref, str):
            problem = _follow(node, keyword, ref, resolver)
            if problem is not None:
                return "/".join([*path, keyword]), problem
    for key, item in node.items():
        if key in _DATA_KEYWORDS:
            continue
        found = _first_unresolvable(item, resolver, specification, [*path, str(key)])
        if found:
            return found
    return None


def _follow(node: dict[str, Any], keyword: str, ref: str, resolver: Resolver[Any]) -> str | None:
    """Why ``ref`` is unusable: it points nowhere, or a chain of references loops to itself."""
    from referencing.exceptions import NoSuchResource, Unresolvable, Unretrievable

    seen = {id(node)}
    try:
        resolved = resolver.lookup(ref)
        while isinstance(resolved.contents, dict):
            target: dict[str, Any] = resolved.contents
            if id(target) in seen:
                return (
                    f"{keyword} {ref!r} leads back to itself without consuming any data; "
                    "validating against it would never end"
                )
            seen.add(id(target))
            following = target.get("$ref")
            if not isinstance(following, str):
                return None
            resolved = resolved.resolver.lookup(following)
    except (Unresolvable, NoSuchResource, Unretrievable) as exc:
        return (
            f"{keyword} {ref!r} cannot be resolved ({type(exc).__name__}); point it at a "
            "definition inside the schema, e.g. '#/$defs/NAME'"
        )
    return None
