"""Python callables as the JSON tool schemas that chat templates render.

This module owns what a tool *is* to the model: :func:`tool_schema` checks that a callable can
be a tool (a function or bound method with type hints, a docstring and named parameters; a
docstring ``Args:`` section that names only real parameters; a valid name) and builds its
schema with transformers' ``get_json_schema``, so the schema is exactly what
``apply_chat_template(tools=[fn])`` renders. A mistake of the env author raises
:class:`ToolSchemaError`, which names the function and the fix.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from transformers.utils import get_json_schema
from transformers.utils.chat_template_utils import (
    DocstringParsingException,
    TypeHintParsingException,
)

from turnrl.wording import did_you_mean

__all__ = ["TOOL_NAME_PATTERN", "ToolSchemaError", "tool_schema", "tool_schemas"]

# OpenAI's rule for function names, with a letter or underscore first so that ``name[`` is
# unambiguous in the compact format.
TOOL_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")

_NO_DESCRIPTION = "\x00turnrl-no-description\x00"  # placeholder for plain docstrings


class ToolSchemaError(ValueError):
    """A callable cannot be a tool (no type hints, no docstring, unsupported parameters)."""


def tool_schema(fn: Callable[..., Any], *, name: str | None = None) -> dict[str, Any]:
    """The JSON tool schema of a typed function, as chat templates expect it.

    Returns ``{"type": "function", "function": {"name", "description", "parameters"}}``
    where ``parameters`` is a JSON schema (``"type": "object"``, ``"properties"``,
    ``"required"``: the parameters without a default). It is built by transformers'
    ``get_json_schema``, so it is exactly what ``apply_chat_template(tools=[fn])`` renders;
    ``function`` may also hold ``"return"`` (the return type), which templates ignore.

    Every parameter needs a type hint (``str``, ``int``, ``float``, ``bool``, and also
    ``Literal``, ``Enum``, ``X | None``, ``list``, ``dict``). The docstring's first part is the
    tool's description. A Google-style ``Args:`` section describes the parameters and must
    then describe all of them (``(choices: [...])`` at the end of a description becomes an
    ``enum``); a plain docstring without ``Args:`` is accepted too, and the parameters then
    have no description.

    Args:
        fn: a function or a bound method (``self`` is left out).
        name: the tool's name, if not ``fn.__name__``.

    Raises:
        ToolSchemaError: naming the function and what to fix.
    """
    label = _callable_label(fn)
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise ToolSchemaError(
            f"tool {label}: a tool must be a function or a bound method, got "
            f"{type(fn).__name__}; wrap it in a 'def' with type hints and a docstring"
        )
    doc = inspect.getdoc(fn)
    if not doc or not doc.strip():
        raise ToolSchemaError(
            f"tool {label} has no docstring; add one saying what the tool does (the model "
            "reads it), with an 'Args:' section describing each parameter"
        )
    _check_parameters(fn, label)
    _check_documented_names(fn, label, doc)
    target = fn if _has_args_section(doc) else _with_placeholder_args(fn, doc)
    try:
        schema = get_json_schema(target)
    except TypeHintParsingException as error:
        raise ToolSchemaError(
            f"tool {label}: {error}; annotate every parameter with str, int, float, bool "
            "(or Literal, Enum, list, dict, X | None)"
        ) from None
    except (NameError, TypeError) as error:  # a string annotation that does not resolve
        raise ToolSchemaError(
            f"tool {label}: cannot resolve its type hints ({type(error).__name__}: {error}); "
            "define the types it names at module level, where the function is defined"
        ) from None
    except DocstringParsingException as error:
        raise ToolSchemaError(
            f"tool {label}: {error}; its 'Args:' section must describe every parameter as "
            "'name: description' (or drop the section to leave them undescribed)"
        ) from None
    function = schema["function"]
    for prop in function["parameters"]["properties"].values():
        if prop.get("description") == _NO_DESCRIPTION:
            del prop["description"]
    if name is not None:
        _check_tool_name(name, label)
        function["name"] = name
    else:
        _check_tool_name(function["name"], label)
    return schema


def tool_schemas(fns: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]]
                 ) -> list[dict[str, Any]]:
    """:func:`tool_schema` of each function (a mapping gives ``name -> function``)."""
    if isinstance(fns, Mapping):
        return [tool_schema(fn, name=name) for name, fn in fns.items()]
    return [tool_schema(fn) for fn in fns]


def _callable_label(fn: Any) -> str:
    return repr(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)


def _check_tool_name(name: str, label: str) -> None:
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.fullmatch(name):
        raise ToolSchemaError(
            f"tool {label}: name {name!r} is not a valid tool name; use a letter or '_' "
            "followed by up to 63 letters, digits, '_' or '-'"
        )


def _check_parameters(fn: Callable[..., Any], label: str) -> None:
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolSchemaError(
                f"tool {label}: parameter {param.name!r} is {param.kind.description}; tools "
                "are called with named arguments, so give every parameter a name (no *args, "
                "**kwargs or '/')"
            )


def _has_args_section(doc: str) -> bool:
    return re.search(r"\n\s*Args:\n", doc) is not None


def _with_placeholder_args(fn: Callable[..., Any], doc: str) -> Callable[..., Any]:
    """A proxy of ``fn`` whose docstring has an ``Args:`` section of placeholders.

    transformers' ``get_json_schema`` insists on a description per parameter; a plain
    docstring has none, so the proxy supplies placeholders that ``tool_schema`` removes.
    """
    names = list(inspect.signature(fn).parameters)
    block = "\n\nArgs:\n" + "".join(f"    {name}: {_NO_DESCRIPTION}\n" for name in names)
    tail = re.search(r"\n\s*(?:Returns:|Raises:)", doc)
    cut = tail.start() if tail else len(doc)

    @functools.wraps(fn)
    def proxy(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    proxy.__doc__ = doc[:cut] + block + doc[cut:]
    return proxy


def _check_documented_names(fn: Callable[..., Any], label: str, doc: str) -> None:
    """A Google ``Args:`` entry that names no parameter is a typo: say which one was meant.

    Entries are the lines at the first entry's indentation, up to the first line indented
    less (the next section); deeper lines continue a description.
    """
    section = re.search(r"\n([ \t]*)Args:\n(.*)", doc, re.S)
    if section is None:
        return
    lines = [line for line in section.group(2).splitlines() if line.strip()]
    if not lines:
        return
    indent = len(lines[0]) - len(lines[0].lstrip())
    params = list(inspect.signature(fn).parameters)
    for line in lines:
        depth = len(line) - len(line.lstrip())
        if depth < indent or depth <= len(section.group(1)):
            break  # the next section
        entry = re.match(r"(\w+)\s*(?:\([^()]*\))?:", line.lstrip())
        if depth > indent or entry is None:
            continue
        if entry.group(1) not in params:
            raise ToolSchemaError(
                f"tool {label}: its docstring describes {entry.group(1)!r}, which is not a "
                f"parameter{did_you_mean(entry.group(1), params)} Parameters: "
                f"{', '.join(params) or '(none)'}"
            )
