"""Tool calls over randomly generated tool schemas, for the pretraining corpus.

Every conversation makes up its own tools: random names, random argument names and types,
a description that says what each returns. The system message lists them (as JSON schemas,
as ``name[<arg>]`` lines or as signatures) and says how to call them; the user asks for
something that one tool answers, with the values the call needs; the assistant calls the
right tool with the values copied exactly, reads the result from the ``tool`` message, and
answers with it (copied, or computed from it), sometimes after a second call whose argument
comes from the first result, and sometimes through an answer tool.

Two call formats, the two that chat templates and tiny models use: ``json``
(``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``) and ``compact``
(``name[argument]``, one argument). Names of tools and arguments are never
:func:`~turnrl.pretrain.text.held_out`, unless ``probe`` is set, when they are always.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from turnrl.pretrain import text
from turnrl.pretrain.skills import Message, _system

FORMATS = ("json", "compact")


@dataclass(frozen=True)
class Tool:
    """A made-up tool: ``name(params) -> {field: value}``; ``kinds[i]`` is ``string`` or
    ``integer``; ``field`` names what it returns."""

    name: str
    params: tuple[str, ...]
    kinds: tuple[str, ...]
    field: str

    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description(),
            "parameters": {"type": "object",
                           "properties": {p: {"type": k} for p, k in zip(self.params,
                                                                         self.kinds,
                                                                         strict=True)},
                           "required": list(self.params)}}}

    def description(self) -> str:
        return f"Returns the {self.field} of the given {' and '.join(self.params)}."

    def signature(self) -> str:
        typed = (f"{p}: {k}" for p, k in zip(self.params, self.kinds, strict=True))
        return f"{self.name}({', '.join(typed)})"


def make_tools(rng: random.Random, n: int, *, compact: bool, probe: bool) -> list[Tool]:
    """``n`` tools with distinct names and returned fields (one parameter each if ``compact``)."""
    names = list(dict.fromkeys(text.identifier(rng, probe=probe) for _ in range(n * 2)))[:n]
    fields = text.words(rng, len(names), (1, 2))
    tools = []
    for name, field in zip(names, fields, strict=True):
        count = 1 if compact else rng.choice((1, 1, 2, 3))
        params = tuple(dict.fromkeys(text.identifier(rng, probe=probe) for _ in range(count)))
        kinds = tuple(rng.choice(("string", "string", "integer")) for _ in params)
        tools.append(Tool(name, params, kinds, field))
    return tools


def render_tools(rng: random.Random, tools: list[Tool], fmt: str) -> str:
    """The tool list for a system message, in one of three styles."""
    style = rng.randrange(3) if fmt == "json" else rng.choice((1, 2))
    if style == 0:
        body = "\n".join(json.dumps(t.schema()) for t in tools)
        return f"<tools>\n{body}\n</tools>"
    if style == 1 and fmt == "compact":
        return "\n".join(f"{t.name}[<{t.params[0]}>]: {t.description()}" for t in tools)
    return "\n".join(f"- {t.signature()}: {t.description()}" for t in tools)


def call_text(tool: Tool, args: dict[str, Any], fmt: str) -> str:
    """How the assistant writes the call."""
    if fmt == "compact":
        return f"{tool.name}[{next(iter(args.values()))}]"
    return "<tool_call>" + json.dumps({"name": tool.name, "arguments": args}) + "</tool_call>"


def format_hint(rng: random.Random, fmt: str, example: Tool) -> str:
    if fmt == "compact":
        return rng.choice((f"Call a tool as {example.name}[<{example.params[0]}>].",
                           "Call a tool by writing its name and the argument in brackets."))
    return rng.choice(('Call a tool as <tool_call>{"name": ..., "arguments": {...}}</tool_call>.',
                       "Write tool calls as JSON inside <tool_call></tool_call> tags."))


def _arguments(rng: random.Random, tool: Tool) -> dict[str, Any]:
    return {p: (text.number(rng, (1, 4)) if k == "integer" else text.value(rng))
            for p, k in zip(tool.params, tool.kinds, strict=True)}


def _result(rng: random.Random, tool: Tool, value: Any) -> str:
    style = rng.randrange(3)
    if style == 0:
        return json.dumps({tool.field: value})
    return f"{tool.field}: {value}" if style == 1 else str(value)


def _request(rng: random.Random, tool: Tool, args: dict[str, Any], explicit: bool) -> str:
    given = " and ".join(f"{p} {v}" for p, v in args.items())
    if explicit:
        return rng.choice((f"Call {tool.name} with {given}.", f"Use {tool.name} for {given}."))
    return rng.choice((f"What is the {tool.field} of {given}?",
                       f"Find the {tool.field} for {given}.",
                       f"I need the {tool.field} of {given}."))


def tool_call(rng: random.Random, budget: int, *, probe: bool = False,
              fmt: str | None = None) -> list[Message]:
    """One conversation of tool use (see the module docstring)."""
    fmt = fmt or rng.choice(FORMATS)
    tools = make_tools(rng, rng.randint(1, 5), compact=fmt == "compact", probe=probe)
    answer_tool = make_tools(rng, 1, compact=True, probe=probe)[0] if rng.random() < 0.3 \
        else None
    first = rng.choice(tools)
    args = _arguments(rng, first)
    numeric = rng.random() < 0.5
    result: Any = text.number(rng, (1, 3)) if numeric else text.value(rng)
    added = text.number(rng, (1, 2)) if numeric and rng.random() < 0.3 else None
    request = _request(rng, first, args, explicit=rng.random() < 0.3)
    if added is not None:
        request = request.rstrip(".?") + f", plus {added}?"
    style = rng.random()  # the same list style at every length tried below
    answering = [answer_tool] if answer_tool else []
    rendered = render_tools(random.Random(style), tools + answering, fmt)
    while len(rendered) > budget // 2 and len(tools) > 1:  # fit the context: fewer tools
        tools.remove(next(t for t in reversed(tools) if t is not first))
        rendered = render_tools(random.Random(style), tools + answering, fmt)
    system = f"{rng.choice(('You have tools.', 'Tools:', 'You can call these tools:'))}\n" \
        f"{rendered}\n{format_hint(rng, fmt, first)}"
    if answer_tool is not None:
        system += f" Give the final answer with {answer_tool.name}[<answer>]."
    messages: list[Message] = [{"role": "system", "content": system}]
    if not probe and rng.random() < 0.2:
        messages = [*_system(rng), {"role": "user", "content": system}]
    messages += [{"role": "user", "content": request},
                 {"role": "assistant", "content": call_text(first, args, fmt)}]
    if not probe and rng.random() < 0.25 and len(tools) > 1:  # a second call, from the result
        second = rng.choice([t for t in tools if t is not first])
        key = text.code(rng)
        messages += [{"role": "tool", "content": _result(rng, first, key)},
                     {"role": "assistant",
                      "content": call_text(second, {second.params[0]: key}, "compact"
                                           if fmt == "compact" else "json")}]
        if fmt == "json" and len(second.params) > 1:  # every argument the call needs
            extra = _arguments(rng, second)
            extra[second.params[0]] = key
            messages[-1]["content"] = call_text(second, extra, fmt)
        first = second
    final = str(result + added) if added is not None else str(result)
    messages += [{"role": "tool", "content": _result(rng, first, result)},
                 {"role": "assistant", "content": f"{answer_tool.name}[{final}]"
                  if answer_tool else final}]
    return messages
