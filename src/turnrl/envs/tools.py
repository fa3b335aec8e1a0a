"""Tools for envs: typed Python callables as chat-template tool schemas, and tool-call parsing.

An env that offers tools (a search engine, a calculator, ``answer``) keeps them in a
:class:`Toolbox`. The toolbox gives the JSON schemas that ``tokenizer.apply_chat_template(...,
tools=schemas)`` renders into the prompt, and turns the agent's reply into a tool call and the
call into an observation text::

    def search(query: str, k: int = 3) -> str:
        '''Search the corpus.

        Args:
            query: What to look for.
            k: How many passages to return.
        '''

    toolbox = Toolbox([search], format="auto")
    text, info = toolbox.call('<tool_call>{"name": "search", "arguments": {"query": "x"}}'
                              '</tool_call>')

Two call formats are understood:

``json``
    The format tool-aware chat templates teach: ``<tool_call>{"name": "search", "arguments":
    {"query": "x"}}</tool_call>`` (Qwen/Hermes), or the same JSON object bare in the text.
    ``"arguments"`` may also be spelled ``"parameters"`` (Llama 3) or be a JSON-encoded string
    (OpenAI); a ``{"function": {...}}`` wrapper is unwrapped. A ```` ```json ```` fence inside
    the tag is allowed.
``compact``
    ``name[argument]`` for tiny models, e.g. ``search[capital of France]``, anywhere in the
    text (``Action: search[...]`` works). The one positional argument is the tool's first
    parameter, converted to its annotated type; brackets may nest, and one pair of matching
    quotes around the whole argument is removed. ``name[]`` calls without an argument.
``auto``
    Both; the call that starts first in the text wins, and a call that starts inside another
    (a JSON object with a ``"name"`` within ``search[...]``, or ``answer[...]`` within a JSON
    string) is part of that call, not a call of its own.

JSON is decoded leniently: strings may hold literal newlines and tabs (multi-line code in a
``<tool_call>``). A call nested too deeply to decode (about a thousand levels of brackets) is
reported as ``malformed``, and the scan for bare JSON stops there.

Only the first call of a message is considered: if it is valid it is executed, and the
observation says how many further calls were ignored (``info["tool_calls_ignored"]``); if it is
invalid, its error is reported and the rest of the message is ignored. One call per turn keeps
the transcript and the per-turn credit simple.

Nothing here raises on a bad reply: a missing or malformed call, an unknown tool (with the
closest name suggested), missing, unexpected or ill-typed arguments, and an exception raised by
the tool itself each become an observation text (``"Error: ..."``) that says what was wrong and
shows the expected format, and ``info`` says which kind of error it was (see :data:`ERROR_KINDS`).
Mistakes of the env author (a tool without type hints or docstring, a duplicate name) raise
:class:`ToolSchemaError` when the toolbox is built.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin

from transformers.utils import get_json_schema
from transformers.utils.chat_template_utils import (
    DocstringParsingException,
    TypeHintParsingException,
)

from turnrl.registry import closest_name

__all__ = [
    "ERROR_KINDS",
    "TOOL_FORMATS",
    "ToolCall",
    "ToolCallError",
    "ToolFormat",
    "ToolSchemaError",
    "Toolbox",
    "tool_schema",
    "tool_schemas",
]

ToolFormat = Literal["json", "compact", "auto"]
TOOL_FORMATS: tuple[str, ...] = ("json", "compact", "auto")

ErrorKind = Literal["no_call", "malformed", "unknown_tool", "bad_arguments", "tool_exception"]
#: ``info["tool_error_kind"]`` values: no call found; a call that cannot be read (bad JSON,
#: unclosed bracket); a name that is not a tool; missing, unexpected or ill-typed arguments;
#: the tool raised an exception.
ERROR_KINDS: tuple[str, ...] = get_args(ErrorKind)

# OpenAI's rule for function names, with a letter or underscore first so that ``name[`` is
# unambiguous in the compact format.
TOOL_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")

_NO_DESCRIPTION = "\x00turnrl-no-description\x00"  # placeholder for plain docstrings


TOOL_ROLES = ("tool", "user")


def check_tool_role(role: str, env: str) -> str:
    """The message role of tool results: ``"tool"`` (default) or ``"user"``, for chat
    templates that reject a ``tool`` message without a matching ``tool_calls`` entry
    (Mistral) or that need strict user/assistant alternation (Gemma)."""
    if role not in TOOL_ROLES:
        raise ValueError(f"{env}: tool_role must be one of {TOOL_ROLES}, got {role!r}; use "
                         "'user' for chat templates without a tool role")
    return role


class ToolSchemaError(ValueError):
    """A callable cannot be a tool (no type hints, no docstring, unsupported parameters)."""


# --------------------------------------------------------------------------- schemas


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
            close = closest_name(entry.group(1), params)
            hint = f"; did you mean {close!r}?" if close else ""
            raise ToolSchemaError(
                f"tool {label}: its docstring describes {entry.group(1)!r}, which is not a "
                f"parameter{hint} Parameters: {', '.join(params) or '(none)'}"
            )


# --------------------------------------------------------------------------- parse results


@dataclass(frozen=True)
class ToolCall:
    """A valid call: a known tool and its arguments, converted to the annotated types."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolCallError:
    """Why a reply is not a valid call; ``message`` is the observation text for the agent."""

    kind: ErrorKind
    message: str
    name: str | None = None  # the tool's name, when the reply got that far


@dataclass(frozen=True)
class _RawCall:
    """A call as written, before it is checked against the toolbox."""

    start: int  # where it begins in the text
    end: int
    name: str | None = None
    arguments: dict[str, Any] | str | None = None  # JSON object, or the compact argument
    problem: str | None = None  # why it cannot be read (then kind is "malformed")


@dataclass(frozen=True)
class _Param:
    name: str
    hint: Any  # resolved annotation
    required: bool
    json_type: str  # "string", "integer", ... for messages


@dataclass(frozen=True)
class _Tool:
    name: str
    fn: Callable[..., Any]
    params: tuple[_Param, ...]
    schema: dict[str, Any]


class _ConversionError(Exception):
    """A value that does not fit a parameter's type; ``args[0]`` says what was expected."""


# --------------------------------------------------------------------------- the toolbox


class Toolbox:
    """Named tools, their schemas, and the parsing and execution of the agent's calls.

    Args:
        tools: functions (named by ``__name__``) or a ``name -> function`` mapping; each must
            satisfy :func:`tool_schema`.
        format: which call format the agent uses: ``"json"``, ``"compact"`` or ``"auto"``
            (both). With ``"compact"`` every tool must need at most one argument.

    Raises:
        ToolSchemaError: a tool cannot be described, two tools share a name, or a tool needs
            more than one argument in the compact format.
        ValueError: an unknown ``format``.
    """

    def __init__(self, tools: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]],
                 *, format: ToolFormat = "auto") -> None:
        if format not in TOOL_FORMATS:
            close = closest_name(str(format), list(TOOL_FORMATS))
            hint = f"; did you mean {close!r}?" if close else ""
            raise ValueError(f"tool format {format!r} is not one of {TOOL_FORMATS}{hint}")
        self.format: ToolFormat = format
        named = list(tools.items()) if isinstance(tools, Mapping) else [
            (getattr(fn, "__name__", None), fn) for fn in tools
        ]
        self._tools: dict[str, _Tool] = {}
        for name, fn in named:
            schema = tool_schema(fn, name=name)
            tool_name = schema["function"]["name"]
            if tool_name in self._tools:
                raise ToolSchemaError(
                    f"two tools are named {tool_name!r}; give them distinct names (pass a "
                    "mapping name -> function to rename one)"
                )
            self._tools[tool_name] = _Tool(tool_name, fn, _params(fn, schema), schema)
        if format == "compact":
            for tool in self._tools.values():
                if sum(param.required for param in tool.params) > 1:
                    raise ToolSchemaError(
                        f"tool {tool.name!r} needs {sum(p.required for p in tool.params)} "
                        "arguments, but the compact format name[arg] passes one; give the "
                        "other parameters defaults or use format='json' or 'auto'"
                    )

    def system_prompt(self, instruction: str) -> str:
        """An env's system message: ``instruction``, the tools and how to call them."""
        return (f"{instruction}\nTools:\n{self.describe()}\n{self.format_hint()} "
                "One tool call per turn.")

    def template_schemas(self) -> list[dict[str, Any]]:
        """The schemas for ``apply_chat_template(tools=...)`` (``HasTools.tool_schemas``):
        ``[]`` in the compact format, whose tools the system prompt lists instead."""
        return [] if self.format == "compact" else self.schemas()

    def format_call(self, name: str, argument: str) -> str:
        """A call of the one-argument tool ``name`` as this toolbox's agent would write it
        (for oracles and demonstrations): ``name[argument]`` in the compact and auto formats,
        unless the argument has unbalanced brackets, which only JSON can carry (``"compact"``
        then drops them); ``<tool_call>{"name": ..., "arguments": {param: argument}}
        </tool_call>`` in the JSON format.

        Raises:
            ValueError: ``name`` is not a tool of this toolbox, or the tool takes no
                parameters (write its call by hand: ``name[]`` or ``{"name": ...,
                "arguments": {}}``).
        """
        tool = self._tools.get(name)
        if tool is None:
            close = closest_name(str(name), list(self._tools))
            hint = f"; did you mean {close!r}?" if close else ""
            raise ValueError(f"format_call: {name!r} is not a tool of this toolbox{hint} "
                             f"Tools: {', '.join(self._tools) or '(none)'}")
        if not tool.params:
            raise ValueError(
                f"format_call: tool {name!r} takes no parameters, so it has no argument to "
                f"pass {argument!r} as; write its call by hand, e.g. {name}[] or "
                f'<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>')
        balanced = _balanced_brackets(argument)
        if self.format == "json" or (self.format == "auto" and not balanced):
            key = tool.params[0].name
            body = json.dumps({"name": name, "arguments": {key: argument}}, ensure_ascii=False)
            return f"<tool_call>{body}</tool_call>"
        if not balanced:
            argument = " ".join(re.sub(r"[\[\]]", " ", argument).split())
        return f"{name}[{argument}]"

    @property
    def names(self) -> list[str]:
        """The tool names, in the order the tools were given (e.g. for ``EnvSpec.tools``)."""
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """The tools' JSON schemas, for ``apply_chat_template(messages, tools=...)``."""
        return [copy.deepcopy(tool.schema) for tool in self._tools.values()]

    def describe(self) -> str:
        """A plain-text tool list for a system prompt, one tool per line, in the toolbox's
        format (for templates that do not render ``tools`` themselves)."""
        lines = []
        for tool in self._tools.values():
            description = tool.schema["function"].get("description") or ""
            example = self._example(tool, prefer_compact=True)
            lines.append(f"{example}: {description}" if description else example)
        return "\n".join(lines)

    def format_hint(self, name: str | None = None) -> str:
        """``"Call a tool as search[<query>]."``, shown after every error; ``name`` picks the
        tool of the example (the first tool when ``None`` or unknown)."""
        if not self._tools:
            return "No tools are available."
        tool = self._tools.get(name or "", next(iter(self._tools.values())))
        if self.format == "auto":
            json_example = self._example(tool, prefer_compact=False)
            compact = self._example(tool, prefer_compact=True)
            return f"Call a tool as {compact} or as {json_example}."
        return f"Call a tool as {self._example(tool, prefer_compact=self.format == 'compact')}."

    # ----------------------------------------------------------------- parsing

    def parse_all(self, text: str) -> list[ToolCall | ToolCallError]:
        """Every call in ``text``, in order, each checked against the tools; ``[]`` if none."""
        raws = self._find_calls(text)
        if not raws and self.format != "json":
            unknown = _find_compact(text, known=None)
            raws = unknown[:1]  # a lone name[...] with an unknown name: report it
        return [self._check(raw) for raw in raws]

    def parse(self, text: str) -> ToolCall | ToolCallError:
        """The first call in ``text``, or the error to show the agent (``kind="no_call"``
        when there is none)."""
        results = self.parse_all(text)
        if results:
            return results[0]
        return ToolCallError("no_call", f"Error: no tool call found. {self.format_hint()}")

    # ----------------------------------------------------------------- execution

    def call(self, text: str) -> tuple[str, dict[str, Any]]:
        """Parse the first call in ``text``, run it, and return ``(observation, info)``.

        ``observation`` is the tool's result (a string as is, ``None`` as ``"(no output)"``,
        anything else as JSON, or ``str`` when not JSON-serialisable) or an ``"Error: ..."``
        text. ``info`` holds
        ``tool_name`` (``None`` if unknown), ``tool_calls`` (1 if a tool ran, even if it
        raised, else 0), ``tool_error`` (bool), ``tool_error_kind`` (one of
        :data:`ERROR_KINDS` or ``None``) and ``tool_calls_ignored`` (further calls in the
        message that were not run).
        """
        results = self.parse_all(text)
        first = results[0] if results else self.parse(text)
        ignored = max(len(results) - 1, 0)
        if isinstance(first, ToolCallError):
            return first.message, _info(first.name, ran=False, error=first.kind, ignored=ignored)
        observation, error = self.execute(first)
        if ignored:
            observation += (f"\n(Note: only the first tool call was run; {ignored} more "
                            f"call{'s were' if ignored > 1 else ' was'} ignored. "
                            "Make one tool call per turn.)")
        return observation, _info(first.name, ran=True, error=error, ignored=ignored)

    def execute(self, call: ToolCall) -> tuple[str, ErrorKind | None]:
        """Run a parsed call: ``(observation, None)``, or ``(error text, "tool_exception")``
        when the tool raised (the exception's type and message are shown to the agent)."""
        tool = self._tools[call.name]
        try:
            result = tool.fn(**call.arguments)
        except Exception as error:  # the agent sees it; the runner must go on
            return (f"Error: tool {call.name!r} raised {type(error).__name__}: {error}",
                    "tool_exception")
        return _result_text(result), None

    # ----------------------------------------------------------------- internals

    def _find_calls(self, text: str) -> list[_RawCall]:
        """The calls in ``text`` in order; a call that starts inside an earlier one (JSON in
        a compact call's brackets, a compact call in a JSON string) belongs to it."""
        found: list[_RawCall] = []
        if self.format in ("json", "auto"):
            found.extend(_find_json(text))
        if self.format in ("compact", "auto"):
            found.extend(_find_compact(text, known=self._tools))
        calls: list[_RawCall] = []
        for raw in sorted(found, key=lambda raw: raw.start):
            if not calls or raw.start >= calls[-1].end:  # kept calls never overlap
                calls.append(raw)
        return calls

    def _check(self, raw: _RawCall) -> ToolCall | ToolCallError:
        if raw.problem is not None:
            return ToolCallError("malformed", f"Error: {_sentence(raw.problem)} "
                                 f"{self.format_hint(raw.name)}", raw.name)
        name = raw.name or ""
        tool = self._tools.get(name)
        if tool is None:
            close = closest_name(name, list(self._tools))
            hint = f"; did you mean {close!r}?" if close else "."
            return ToolCallError(
                "unknown_tool",
                f"Error: unknown tool {name!r}{hint} Available tools: "
                f"{', '.join(self._tools) or '(none)'}. {self.format_hint(close)}",
                name,
            )
        try:
            arguments = _bind(tool, raw.arguments)
        except _ConversionError as error:
            return ToolCallError(
                "bad_arguments",
                f"Error: {_sentence(error.args[0])} {_signature_text(tool)} "
                f"{self.format_hint(name)}",
                name,
            )
        return ToolCall(name, arguments)

    def _example(self, tool: _Tool, *, prefer_compact: bool) -> str:
        if prefer_compact and self.format != "json":
            first = tool.params[0].name if tool.params else ""
            return f"{tool.name}[{f'<{first}>' if first else ''}]"
        arguments = {p.name: _PLACEHOLDERS.get(p.json_type) for p in tool.params if p.required}
        if not arguments and tool.params:
            arguments = {tool.params[0].name: _PLACEHOLDERS.get(tool.params[0].json_type)}
        body = json.dumps({"name": tool.name, "arguments": arguments})
        return f"<tool_call>{body}</tool_call>"


_PLACEHOLDERS: dict[str, Any] = {"string": "...", "integer": 0, "number": 0.0, "boolean": True,
                                 "array": [], "object": {}}


def _balanced_brackets(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def _info(name: str | None, *, ran: bool, error: str | None, ignored: int) -> dict[str, Any]:
    return {"tool_name": name, "tool_calls": int(ran), "tool_error": error is not None,
            "tool_error_kind": error, "tool_calls_ignored": ignored}


def _result_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    if result is None:
        return "(no output)"
    try:
        return json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        return str(result)
    except RecursionError:
        return f"(a {type(result).__name__} nested too deeply to show)"


def _params(fn: Callable[..., Any], schema: dict[str, Any]) -> tuple[_Param, ...]:
    hints = typing.get_type_hints(fn)
    properties = schema["function"]["parameters"]["properties"]
    params = []
    for param in inspect.signature(fn).parameters.values():
        prop = properties.get(param.name, {})
        json_type = prop.get("type", "value")
        if isinstance(json_type, list):
            json_type = " or ".join(json_type)
        params.append(_Param(param.name, hints.get(param.name, Any),
                             param.default is inspect.Parameter.empty, str(json_type)))
    return tuple(params)


def _signature_text(tool: _Tool) -> str:
    """``Tool 'search' takes: query (string, required), k (integer, optional).``"""
    if not tool.params:
        return f"Tool {tool.name!r} takes no arguments."
    parts = [f"{p.name} ({p.json_type}, {'required' if p.required else 'optional'})"
             for p in tool.params]
    return f"Tool {tool.name!r} takes: {', '.join(parts)}."


# --------------------------------------------------------------------------- finding calls

_TAG_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|(?=<tool_call>)|\Z)", re.S)
_FENCE_RE = re.compile(r"\A```(?:json)?\s*(.*?)\s*```\Z", re.S)
_COMPACT_RE = re.compile(r"(?<![\w-])([A-Za-z_][\w-]*)\[")
# strict=False: a model writes multi-line code inside a JSON string with literal newlines
_DECODER = json.JSONDecoder(strict=False)
_NAME_KEY_RE = re.compile(r"\{\s*\"name\"")


def _find_json(text: str) -> list[_RawCall]:
    """``<tool_call>`` blocks; without any, bare JSON objects that have a ``"name"``.

    A bare object too deeply nested to decode ends the scan: the rest of the text lies
    inside it (and rescanning it from each ``{`` would take quadratic time)."""
    tagged = [_json_call(m.group(1), m.start(), m.end(), tagged=True)
              for m in _TAG_RE.finditer(text)]
    if tagged:
        return tagged
    calls: list[_RawCall] = []
    first_problem: _RawCall | None = None
    position = text.find("{")
    while position != -1:
        try:
            obj, end = _DECODER.raw_decode(text, position)
        except (RecursionError, ValueError) as error:  # JSONDecodeError is a ValueError
            if first_problem is None and _NAME_KEY_RE.match(text, position):
                first_problem = _RawCall(position, len(text), problem=_json_problem(error))
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


def _json_problem(error: Exception) -> str:
    return f"the tool call is not valid JSON ({_json_reason(error, where=True)})"


def _json_reason(error: Exception, *, where: bool) -> str:
    """Why JSON did not decode: a syntax error (at its line and column when ``where``),
    nesting too deep for the decoder (a ``RecursionError``), or a value it cannot hold (any
    other ``ValueError``, such as an integer of more than 4300 digits)."""
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at line {error.lineno} column {error.colno}" if where else error.msg
    if isinstance(error, RecursionError):
        return "it is nested too deeply to read"
    return f"it holds a value that cannot be read: {str(error).split(';')[0]}"


def _loads(text: str) -> Any:
    """``json.loads`` that accepts literal newlines and tabs in strings (``strict=False``);
    raises ``ValueError`` or ``RecursionError`` (too deeply nested) on bad input."""
    return json.loads(text, strict=False)


def _json_call(body: str, start: int, end: int, *, tagged: bool) -> _RawCall:
    body = body.strip()
    fence = _FENCE_RE.match(body)
    if fence:
        body = fence.group(1)
    if not body:
        return _RawCall(start, end, problem="the <tool_call> block is empty")
    try:
        obj = _loads(body)
    except (RecursionError, ValueError) as error:  # JSONDecodeError is a ValueError
        where = "inside <tool_call>...</tool_call> " if tagged else ""
        return _RawCall(start, end, problem=_json_problem(error).replace(
            "the tool call is", f"the text {where}is"))
    if not isinstance(obj, dict):
        return _RawCall(start, end, problem="the tool call must be a JSON object with "
                        f"\"name\" and \"arguments\", got a JSON {type(obj).__name__}")
    return _json_call_from_obj(obj, start, end)


def _json_call_from_obj(obj: dict[str, Any], start: int, end: int) -> _RawCall:
    if isinstance(obj.get("function"), dict) and "name" not in obj:
        obj = obj["function"]  # OpenAI's {"type": "function", "function": {...}}
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return _RawCall(start, end, problem='the tool call JSON needs a "name" string')
    unexpected = sorted(set(obj) - {"name", "arguments", "parameters", "id", "type"})
    if unexpected:
        return _RawCall(start, end, name=name, problem=(
            f"the tool call JSON has unexpected key(s) {', '.join(map(repr, unexpected))}; "
            'put the tool\'s arguments inside "arguments"'))
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):  # OpenAI encodes arguments as a JSON string
        try:
            arguments = _loads(arguments) if arguments.strip() else {}
        except (RecursionError, ValueError) as error:
            return _RawCall(start, end, name=name, problem=(
                '"arguments" is a string that is not valid JSON '
                f"({_json_reason(error, where=False)})"))
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return _RawCall(start, end, name=name, problem=(
            '"arguments" must be a JSON object mapping argument names to values, got '
            f"{_show(arguments)}"))
    return _RawCall(start, end, name=name, arguments=arguments)


def _find_compact(text: str, known: Mapping[str, Any] | None) -> list[_RawCall]:
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
            calls.append(_RawCall(match.start(), len(text), name=name, problem=(
                f"the call {name}[... has no closing ']'")))
            break
        calls.append(_RawCall(match.start(), close + 1, name=name,
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


# --------------------------------------------------------------------------- arguments


def _bind(tool: _Tool, arguments: dict[str, Any] | str | None) -> dict[str, Any]:
    """Check and convert the arguments of a call; raises ``_ConversionError``."""
    if isinstance(arguments, str):  # compact: one positional argument
        if not tool.params:
            if arguments:
                raise _ConversionError(
                    f"tool {tool.name!r} takes no argument, got {arguments!r}; call it as "
                    f"{tool.name}[]")
            return {}
        arguments = {tool.params[0].name: arguments} if arguments else {}
    arguments = dict(arguments or {})
    names = [param.name for param in tool.params]
    for key in arguments:
        if key not in names:
            close = closest_name(key, names)
            hint = f"; did you mean {close!r}?" if close else ""
            raise _ConversionError(f"tool {tool.name!r} got an unexpected argument {key!r}{hint}")
    missing = [p.name for p in tool.params if p.required and p.name not in arguments]
    if missing:
        raise _ConversionError(
            f"tool {tool.name!r} is missing required argument(s) "
            f"{', '.join(map(repr, missing))}")
    converted = {}
    for param in tool.params:
        if param.name in arguments:
            try:
                converted[param.name] = _convert(arguments[param.name], param.hint)
            except _ConversionError as error:
                raise _ConversionError(
                    f"argument {param.name!r} of tool {tool.name!r} must be {error.args[0]}, "
                    f"got {_show(arguments[param.name])}") from None
    return converted


def _show(value: Any) -> str:
    """``value`` as JSON (a string as its repr), cut to 80 characters."""
    try:
        text = json.dumps(value) if not isinstance(value, str) else repr(value)
    except (RecursionError, ValueError):  # nested deeper than the encoder goes
        text = f"a deeply nested {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


def _convert(value: Any, hint: Any) -> Any:
    """``value`` as an instance of ``hint``; strings (the compact format, or a model's
    ``"3"`` for an int) are parsed. Raises ``_ConversionError("an integer")`` etc."""
    origin = get_origin(hint)
    if hint is Any:
        return value
    if origin is Union or origin is types.UnionType:
        return _convert_union(value, get_args(hint))
    if origin is Literal or (isinstance(hint, type) and issubclass(hint, Enum)):
        return _convert_choice(value, hint)
    if hint in _SCALARS:
        return _SCALARS[hint](value)
    if hint in (list, tuple, dict) or origin in (list, tuple, dict):
        return _convert_container(value, hint)
    return value  # a type the schema accepted but that we do not check


def _convert_union(value: Any, options: tuple[Any, ...]) -> Any:
    non_null = [option for option in options if option is not type(None)]
    if value is None and len(non_null) < len(options):
        return None
    if (isinstance(value, str) and value.strip().lower() in ("none", "null")
            and len(non_null) < len(options) and str not in non_null):
        return None
    expected = []
    for option in non_null:
        try:
            return _convert(value, option)
        except _ConversionError as error:
            expected.append(error.args[0])
    if len(non_null) < len(options):
        expected.append("null")
    raise _ConversionError(" or ".join(expected))


def _convert_choice(value: Any, hint: Any) -> Any:
    if get_origin(hint) is Literal:
        pairs = [(choice, choice) for choice in get_args(hint)]
    else:
        pairs = [(member.value, member) for member in hint]
    for choice, result in pairs:
        same_type = type(choice) is type(value) or (
            isinstance(choice, float) and type(value) is int)
        if (same_type and value == choice) or (
                isinstance(value, str) and value.strip() == str(choice)):
            return result
    raise _ConversionError(f"one of {json.dumps([choice for choice, _ in pairs])}")


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return json.dumps(value)
    raise _ConversionError("a string")


def _to_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
        try:
            number = float(value.strip())
        except ValueError:
            raise _ConversionError("an integer") from None
        if number.is_integer():
            return int(number)
    raise _ConversionError("an integer")


def _to_float(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise _ConversionError("a number")


_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise _ConversionError("a boolean (true or false)")


_SCALARS: dict[Any, Callable[[Any], Any]] = {
    str: _to_str, int: _to_int, float: _to_float, bool: _to_bool,
}


def _convert_container(value: Any, hint: Any) -> Any:
    origin = get_origin(hint) or hint
    wanted = dict if origin is dict else list
    expected = "a JSON object" if wanted is dict else "a JSON array"
    if isinstance(value, str):
        try:
            value = _loads(value)
        except RecursionError:
            raise _ConversionError(f"{expected} nested less deeply") from None
        except ValueError:  # JSONDecodeError, or a value json cannot hold
            raise _ConversionError(expected) from None
    if not isinstance(value, wanted):
        raise _ConversionError(expected)
    args = get_args(hint)
    try:
        if origin is list and len(args) == 1:
            return [_convert(item, args[0]) for item in value]
        if origin is dict and len(args) == 2:
            return {key: _convert(item, args[1]) for key, item in value.items()}
    except _ConversionError as error:
        raise _ConversionError(f"{expected} whose values are each {error.args[0]}") from None
    return tuple(value) if origin is tuple else value
