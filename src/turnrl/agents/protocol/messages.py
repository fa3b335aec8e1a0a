"""Messages and tools of a chat request, in the normal form the server renders and compares
(see :mod:`turnrl.agents.protocol`): roles, text content, tool calls with parsed arguments,
the tool schemas and ``tool_choice``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from turnrl.agents.protocol.params import (
    _ROLE_ALIASES,
    _ROLES,
    _TOOL_NAME,
    _invalid_type,
    _invalid_value,
    _missing,
    _shown,
)
from turnrl.agents.protocol.values import OpenAIError


def _text(content: object, where: str) -> str:
    """A message's content as one string: a string, or its text parts joined."""
    param = f"{where}.content"
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _invalid_type(param, 'a string or an array of {"type": "text", "text": ...} parts',
                            content)
    pieces = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text":
            shown = f"type {kind!r}" if isinstance(part, dict) else _shown(part)
            raise OpenAIError(
                f"Unsupported content in '{param}[{j}]' ({shown}): only text is supported, as "
                '{"type": "text", "text": "..."} parts or a plain string; images, audio and '
                "files cannot be sent to this model.", param=param, code="unsupported_value")
        text = part.get("text")
        if not isinstance(text, str):
            raise _invalid_type(f"{param}[{j}].text", "a string", text)
        pieces.append(text)
    return "".join(pieces)


def _role(message: dict[str, Any], where: str) -> str:
    role = message.get("role")
    if role is None:
        raise _missing(f"{where}.role", f"each message needs a role, one of {', '.join(_ROLES)}")
    role = _ROLE_ALIASES.get(role, role) if isinstance(role, str) else role
    if role not in _ROLES:
        raise _invalid_value(f"{where}.role", f"{_shown(message.get('role'))} is not supported; "
                                              f"the roles are {', '.join(_ROLES)} (and "
                                              "developer, read as system).")
    return str(role)


def _arguments(text: object, param: str) -> dict[str, Any]:
    if not isinstance(text, str):
        raise _invalid_type(param, 'JSON text of an object (a string such as "{\\"x\\": 1}")',
                            text)
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as error:
        raise _invalid_value(param, f"it is not valid JSON ({error}); it must be the JSON text "
                                    "of an object, as the reply's tool call gave it.") from None
    if not isinstance(arguments, dict):
        raise _invalid_value(param, f"it holds {_shown(arguments)}; it must be the JSON text of "
                                    "an object (the call's named arguments).")
    return arguments


def _tool_call(call: object, where: str) -> dict[str, Any]:
    """One assistant tool call in normal form, its ``arguments`` parsed."""
    if not isinstance(call, dict):
        raise _invalid_type(where, 'an object {"id", "type": "function", "function"}', call)
    if not isinstance(call.get("id"), str):
        raise _invalid_type(f"{where}.id", "a string (the id the reply gave the call)",
                            call.get("id"))
    if call.get("type", "function") != "function":
        raise _invalid_value(f"{where}.type", f"{_shown(call.get('type'))} is not supported; "
                                              'only "function" tool calls are.')
    function = call.get("function")
    if not isinstance(function, dict):
        raise _invalid_type(f"{where}.function", 'an object {"name", "arguments"}', function)
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise _invalid_type(f"{where}.function.name", "a non-empty string", name)
    arguments = _arguments(function.get("arguments"), f"{where}.function.arguments")
    return {"id": call["id"], "type": "function",
            "function": {"name": name, "arguments": arguments}}


def _tool_calls(message: dict[str, Any], where: str) -> list[dict[str, Any]]:
    calls = message.get("tool_calls")
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise _invalid_type(f"{where}.tool_calls", "an array of tool calls", calls)
    return [_tool_call(call, f"{where}.tool_calls[{j}]") for j, call in enumerate(calls)]


def _optional_string(message: dict[str, Any], key: str, where: str) -> str | None:
    value = message.get(key)
    if value is not None and not isinstance(value, str):
        raise _invalid_type(f"{where}.{key}", "a string", value)
    return value


def _message(message: object, where: str) -> dict[str, Any]:
    """One message in normal form (see the module docstring)."""
    if not isinstance(message, dict):
        raise _invalid_type(where, 'a message object {"role": ..., "content": ...}', message)
    role = _role(message, where)
    calls = _tool_calls(message, where) if role == "assistant" else []
    content = message.get("content")
    if content is None:
        if not calls:
            raise _missing(f"{where}.content", "only an assistant message with tool_calls may "
                                               "have null or no content; send \"\" for an "
                                               "empty message")
        content = ""
    normal: dict[str, Any] = {"role": role, "content": _text(content, where)}
    name = _optional_string(message, "name", where)
    if name is not None:
        normal["name"] = name
    if calls:
        normal["tool_calls"] = calls
    if role == "tool":
        call_id = message.get("tool_call_id")
        if call_id is None:
            raise _missing(f"{where}.tool_call_id", "a tool message answers a tool call and "
                                                    "must give that call's id")
        if not isinstance(call_id, str):
            raise _invalid_type(f"{where}.tool_call_id", "a string (the id of the tool call)",
                                call_id)
        normal["tool_call_id"] = call_id
    if role == "assistant":
        reasoning = _optional_string(message, "reasoning_content", where)
        if reasoning is not None:
            normal["reasoning_content"] = reasoning
    return normal


def normalize_message(message: object) -> dict[str, Any]:
    """``message`` (an OpenAI chat message) in the normal form requests are parsed to: the
    server normalises the replies it gives so that an echoed reply compares equal."""
    return _message(message, "message")


def _messages(params: dict[str, Any]) -> list[dict[str, Any]]:
    messages = params.get("messages")
    if messages is None:
        raise _missing("messages", "send the conversation as an array of messages")
    if not isinstance(messages, list):
        raise _invalid_type("messages", "an array of messages", messages)
    if not messages:
        raise _invalid_value("messages", "it is empty; send at least one message.")
    return [_message(message, f"messages[{i}]") for i, message in enumerate(messages)]


def _tool(tool: object, where: str) -> str:
    """Check one tool schema; return its name."""
    if not isinstance(tool, dict):
        raise _invalid_type(where, 'a tool object {"type": "function", "function": {...}}', tool)
    if tool.get("type") != "function":
        raise _invalid_value(f"{where}.type", f"{_shown(tool.get('type'))} is not supported; "
                                              'only "function" tools are.')
    function = tool.get("function")
    if not isinstance(function, dict):
        raise _invalid_type(f"{where}.function", 'an object {"name", "description", '
                                                 '"parameters"}', function)
    name = function.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise _invalid_value(f"{where}.function.name", f"{_shown(name)} is not a tool name; it "
                                                       "must be 1 to 64 letters, digits, _ or -.")
    for key, kind, expected in (("description", str, "a string"),
                                ("parameters", dict, "a JSON schema object"),
                                ("strict", bool, "a boolean")):
        if function.get(key) is not None and not isinstance(function[key], kind):
            raise _invalid_type(f"{where}.function.{key}", expected, function[key])
    return name


def _tools(params: dict[str, Any]) -> list[dict[str, Any]] | None:
    tools = params.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise _invalid_type("tools", "an array of function tools", tools)
    seen: set[str] = set()
    for j, tool in enumerate(tools):
        name = _tool(tool, f"tools[{j}]")
        if name in seen:
            raise _invalid_value(f"tools[{j}].function.name", f"the tool name {name!r} is given "
                                                              "twice; tool names must be unique.")
        seen.add(name)
    return copy.deepcopy(tools) or None


def _tool_choice(params: dict[str, Any],
                 tools: list[dict[str, Any]] | None) -> str | dict[str, Any] | None:
    choice = params.get("tool_choice")
    expected = '"none", "auto", "required" or {"type": "function", "function": {"name": ...}}'
    if choice is None or choice in ("none", "auto"):
        return choice
    if isinstance(choice, str) and choice != "required":
        raise _invalid_value("tool_choice", f"{choice!r} is not supported; it must be "
                                            f"{expected}.")
    if not isinstance(choice, (str, dict)):
        raise _invalid_type("tool_choice", expected, choice)
    names = [tool["function"]["name"] for tool in tools or []]
    if not names:
        raise _invalid_value("tool_choice", f"{_shown(choice)} asks for a tool call but no "
                                            "'tools' are given; send the tools or leave "
                                            "'tool_choice' out.")
    if isinstance(choice, str):
        return choice
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if choice.get("type") != "function" or not isinstance(name, str):
        raise _invalid_value("tool_choice", f"{_shown(choice)} is not supported; it must be "
                                            f"{expected}.")
    if name not in names:
        raise _invalid_value("tool_choice", f"the function {name!r} is not among the tools "
                                            f"({', '.join(names)}).")
    return {"type": "function", "function": {"name": name}}
