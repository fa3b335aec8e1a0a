"""Finding and reading tool calls in a model's reply, in each call format.

This module owns the call syntax: where calls are in the text and what each one says, as a
:class:`RawCall` (a name and its arguments as written, or why the call cannot be read). It
knows nothing of the toolbox's tools beyond their names; checking a call against a tool's
signature is :mod:`turnrl.envs.tools.arguments`' job. The formats (:data:`ToolFormat`):

``json``
    The format tool-aware chat templates teach: ``<tool_call>{"name": "search", "arguments":
    {"query": "x"}}</tool_call>`` (Qwen/Hermes), or the same JSON object bare in the text.
    ``"arguments"`` may also be spelled ``"parameters"`` (Llama 3) or be a JSON-encoded string
    (OpenAI); a ``{"function": {...}}`` wrapper is unwrapped. A ```` ```json ```` fence inside
    the tag is allowed. With any ``<tool_call>`` tag in the text, only tagged calls count.
``compact``
    ``name[argument]`` for tiny models, e.g. ``search[capital of France]``, anywhere in the
    text (``Action: search[...]`` works). The argument is the text between the brackets,
    stripped; brackets may nest, and one pair of matching quotes around the whole argument is
    removed. ``name[]`` calls without an argument.
``auto``
    Both; the call that starts first in the text wins, and a call that starts inside another
    (a JSON object with a ``"name"`` within ``search[...]``, or ``answer[...]`` within a JSON
    string) is part of that call, not a call of its own.

JSON is decoded leniently (:func:`loads`): strings may hold literal newlines and tabs
(multi-line code in a ``<tool_call>``). A call nested too deeply to decode (about a thousand
levels of brackets) is malformed, and the scan for bare JSON stops there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "TOOL_FORMATS",
    "RawCall",
    "ToolFormat",
    "balanced_brackets",
    "find_calls",
    "loads",
    "show",
]

ToolFormat = Literal["json", "compact", "auto"]
TOOL_FORMATS: tuple[str, ...] = ("json", "compact", "auto")


@dataclass(frozen=True)
class RawCall:
    """A call as written, before it is checked against the toolbox.

    ``arguments`` is the JSON call's ``{name: value}`` object or the compact call's argument
    text (``""`` for ``name[]``); ``problem`` says why the call cannot be read (a
    ``malformed`` call, whose ``arguments`` is ``None`` and ``name`` is known only if it was
    read before the problem).
    """

    start: int  # where it begins in the text
    end: int
    name: str | None = None
    arguments: dict[str, Any] | str | None = None
    problem: str | None = None


def find_calls(text: str, format: ToolFormat, known: Container[str]) -> list[RawCall]:
    """The calls in ``text`` in order, in ``format``; ``[]`` if there are none.

    Compact calls count only with a ``known`` tool name, so that prose such as ``list[int]``
    is not a call; if no call is found at all, a lone compact call of an unknown name is
    returned (for an "unknown tool" error). A call that starts inside an earlier one (JSON in
    a compact call's brackets, a compact call in a JSON string) belongs to it.
    """
    found: list[RawCall] = []
    if format in ("json", "auto"):
        found.extend(_find_json(text))
    if format in ("compact", "auto"):
        found.extend(_find_compact(text, known))
    calls: list[RawCall] = []
    for raw in sorted(found, key=lambda raw: raw.start):
        if not calls or raw.start >= calls[-1].end:  # kept calls never overlap
            calls.append(raw)
    if not calls and format != "json":
        calls = _find_compact(text, None)[:1]
    return calls


def loads(text: str) -> Any:
    """``json.loads`` that accepts literal newlines and tabs in strings (``strict=False``);
    raises ``ValueError`` or ``RecursionError`` (too deeply nested) on bad input."""
    return json.loads(text, strict=False)


def show(value: Any) -> str:
    """``value`` for an error message: as JSON (a string as its repr), cut to 80 characters."""
    try:
        text = json.dumps(value) if not isinstance(value, str) else repr(value)
    except (RecursionError, ValueError):  # nested deeper than the encoder goes
        text = f"a deeply nested {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


def balanced_brackets(text: str) -> bool:
    """Whether ``text`` can be a compact call's argument: every ``]`` closes an earlier
    ``[`` and every ``[`` is closed."""
    depth = 0
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


# --------------------------------------------------------------------------- json

_TAG_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|(?=<tool_call>)|\Z)", re.S)
_FENCE_RE = re.compile(r"\A```(?:json)?\s*(.*?)\s*```\Z", re.S)
# strict=False: a model writes multi-line code inside a JSON string with literal newlines
_DECODER = json.JSONDecoder(strict=False)
_NAME_KEY_RE = re.compile(r"\{\s*\"name\"")


def _find_json(text: str) -> list[RawCall]:
    """``<tool_call>`` blocks; without any, bare JSON objects that have a ``"name"``.

    A bare object too deeply nested to decode ends the scan: the rest of the text lies
    inside it (and rescanning it from each ``{`` would take quadratic time)."""
    tagged = [_json_call(m.group(1), m.start(), m.end())
              for m in _TAG_RE.finditer(text)]
    if tagged:
        return tagged
    calls: list[RawCall] = []
    first_problem: RawCall | None = None
    position = text.find("{")
    while position != -1:
        try:
            obj, end = _DECODER.raw_decode(text, position)
        except (RecursionError, ValueError) as error:  # JSONDecodeError is a ValueError
            if first_problem is None and _NAME_KEY_RE.match(text, position):
                first_problem = RawCall(position, len(text), problem=_json_problem(error))
            if isinstance(error, RecursionError):
                break
            position = text.find("{", position + 1)
            continue
        if isinstance(obj, dict) and ("name" in obj or "function" in obj):
            calls.append(_json_call_from_obj(obj, position, end))
            position = text.find("{", end)
        else:
            position = text.find("{", position + 1)
    if not calls and first_problem is not None:
        return [first_problem]
    return calls


def _json_problem(error: Exception, subject: str = "the tool call") -> str:
    return f"{subject} is not valid JSON ({_json_reason(error, where=True)})"


def _json_reason(error: Exception, *, where: bool) -> str:
    """Why JSON did not decode: a syntax error (at its line and column when ``where``),
    nesting too deep for the decoder (a ``RecursionError``), or a value it cannot hold (any
    other ``ValueError``, such as an integer of more than 4300 digits)."""
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at line {error.lineno} column {error.colno}" if where else error.msg
    if isinstance(error, RecursionError):
        return "it is nested too deeply to read"
    return f"it holds a value that cannot be read: {str(error).split(';')[0]}"


def _json_call(body: str, start: int, end: int) -> RawCall:
    """The call in the body of a ``<tool_call>`` tag."""
    body = body.strip()
    fence = _FENCE_RE.match(body)
    if fence:
        body = fence.group(1)
    if not body:
        return RawCall(start, end, problem="the <tool_call> block is empty")
    try:
        obj = loads(body)
    except (RecursionError, ValueError) as error:  # JSONDecodeError is a ValueError
        return RawCall(start, end, problem=_json_problem(
            error, "the text inside <tool_call>...</tool_call>"))
    if not isinstance(obj, dict):
        return RawCall(start, end, problem="the tool call must be a JSON object with "
                       f"\"name\" and \"arguments\", got a JSON {type(obj).__name__}")
    return _json_call_from_obj(obj, start, end)


def _json_call_from_obj(obj: dict[str, Any], start: int, end: int) -> RawCall:
    if isinstance(obj.get("function"), dict) and "name" not in obj:
        obj = obj["function"]  # OpenAI's {"type": "function", "function": {...}}
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return RawCall(start, end, problem='the tool call JSON needs a "name" string')
    unexpected = sorted(set(obj) - {"name", "arguments", "parameters", "id", "type"})
    if unexpected:
        return RawCall(start, end, name=name, problem=(
            f"the tool call JSON has unexpected key(s) {', '.join(map(repr, unexpected))}; "
            'put the tool\'s arguments inside "arguments"'))
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):  # OpenAI encodes arguments as a JSON string
        try:
            arguments = loads(arguments) if arguments.strip() else {}
        except (RecursionError, ValueError) as error:
            return RawCall(start, end, name=name, problem=(
                '"arguments" is a string that is not valid JSON '
                f"({_json_reason(error, where=False)})"))
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return RawCall(start, end, name=name, problem=(
            '"arguments" must be a JSON object mapping argument names to values, got '
            f"{show(arguments)}"))
    return RawCall(start, end, name=name, arguments=arguments)


# --------------------------------------------------------------------------- compact

_COMPACT_RE = re.compile(r"(?<![\w-])([A-Za-z_][\w-]*)\[")


def _find_compact(text: str, known: Container[str] | None) -> list[RawCall]:
    """``name[...]`` calls; with ``known``, only those naming a known tool."""
    calls = []
    position = 0
    while (match := _COMPACT_RE.search(text, position)) is not None:
        name = match.group(1)
        if known is not None and name not in known:
            position = match.end()
            continue
        close = _closing_bracket(text, match.end())
        if close is None:
            calls.append(RawCall(match.start(), len(text), name=name, problem=(
                f"the call {name}[... has no closing ']'")))
            break
        calls.append(RawCall(match.start(), close + 1, name=name,
                             arguments=_unquote(text[match.end():close].strip())))
        position = close + 1
    return calls


def _closing_bracket(text: str, position: int) -> int | None:
    depth = 1
    for index in range(position, len(text)):
        if text[index] == "[":
            depth += 1
        elif text[index] == "]":
            depth -= 1
            if depth == 0:
                return index
    return None


def _unquote(argument: str) -> str:
    if len(argument) >= 2 and argument[0] == argument[-1] and argument[0] in "\"'":
        return argument[1:-1]
    return argument
