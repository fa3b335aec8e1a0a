"""Converting and validating a tool call's arguments against the tool's signature.

This module owns what a call's arguments must be. :class:`ToolArguments` is built once per
tool; :meth:`ToolArguments.bind` turns the arguments as written (a JSON call's ``{name:
value}`` object, or a compact call's one argument text, which goes to the first parameter)
into the keyword arguments the tool is called with, each an instance of its annotation, or
raises :class:`ArgumentError` with the message shown to the agent.

Validation is pydantic's: the parameters become a ``TypedDict`` (parameters without a
default ``Required``, the others ``NotRequired``, ``extra="forbid"``) validated by a
``TypeAdapter`` in lax mode, so ``"3"`` and ``3.0`` are an ``int``, ``"yes"``, ``"on"`` and
``1`` are ``True``, ``"1.5"`` is a ``float``, and numbers where a ``str`` is expected become
their text (``coerce_numbers_to_str``). Each annotation is first rewritten
(:func:`_lenient`) with ``BeforeValidator``\\ s for what models write and pydantic refuses
or accepts too readily:

- a boolean is not an ``int``, a ``float`` or a number choice (``true`` for ``k: int`` is an
  error);
- a ``list``, ``tuple`` or ``dict`` may be written as JSON text (``nest[[1, 2]]``);
- a ``Literal`` or ``Enum`` choice may be written as text (``"2"`` for ``Literal[2]``,
  ``" red "`` for a member of value ``"red"``);
- ``"null"`` or ``"none"`` is ``None`` for ``X | None`` (unless ``X`` may be a ``str``);
- a union takes the first of its options that fits, in the order written (``int | str``
  makes ``"3"`` the integer 3; pydantic's default "smart" mode would keep the string);
- types JSON cannot carry but the schema accepts (images, tensors) are passed on unchecked.

pydantic's error text never reaches the agent: the first problem is described in the words
of the tool's signature, in this order of precedence::

    tool 'search' got an unexpected argument 'qeury'; did you mean 'query'?
    tool 'search' is missing required argument(s) 'query'
    argument 'k' of tool 'search' must be an integer, got 'many'

with the expected type given by :func:`expected` (``"a number"``, ``"a string or null"``,
``'one of ["red", "blue"]'``, ``"a JSON array whose values are each an integer"``, ...).
"""

from __future__ import annotations

import functools
import inspect
import json
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    with_config,
)
from pydantic_core import ErrorDetails, PydanticCustomError
from typing_extensions import NotRequired, Required, TypedDict  # pydantic needs these on 3.11

from turnrl.envs.tools.parsing import loads, show
from turnrl.wording import did_you_mean

__all__ = ["ArgumentError", "Param", "ToolArguments", "expected"]

_CONFIG = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
# TypedDict's functional form, called with fields known only at run time: type checkers
# accept that form only with a dict literal, so it is named here as the callable it is
_typed_dict = typing.cast("Callable[[str, dict[str, Any]], type]", TypedDict)
_TOO_DEEP = "json_too_deep"  # the error type of JSON text nested too deeply to decode


@dataclass(frozen=True)
class Param:
    """A tool parameter: its resolved annotation, whether it lacks a default, and its JSON
    schema type for messages (``"string"``, ``"integer"``, ``"string or null"``, ...;
    ``"value"`` where the schema gives none)."""

    name: str
    hint: Any
    required: bool
    json_type: str


class ArgumentError(ValueError):
    """Arguments that do not fit the tool; ``args[0]`` is the message for the agent."""


class ToolArguments:
    """The parameters of the tool ``name`` (the callable ``fn``, whose JSON schema is
    ``schema``) and the validation of the arguments of its calls."""

    def __init__(self, name: str, fn: Callable[..., Any], schema: dict[str, Any]) -> None:
        self.name = name
        self.params = _params(fn, schema)
        fields = {param.name: (Required if param.required else NotRequired)[
            _lenient(param.hint)] for param in self.params}
        shape = with_config(_CONFIG)(_typed_dict("ToolArguments", fields))
        self._adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(shape)

    def bind(self, arguments: dict[str, Any] | str | None) -> dict[str, Any]:
        """The keyword arguments to call the tool with: those given, converted.

        Args:
            arguments: a JSON call's ``{name: value}`` object, or a compact call's argument
                text (``""`` for no argument).

        Raises:
            ArgumentError: an unexpected, missing or ill-typed argument.
        """
        if isinstance(arguments, str):
            arguments = self._from_compact(arguments)
        arguments = arguments or {}
        try:
            return self._adapter.validate_python(arguments)
        except ValidationError as error:
            details = error.errors(include_url=False, include_context=False,
                                   include_input=False)
            raise ArgumentError(self._explain(arguments, details)) from None

    def signature_text(self) -> str:
        """``Tool 'search' takes: query (string, required), k (integer, optional).``"""
        if not self.params:
            return f"Tool {self.name!r} takes no arguments."
        parts = [f"{p.name} ({p.json_type}, {'required' if p.required else 'optional'})"
                 for p in self.params]
        return f"Tool {self.name!r} takes: {', '.join(parts)}."

    def _from_compact(self, argument: str) -> dict[str, Any]:
        if not self.params:
            if argument:
                raise ArgumentError(f"tool {self.name!r} takes no argument, got {argument!r}; "
                                    f"call it as {self.name}[]")
            return {}
        return {self.params[0].name: argument} if argument else {}

    def _explain(self, arguments: dict[str, Any], errors: Sequence[ErrorDetails]) -> str:
        """The first problem of ``arguments`` among pydantic's ``errors``: an unexpected
        argument (the first written), the missing ones, or the first parameter's bad value."""
        names = [param.name for param in self.params]
        top = [e for e in errors if len(e["loc"]) == 1]  # not an item's: a tuple's is missing
        extra = [str(e["loc"][0]) for e in top if e["type"] == "extra_forbidden"]
        if extra:
            key = min(extra, key=list(arguments).index)
            return (f"tool {self.name!r} got an unexpected argument {key!r}"
                    f"{did_you_mean(key, names)}")
        missing = {e["loc"][0] for e in top if e["type"] == "missing"}
        if missing:
            return (f"tool {self.name!r} is missing required argument(s) "
                    f"{', '.join(repr(name) for name in names if name in missing)}")
        first = min(errors, key=lambda e: names.index(str(e["loc"][0])))
        param = self.params[names.index(str(first["loc"][0]))]
        wanted = expected(param.hint, first["loc"][1:], too_deep=first["type"] == _TOO_DEEP)
        return (f"argument {param.name!r} of tool {self.name!r} must be {wanted}, got "
                f"{show(arguments[param.name])}")


def expected(hint: Any, loc: Sequence[int | str] = (), *, too_deep: bool = False) -> str:
    """What a value of the annotation ``hint`` must be, in words for the agent.

    ``"a string"``, ``"an integer"``, ``"a number"``, ``"a boolean (true or false)"``,
    ``'one of ["red", "blue"]'``, ``"a JSON array"``/``"a JSON object"`` (``... nested less
    deeply`` when ``too_deep``; ``"a JSON array of 2 values (an integer, a string)"`` for a
    ``tuple[int, str]``), alternatives joined by ``" or "`` (``"a string or null"``).
    ``loc`` is where below the argument pydantic found the problem: when it reaches into the
    items of a ``list[X]`` or the values of a ``dict[K, X]``, the container is described as
    ``"a JSON array whose values are each <X>"``.
    """
    origin, args = get_origin(hint), get_args(hint)
    if origin is Union or origin is types.UnionType:
        options = [arg for arg in args if arg is not type(None)]
        inner = loc if len(options) == 1 else ()  # pydantic tags the options of a true union
        described = [expected(option, inner, too_deep=too_deep) for option in options]
        return " or ".join(described + ["null"] * (len(options) < len(args)))
    if origin is Literal or _is_enum(hint):
        return f"one of {json.dumps(list(_choices(hint)))}"
    if hint in _SCALAR_WORDS:
        return _SCALAR_WORDS[hint]
    container = origin or hint
    if container not in (list, tuple, dict):
        return "a value"
    words = "a JSON object" if container is dict else "a JSON array"
    if too_deep:
        return f"{words} nested less deeply"
    if container is tuple and args:  # get_json_schema allows fixed-length tuples only
        return f"{words} of {len(args)} values ({', '.join(map(expected, args))})"
    items = {list: args, dict: args[1:]}.get(container, ())
    if loc and len(items) == 1:
        return f"{words} whose values are each {expected(items[0], loc[1:])}"
    return words


_SCALAR_WORDS: dict[Any, str] = {str: "a string", int: "an integer", float: "a number",
                                 bool: "a boolean (true or false)"}


def _params(fn: Callable[..., Any], schema: dict[str, Any]) -> tuple[Param, ...]:
    hints = typing.get_type_hints(fn)
    properties = schema["function"]["parameters"]["properties"]
    params = []
    for param in inspect.signature(fn).parameters.values():
        json_type = properties.get(param.name, {}).get("type", "value")
        if isinstance(json_type, list):
            json_type = " or ".join(json_type)
        params.append(Param(param.name, hints.get(param.name, Any),
                            param.default is inspect.Parameter.empty, str(json_type)))
    return tuple(params)


# --------------------------------------------------------------------------- leniency


def _lenient(hint: Any) -> Any:
    """``hint`` with the ``BeforeValidator``\\ s of the module docstring's list, at every
    level (``list[int]`` refuses booleans among its items too)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint in (int, float):
        return Annotated[hint, BeforeValidator(_refuse_bool)]
    if hint in (str, bool, type(None)):
        return hint
    if origin is Literal or _is_enum(hint):
        return Annotated[hint, BeforeValidator(functools.partial(_choice_by_text,
                                                                 _choices(hint)))]
    if origin is Union or origin is types.UnionType:
        options = tuple(_lenient(arg) for arg in args if arg is not type(None))
        union = options[0] if len(options) == 1 else Annotated[
            Union[options], Field(union_mode="left_to_right")]  # noqa: UP007
        if len(options) == len(args):
            return union
        if str in args:
            return union | None
        return Annotated[union | None, BeforeValidator(_null_by_text)]
    container = origin or hint
    if container in (list, tuple, dict):
        if args:
            container = container[tuple(arg if arg is Ellipsis else _lenient(arg)
                                        for arg in args)]
        return Annotated[container, BeforeValidator(_json_by_text)]
    return Any  # Any, or a type JSON cannot carry (an image): passed on as it is


def _is_enum(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, Enum)


def _choices(hint: Any) -> tuple[Any, ...]:
    """The values a ``Literal`` lists, or those of an ``Enum``'s members."""
    return tuple(member.value for member in hint) if _is_enum(hint) else get_args(hint)


def _refuse_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    return value


def _choice_by_text(choices: tuple[Any, ...], value: Any) -> Any:
    """The choice whose text ``value`` is (``"2"`` for ``2``), or ``value`` as it is; a
    boolean is no number choice (pydantic would take ``true`` for ``1``)."""
    if isinstance(value, bool) and not any(isinstance(choice, bool) for choice in choices):
        raise ValueError("a boolean is not one of the choices")
    if isinstance(value, str) and value not in choices:
        return next((choice for choice in choices if str(choice) == value.strip()), value)
    return value


def _null_by_text(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in ("none", "null"):
        return None
    return value


def _json_by_text(value: Any) -> Any:
    """A container written as JSON text, decoded; text that is not JSON is left for pydantic
    to refuse, and JSON too deeply nested to decode is an error of type ``json_too_deep``."""
    if not isinstance(value, str):
        return value
    try:
        return loads(value)
    except RecursionError:
        raise PydanticCustomError(_TOO_DEEP, "JSON text nested too deeply to decode") from None
    except ValueError:  # JSONDecodeError, or a value json cannot hold
        return value
