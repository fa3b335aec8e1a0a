"""A typed name -> object registry, used for envs, algorithms and rewards.

A registry replaces ``if name == "grpo": ... elif ...`` chains: callers look a
function up by its configured name and never branch on it.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

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


def closest_name(name: str, choices: list[str]) -> str | None:
    """The choice fewest typing edits away (swapping two neighbours counts as one edit),
    among those difflib also finds similar; ties go to difflib's similarity."""
    similar = difflib.get_close_matches(name, choices, n=len(choices) or 1)
    if not similar:
        return None
    ratio = {c: difflib.SequenceMatcher(None, name, c).ratio() for c in similar}
    return min(similar, key=lambda c: (_edit_distance(name, c), -ratio[c]))


def _edit_distance(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insert, delete, substitute, swap neighbours."""
    rows = [list(range(len(b) + 1))] + [[i] + [0] * len(b) for i in range(1, len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1)
    return rows[-1][-1]


def did_you_mean(name: str, choices: Iterable[str], *, otherwise: str = "",
                 prefix: str = "") -> str:
    """``"; did you mean 'grpo'?"`` for the choice closest to ``name`` (:func:`closest_name`),
    or ``otherwise`` when none is close: the one hint every "unknown name" error appends.
    With ``prefix`` (e.g. ``"gym:"``), names and choices are compared without it (a shared
    prefix would make every choice look close) and the hint puts it back."""
    close = closest_name(str(name).removeprefix(prefix),
                         [c.removeprefix(prefix) for c in choices])
    return f"; did you mean {prefix + close!r}?" if close else otherwise


def unknown_name_message(kind: str, name: str, choices: list[str]) -> str:
    """``unknown advantage 'gpro'; did you mean 'grpo'? choices: gae, grpo, ...``."""
    hint = did_you_mean(name, choices, otherwise=".")
    return f"unknown {kind} {name!r}{hint} Valid choices: {', '.join(choices)}"


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
    from pydantic import TypeAdapter, ValidationError

    from turnrl.config.errors import kind_of, show

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
