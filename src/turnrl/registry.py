"""A typed name -> object registry, used for envs, algorithms and rewards, and the check of
the settings passed to a registered function against its signature.

A registry replaces ``if name == "grpo": ... elif ...`` chains: callers look a
function up by its configured name and never branch on it. Its errors are worded by
:mod:`turnrl.wording` (the name hint of an unknown name).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from turnrl.wording import kind_of, show, unknown_name_message

T = TypeVar("T")


class UnknownNameError(KeyError):
    """A name that is not registered; the message lists the valid choices."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


class Registry(Generic[T]):
    """Maps names to objects of one type (one signature per registry).

    >>> R: Registry[int] = Registry("numbers")
    >>> R.register("one")(1)
    1
    >>> R["one"]
    1
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REG.register("name")`` stores the object under ``name``."""

        def add(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj
            return obj

        return add

    def __getitem__(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(unknown_name_message(self.kind, name, self.names())) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def names(self) -> list[str]:
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._items.items())


def setting_type_problem(fn: Callable[..., object], settings: Mapping[str, object], *,
                         owner: str) -> str | None:
    """What is wrong with the types of ``settings`` passed to ``fn`` by keyword (a function,
    or a class: its ``__init__``), checked against ``fn``'s annotations; None when they fit.

    A value fits its annotation when pydantic's strict validation takes it, or its lax one
    does without turning a bool or a string into something else: a YAML list may stand for a
    tuple and a string for a path, but ``true`` is never a number and ``'high'`` never a float
    (the config's own rule: booleans do not pass as integers anywhere). Annotations pydantic
    cannot read, or that do not resolve, are not checked.
    """
    try:
        hints = typing.get_type_hints(typing.cast(typing.Any, fn).__init__
                                      if isinstance(fn, type) else fn)
    except Exception:  # an annotation that does not resolve: names are checked, types not
        return None
    for key, value in settings.items():
        if key not in hints:
            continue
        try:
            adapter = TypeAdapter(hints[key])
        except Exception:  # a type pydantic has no schema for
            continue
        try:
            adapter.validate_python(value, strict=True)
            continue
        except ValidationError:
            pass
        try:
            coerced = adapter.validate_python(value)
        except ValidationError:
            coerced = _REFUSED
        if coerced is _REFUSED or (isinstance(value, (bool, str))
                                   and type(coerced) is not type(value)):
            return (f"{key} of {owner}: expected {_type_name(hints[key])}, got {show(value)} "
                    f"({kind_of(value)})")
    return None


def _type_name(annotation: object) -> str:
    """``int``, ``one of 'search', 'fullmatch'`` (a Literal), ``float | None``."""
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(annotation)))
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


_REFUSED = object()
