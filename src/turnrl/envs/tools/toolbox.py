"""The toolbox: an env's named tools, their prompts, and the agent's calls as observations.

This module owns a call's life after it is found: :class:`Toolbox` checks each
:class:`~turnrl.envs.tools.parsing.RawCall` against its tools (a known name, arguments that
:class:`~turnrl.envs.tools.arguments.ToolArguments` accepts), runs the first one and turns the
outcome into ``(observation, info)``: the tool's result as text, or an ``"Error: ..."`` text
that says what was wrong and shows the expected format, with ``info["tool_error_kind"]`` one
of :data:`ERROR_KINDS`. It also writes the tool list, format hint and example calls of the
system prompt, and checks an env's ``tool_role`` (:func:`check_tool_role`).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from turnrl.envs.prompts import system_messages
from turnrl.envs.tools.arguments import ArgumentError, ToolArguments
from turnrl.envs.tools.parsing import (
    TOOL_FORMATS,
    RawCall,
    ToolFormat,
    balanced_brackets,
    find_calls,
)
from turnrl.envs.tools.schemas import ToolSchemaError, tool_schema
from turnrl.types import Message
from turnrl.wording import closest_name, did_you_mean

__all__ = [
    "ERROR_KINDS",
    "TOOL_ROLES",
    "ErrorKind",
    "ToolCall",
    "ToolCallError",
    "Toolbox",
    "check_tool_role",
]

ErrorKind = Literal["no_call", "malformed", "unknown_tool", "bad_arguments", "tool_exception"]
#: ``info["tool_error_kind"]`` values: no call found; a call that cannot be read (bad JSON,
#: unclosed bracket); a name that is not a tool; missing, unexpected or ill-typed arguments;
#: the tool raised an exception.
ERROR_KINDS: tuple[str, ...] = get_args(ErrorKind)

TOOL_ROLES = ("tool", "user")


def check_tool_role(role: str, env: str) -> str:
    """The message role of tool results: ``"tool"`` (default) or ``"user"``, for chat
    templates that reject a ``tool`` message without a matching ``tool_calls`` entry
    (Mistral) or that need strict user/assistant alternation (Gemma)."""
    if role not in TOOL_ROLES:
        raise ValueError(f"{env}: tool_role must be one of {TOOL_ROLES}, got {role!r}; use "
                         "'user' for chat templates without a tool role")
    return role


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
class _Tool:
    name: str
    fn: Callable[..., Any]
    arguments: ToolArguments
    schema: dict[str, Any]


class Toolbox:
    """Named tools, their schemas, and the parsing and execution of the agent's calls.

    Args:
        tools: functions (named by ``__name__``) or a ``name -> function`` mapping; each must
            satisfy :func:`~turnrl.envs.tools.schemas.tool_schema`.
        format: which call format the agent uses: ``"json"``, ``"compact"`` or ``"auto"``
            (both; see :mod:`turnrl.envs.tools.parsing`). With ``"compact"`` every tool must
            need at most one argument.

    Raises:
        ToolSchemaError: a tool cannot be described, two tools share a name, or a tool needs
            more than one argument in the compact format.
        ValueError: an unknown ``format``.
    """

    def __init__(self, tools: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]],
                 *, format: ToolFormat = "auto") -> None:
        if format not in TOOL_FORMATS:
            raise ValueError(f"tool format {format!r} is not one of {TOOL_FORMATS}"
                             f"{did_you_mean(str(format), TOOL_FORMATS)}")
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
            self._tools[tool_name] = _Tool(tool_name, fn, ToolArguments(tool_name, fn, schema),
                                           schema)
        if format == "compact":
            for tool in self._tools.values():
                required = sum(param.required for param in tool.arguments.params)
                if required > 1:
                    raise ToolSchemaError(
                        f"tool {tool.name!r} needs {required} arguments, but the compact "
                        "format name[arg] passes one; give the other parameters defaults or "
                        "use format='json' or 'auto'"
                    )

    def system_prompt(self, instruction: str) -> str:
        """An env's system message: ``instruction``, the tools and how to call them."""
        return (f"{instruction}\nTools:\n{self.describe()}\n{self.format_hint()} "
                "One tool call per turn.")

    def system_messages(self, instruction: str, system_prompt: str | None, env: str
                        ) -> list[Message]:
        """The messages an env's episode opens with, before the task: ``system_prompt`` as
        the system message when given (``""``: none, for a model trained from scratch that
        learns the tools from its demonstrations), else :meth:`system_prompt`
        (:func:`turnrl.envs.prompts.system_messages`)."""
        return system_messages(self.system_prompt(instruction), system_prompt, env)

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
            raise ValueError(f"format_call: {name!r} is not a tool of this toolbox"
                             f"{did_you_mean(str(name), self._tools)} "
                             f"Tools: {', '.join(self._tools) or '(none)'}")
        if not tool.arguments.params:
            raise ValueError(
                f"format_call: tool {name!r} takes no parameters, so it has no argument to "
                f"pass {argument!r} as; write its call by hand, e.g. {name}[] or "
                f'<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>')
        balanced = balanced_brackets(argument)
        if self.format == "json" or (self.format == "auto" and not balanced):
            key = tool.arguments.params[0].name
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
        return [self._check(raw) for raw in find_calls(text, self.format, self._tools)]

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

    def _check(self, raw: RawCall) -> ToolCall | ToolCallError:
        if raw.problem is not None:
            return ToolCallError("malformed", f"Error: {_sentence(raw.problem)} "
                                 f"{self.format_hint(raw.name)}", raw.name)
        name = raw.name or ""
        tool = self._tools.get(name)
        if tool is None:
            return ToolCallError(
                "unknown_tool",
                f"Error: unknown tool {name!r}{did_you_mean(name, self._tools, otherwise='.')}"
                f" Available tools: {', '.join(self._tools) or '(none)'}. "
                f"{self.format_hint(closest_name(name, list(self._tools)))}",
                name,
            )
        try:
            arguments = tool.arguments.bind(raw.arguments)
        except ArgumentError as error:
            return ToolCallError(
                "bad_arguments",
                f"Error: {_sentence(error.args[0])} {tool.arguments.signature_text()} "
                f"{self.format_hint(name)}",
                name,
            )
        return ToolCall(name, arguments)

    def _example(self, tool: _Tool, *, prefer_compact: bool) -> str:
        params = tool.arguments.params
        if prefer_compact and self.format != "json":
            first = params[0].name if params else ""
            return f"{tool.name}[{f'<{first}>' if first else ''}]"
        arguments = {p.name: _PLACEHOLDERS.get(p.json_type) for p in params if p.required}
        if not arguments and params:
            arguments = {params[0].name: _PLACEHOLDERS.get(params[0].json_type)}
        body = json.dumps({"name": tool.name, "arguments": arguments})
        return f"<tool_call>{body}</tool_call>"


_PLACEHOLDERS: dict[str, Any] = {"string": "...", "integer": 0, "number": 0.0, "boolean": True,
                                 "array": [], "object": {}}


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


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def _info(name: str | None, *, ran: bool, error: str | None, ignored: int) -> dict[str, Any]:
    return {"tool_name": name, "tool_calls": int(ran), "tool_error": error is not None,
            "tool_error_kind": error, "tool_calls_ignored": ignored}
