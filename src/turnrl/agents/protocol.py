"""The OpenAI wire format of turnrl's agent endpoint: requests checked and typed, replies built.

An agent program written against the ``openai`` SDK talks to turnrl's server as it would to
OpenAI. This module is the pure translation layer between that JSON and typed values; it does
no I/O and knows nothing of engines or tokenizers:

- :func:`parse_chat_request` and :func:`parse_completion_request` turn a request body
  (``/v1/chat/completions``, ``/v1/completions``) into a frozen :class:`ChatRequest` or
  :class:`CompletionRequest`, or raise :class:`OpenAIError` (a 400 whose ``body()`` is the JSON
  OpenAI itself would send, naming the parameter, what was given and what is allowed);
- :func:`chat_completion`, :func:`chat_chunks`, :func:`completion`, :func:`completion_chunks`
  and :func:`models_list` build the replies, whole or as server-sent events, from
  :class:`Choice` and :class:`Usage`.

Message normal form
-------------------
The server renders ``ChatRequest.messages`` with a Hugging Face chat template and compares the
messages of successive calls, so they are normalised deterministically (same input, same dicts):

- ``role`` is one of ``system``, ``user``, ``assistant``, ``tool`` (``developer`` becomes
  ``system``);
- ``content`` is a string: a list of ``{"type": "text"}`` parts is joined without separator;
  ``null`` becomes ``""`` on an assistant message that has tool calls;
- an assistant's ``tool_calls`` (kept only when non-empty) are
  ``{"id", "type": "function", "function": {"name", "arguments": dict}}``, the ``arguments``
  JSON text parsed into an object, as templates (Qwen, Llama) apply ``tojson`` to it;
- ``name``, a tool message's ``tool_call_id`` and an assistant's ``reasoning_content`` are kept;
  every other key (``refusal``, ``annotations``, ``audio``, ...) is dropped.

Sampling parameters that would change the distribution sampled from (penalties, logit bias,
structured outputs) are refused rather than ignored: the tokens sampled are trained on with
the policy's own logprobs, so they must come from the policy unchanged.

Parameters whose value is ``null`` count as not given, as in OpenAI's API.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "ChatRequest",
    "Choice",
    "CompletionRequest",
    "Limits",
    "OpenAIError",
    "Usage",
    "chat_chunks",
    "chat_completion",
    "completion",
    "completion_chunks",
    "models_list",
    "normalize_message",
    "parse_chat_request",
    "parse_completion_request",
]


class OpenAIError(Exception):
    """A request the server refuses, as OpenAI reports it.

    ``body()`` is the JSON of the error reply, ``status`` its HTTP status. ``param`` names the
    offending parameter as OpenAI does (``"temperature"``, ``"messages[2].content"``).
    """

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        status: int = 400,
        type: str = "invalid_request_error",
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status
        self.type = type
        self.code = code

    def body(self) -> dict[str, Any]:
        """``{"error": {"message", "type", "param", "code"}}``, the JSON OpenAI replies with."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


@dataclass(frozen=True)
class Limits:
    """What one run allows a request to ask for.

    Attributes:
        max_tokens: the cap on new tokens per call; a request asking for more is clamped to it
            (and the parameter named in ``clamped``), not refused.
        max_n: the most samples per request (``n``); more is a 400.
        max_top_logprobs: the most alternatives per token (chat ``top_logprobs``; the legacy
            ``logprobs`` is also capped at 5, as in OpenAI's API).
    """

    max_tokens: int
    max_n: int = 8
    max_top_logprobs: int = 20

    def __post_init__(self) -> None:
        for name, low in (("max_tokens", 1), ("max_n", 1), ("max_top_logprobs", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"Limits.{name} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class ChatRequest:
    """A checked ``/v1/chat/completions`` request (see the module docstring for ``messages``).

    Attributes:
        model: the model id asked for (the server checks it is served).
        messages: the conversation in normal form.
        tools: the OpenAI tool schemas as sent (a deep copy), ``None`` when none (or ``[]``).
        tool_choice: ``"none"``, ``"auto"``, ``"required"``,
            ``{"type": "function", "function": {"name": ...}}`` (a name in ``tools``) or
            ``None`` (not given).
        temperature: in ``[0, 2]``, default 1.
        top_p: in ``(0, 1]``, default 1.
        max_tokens: new tokens at most: ``max_completion_tokens``, else ``max_tokens``, else
            ``limits.max_tokens``, clamped to ``limits.max_tokens``.
        stop: up to 4 non-empty stop strings.
        seed: the sampling seed, if given.
        n: samples to draw, ``1..limits.max_n``.
        logprobs: whether to return the sampled tokens' logprobs.
        top_logprobs: alternatives per token, ``0..limits.max_top_logprobs``.
        stream: whether to reply with server-sent events.
        include_usage: ``stream_options.include_usage``: end the stream with a usage chunk.
        clamped: the request parameters that were clamped, as the client named them
            (``("max_completion_tokens",)``).
    """

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    tool_choice: str | dict[str, Any] | None
    temperature: float
    top_p: float
    max_tokens: int
    stop: tuple[str, ...]
    seed: int | None
    n: int
    logprobs: bool
    top_logprobs: int
    stream: bool
    include_usage: bool
    clamped: tuple[str, ...]


@dataclass(frozen=True)
class CompletionRequest:
    """A checked ``/v1/completions`` request.

    Attributes:
        model: the model id asked for.
        prompt: one prompt, as text or as token ids.
        temperature, top_p, stop, seed, n, stream, include_usage, clamped: as in
            :class:`ChatRequest`.
        max_tokens: new tokens at most, default 16 (as OpenAI's), clamped to
            ``limits.max_tokens``.
        logprobs: the legacy parameter: ``None`` (no logprobs) or the number of alternatives
            per token, ``0..5``.
        echo: always ``False`` (``echo=true`` is refused).
    """

    model: str
    prompt: str | list[int]
    temperature: float
    top_p: float
    max_tokens: int
    stop: tuple[str, ...]
    seed: int | None
    n: int
    logprobs: int | None
    stream: bool
    include_usage: bool
    echo: bool
    clamped: tuple[str, ...]


# --------------------------------------------------------------------------------------------
# Parameters: which are accepted, and reading one with a strict type check
# --------------------------------------------------------------------------------------------

_CHAT_ENDPOINT = "/v1/chat/completions"
_COMPLETION_ENDPOINT = "/v1/completions"
_SAMPLING_PARAMS = ("model", "temperature", "top_p", "max_tokens", "stop", "seed", "n",
                    "logprobs", "stream", "stream_options", "user", "frequency_penalty",
                    "presence_penalty", "logit_bias")
_CHAT_PARAMS = frozenset((*_SAMPLING_PARAMS, "messages", "tools", "tool_choice",
                          "max_completion_tokens", "top_logprobs", "metadata", "store",
                          "parallel_tool_calls", "response_format"))
_COMPLETION_PARAMS = frozenset((*_SAMPLING_PARAMS, "prompt", "echo", "best_of", "suffix"))
# Accepted and ignored: only their type is checked.
_IGNORED_PARAMS: dict[str, tuple[type, str]] = {
    "user": (str, "a string"),
    "metadata": (dict, "an object"),
    "store": (bool, "a boolean"),
    "parallel_tool_calls": (bool, "a boolean"),
}
_DEPRECATED_PARAMS = {
    "functions": 'send them as \'tools\' instead, each {"type": "function", "function": {...}}',
    "function_call": "use 'tool_choice' instead (\"none\", \"auto\", \"required\" or "
                     '{"type": "function", "function": {"name": ...}})',
}
_STREAM_OPTIONS = ("include_usage", "include_obfuscation")
_ROLES = ("system", "user", "assistant", "tool")
_ROLE_ALIASES = {"developer": "system"}
_TOOL_CHOICES = ("none", "auto", "required")
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_MAX_STOP = 4
_MAX_LEGACY_LOGPROBS = 5
_DEFAULT_COMPLETION_MAX_TOKENS = 16
_INT64 = (-(2**63), 2**63 - 1)
_NO_CHANGE = ("turnrl trains on the tokens it samples with the policy's own logprobs, so "
              "sampling must not be altered")


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for kind, name in ((int, "integer"), (float, "number"), (str, "string"), (list, "array"),
                       (dict, "object")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _shown(value: object) -> str:
    """A given value as an error message shows it: its JSON text (cut short) and JSON type."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} (a JSON {_json_type(value)})"


def _invalid_type(param: str, expected: str, value: object) -> OpenAIError:
    return OpenAIError(f"Invalid type for '{param}': expected {expected}, got {_shown(value)}.",
                       param=param, code="invalid_type")


def _invalid_value(param: str, message: str) -> OpenAIError:
    return OpenAIError(f"Invalid value for '{param}': {message}", param=param,
                       code="invalid_value")


def _missing(param: str, what: str) -> OpenAIError:
    return OpenAIError(f"Missing required parameter '{param}': {what}.", param=param,
                       code="missing_required_parameter")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _number(params: dict[str, Any], key: str, *, default: float, low: float, high: float,
            low_open: bool = False) -> float:
    """``params[key]`` as a float in ``[low, high]`` (``(low, high]`` if ``low_open``)."""
    value = params.get(key)
    allowed = (f"a number above {low:g} and at most {high:g}" if low_open
               else f"a number from {low:g} to {high:g}")
    if value is None:
        return default
    if not _is_number(value):
        raise _invalid_type(key, allowed, value)
    if value > high or value < low or (low_open and value == low):
        raise _invalid_value(key, f"{value!r} is out of range; it must be {allowed}.")
    return float(value)


def _integer(params: dict[str, Any], key: str, *, low: int, high: int,
             allowed: str = "") -> int | None:
    """``params[key]`` as an int in ``[low, high]``, or ``None`` if not given.

    ``allowed`` is how the error message words the range (``an integer from low to high``).
    """
    value = params.get(key)
    allowed = allowed or f"an integer from {low} to {high}"
    if value is None:
        return None
    if not _is_int(value):
        raise _invalid_type(key, allowed, value)
    if not low <= value <= high:
        raise _invalid_value(key, f"{value} is out of range; it must be {allowed}.")
    return int(value)


def _boolean(params: dict[str, Any], key: str) -> bool:
    value = params.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _invalid_type(key, "a boolean (true or false)", value)
    return value


def _request_object(body: object, accepted: frozenset[str], endpoint: str) -> dict[str, Any]:
    """The body as a dict whose non-null parameters are all ``accepted``."""
    if not isinstance(body, dict):
        raise OpenAIError(f"The request body must be a JSON object, got {_shown(body)}.")
    for key, value in body.items():
        if key in accepted or value is None:
            continue
        if key in _DEPRECATED_PARAMS:
            raise OpenAIError(
                f"Unsupported parameter '{key}': the deprecated function-calling API is not "
                f"supported; {_DEPRECATED_PARAMS[key]}.", param=key,
                code="unsupported_parameter")
        raise OpenAIError(
            f"Unsupported parameter '{key}': turnrl's {endpoint} accepts "
            f"{', '.join(sorted(accepted))}. Remove '{key}' from the request (with the openai "
            "SDK, also from extra_body).", param=str(key), code="unsupported_parameter")
    for key, (kind, expected) in _IGNORED_PARAMS.items():
        value = body.get(key)
        if value is not None and not isinstance(value, kind):
            raise _invalid_type(key, expected, value)
    return body


def _check_unchanged_sampling(params: dict[str, Any]) -> None:
    """Penalties and logit bias are accepted only when they change nothing."""
    for key in ("frequency_penalty", "presence_penalty"):
        value = params.get(key)
        if value is None:
            continue
        if not _is_number(value):
            raise _invalid_type(key, "a number (only 0 is supported)", value)
        if value != 0:
            raise OpenAIError(
                f"Unsupported value for '{key}': {value!r}; penalties are not supported "
                f"({_NO_CHANGE}). Leave '{key}' out or set it to 0.",
                param=key, code="unsupported_value")
    bias = params.get("logit_bias")
    if bias is not None:
        if not isinstance(bias, dict):
            raise _invalid_type("logit_bias", "an object (only {} is supported)", bias)
        if bias:
            raise OpenAIError(
                f"Unsupported value for 'logit_bias': {_shown(bias)}; logit bias is not "
                f"supported ({_NO_CHANGE}). Leave 'logit_bias' out.",
                param="logit_bias", code="unsupported_value")


def _check_response_format(params: dict[str, Any]) -> None:
    value = params.get("response_format")
    if value is None or value == {"type": "text"}:
        return
    if not isinstance(value, dict):
        raise _invalid_type("response_format", 'an object ({"type": "text"})', value)
    raise OpenAIError(
        f"Unsupported value for 'response_format': {_shown(value)}; only {{\"type\": \"text\"}} "
        f"is supported, structured outputs (json_object, json_schema) are not ({_NO_CHANGE}). "
        "Ask for the format in the prompt and leave 'response_format' out.",
        param="response_format", code="unsupported_value")


def _model(params: dict[str, Any]) -> str:
    value = params.get("model")
    if value is None:
        raise _missing("model", "name the model to sample from (GET /v1/models lists them)")
    if not isinstance(value, str) or not value:
        raise _invalid_type("model", "a non-empty string (a model id from GET /v1/models)",
                            value)
    return value


def _stop(params: dict[str, Any]) -> tuple[str, ...]:
    value = params.get("stop")
    expected = f"a non-empty string or an array of up to {_MAX_STOP} non-empty strings"
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise _invalid_type("stop", expected, value)
    if len(value) > _MAX_STOP:
        raise _invalid_value("stop", f"{len(value)} stop strings given; it must be {expected}.")
    for item in value:
        if not isinstance(item, str) or not item:
            raise _invalid_value("stop", f"{_shown(item)} is not a stop string; it must be "
                                         f"{expected}.")
    return tuple(value)


def _stream(params: dict[str, Any]) -> tuple[bool, bool]:
    """``(stream, stream_options.include_usage)``."""
    stream = _boolean(params, "stream")
    options = params.get("stream_options")
    if options is None:
        return stream, False
    if not isinstance(options, dict):
        raise _invalid_type("stream_options", 'an object ({"include_usage": true})', options)
    if not stream:
        raise _invalid_value("stream_options", "it is only allowed when 'stream' is true; "
                                               "set \"stream\": true or leave it out.")
    for key in options:
        if key not in _STREAM_OPTIONS:
            raise OpenAIError(
                f"Unsupported parameter 'stream_options.{key}': stream_options accepts "
                f"{', '.join(_STREAM_OPTIONS)}.", param=f"stream_options.{key}",
                code="unsupported_parameter")
    for key in _STREAM_OPTIONS:
        if options.get(key) is not None and not isinstance(options[key], bool):
            raise _invalid_type(f"stream_options.{key}", "a boolean", options[key])
    return stream, bool(options.get("include_usage"))


class _Sampling(NamedTuple):
    temperature: float
    top_p: float
    max_tokens: int
    stop: tuple[str, ...]
    seed: int | None
    n: int
    clamped: tuple[str, ...]


def _max_tokens(params: dict[str, Any], keys: tuple[str, ...], default: int,
                limits: Limits) -> tuple[int, tuple[str, ...]]:
    """The first of ``keys`` given (else ``default``), clamped to the run's cap.

    Returns ``(max_tokens, clamped)`` where ``clamped`` names the key if it was clamped.
    """
    allowed = f"an integer >= 1 (more is clamped to this run's cap, {limits.max_tokens})"
    given = [(key, _integer(params, key, low=1, high=_INT64[1], allowed=allowed))
             for key in keys]
    values = [(key, value) for key, value in given if value is not None]
    if len({value for _, value in values}) > 1:
        both = " and ".join(f"'{key}' = {value}" for key, value in values)
        raise _invalid_value(values[0][0], f"{both} disagree; give only one of them.")
    if not values:
        return min(default, limits.max_tokens), ()
    key, value = values[0]
    if value > limits.max_tokens:
        return limits.max_tokens, (key,)
    return value, ()


def _sampling(params: dict[str, Any], limits: Limits, max_token_keys: tuple[str, ...],
              default_max_tokens: int) -> _Sampling:
    _check_unchanged_sampling(params)
    max_tokens, clamped = _max_tokens(params, max_token_keys, default_max_tokens, limits)
    n = _integer(params, "n", low=1, high=limits.max_n,
                 allowed=f"an integer from 1 to {limits.max_n} (this run's limit)")
    return _Sampling(
        temperature=_number(params, "temperature", default=1.0, low=0.0, high=2.0),
        top_p=_number(params, "top_p", default=1.0, low=0.0, high=1.0, low_open=True),
        max_tokens=max_tokens,
        stop=_stop(params),
        seed=_integer(params, "seed", low=_INT64[0], high=_INT64[1],
                      allowed="a 64-bit signed integer"),
        n=1 if n is None else n,
        clamped=clamped,
    )


# --------------------------------------------------------------------------------------------
# Messages and tools
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------------


def parse_chat_request(body: object, limits: Limits) -> ChatRequest:
    """Check a ``/v1/chat/completions`` request body and return it typed and normalised.

    Args:
        body: the decoded JSON body.
        limits: the run's limits (``max_tokens`` clamps, ``max_n`` and ``max_top_logprobs``
            refuse).

    Raises:
        OpenAIError: a 400 naming the parameter, what was given and what is allowed.
    """
    params = _request_object(body, _CHAT_PARAMS, _CHAT_ENDPOINT)
    _check_response_format(params)
    model = _model(params)
    messages = _messages(params)
    tools = _tools(params)
    tool_choice = _tool_choice(params, tools)
    sampling = _sampling(params, limits, ("max_completion_tokens", "max_tokens"),
                         limits.max_tokens)
    logprobs = _boolean(params, "logprobs")
    top_logprobs = _integer(params, "top_logprobs", low=0, high=limits.max_top_logprobs,
                            allowed=f"an integer from 0 to {limits.max_top_logprobs} "
                                    "(this run's limit)")
    if top_logprobs is not None and not logprobs:
        raise _invalid_value("top_logprobs", "it is only allowed when 'logprobs' is true; "
                                             "set \"logprobs\": true or leave it out.")
    stream, include_usage = _stream(params)
    return ChatRequest(
        model=model, messages=messages, tools=tools, tool_choice=tool_choice,
        temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
        stop=sampling.stop, seed=sampling.seed, n=sampling.n, logprobs=logprobs,
        top_logprobs=top_logprobs or 0, stream=stream, include_usage=include_usage,
        clamped=sampling.clamped,
    )


def _token_ids(value: list[Any], param: str) -> list[int]:
    if not value:
        raise _invalid_value(param, "it is empty; send at least one token id.")
    for token in value:
        if not _is_int(token) or token < 0:
            raise _invalid_value(param, f"{_shown(token)} is not a token id; token ids are "
                                        "integers >= 0.")
    return list(value)


def _prompt(params: dict[str, Any]) -> str | list[int]:
    """One prompt: a non-empty string or a non-empty list of token ids (also each in a list)."""
    prompt = params.get("prompt")
    expected = "a string or an array of token ids"
    if prompt is None:
        raise _missing("prompt", f"send the prompt as {expected}")
    if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
        if len(prompt) > 1:
            raise _invalid_value("prompt", f"{len(prompt)} prompts given; only one prompt per "
                                           "request is supported: send one request per prompt "
                                           "(use 'n' for several samples of one prompt).")
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise _invalid_value("prompt", "it is empty; the model needs a prompt to continue.")
        return prompt
    if not isinstance(prompt, list):
        raise _invalid_type("prompt", expected, prompt)
    return _token_ids(prompt, "prompt")


def _check_completion_extras(params: dict[str, Any], n: int) -> None:
    """``echo``, ``best_of`` and ``suffix`` are accepted only when they change nothing."""
    if _boolean(params, "echo"):
        raise OpenAIError(
            "Unsupported value for 'echo': true; echoing the prompt (and its logprobs) is not "
            "supported. Leave 'echo' out or set it to false.", param="echo",
            code="unsupported_value")
    best_of = params.get("best_of")
    if best_of is not None:
        if not _is_int(best_of):
            raise _invalid_type("best_of", f"an integer (only {n}, the value of 'n')", best_of)
        if best_of != n:
            raise OpenAIError(
                f"Unsupported value for 'best_of': {best_of}; only best_of = n ({n}) is "
                "supported, as every sample is returned. Leave 'best_of' out.",
                param="best_of", code="unsupported_value")
    suffix = params.get("suffix")
    if suffix is not None:
        if not isinstance(suffix, str):
            raise _invalid_type("suffix", 'a string (only "")', suffix)
        if suffix:
            raise OpenAIError("Unsupported value for 'suffix': inserting text before a suffix "
                              "is not supported. Leave 'suffix' out.", param="suffix",
                              code="unsupported_value")


def parse_completion_request(body: object, limits: Limits) -> CompletionRequest:
    """Check a ``/v1/completions`` request body and return it typed.

    Args:
        body: the decoded JSON body.
        limits: the run's limits; the legacy ``logprobs`` is capped at
            ``min(5, limits.max_top_logprobs)``.

    Raises:
        OpenAIError: a 400 naming the parameter, what was given and what is allowed.
    """
    params = _request_object(body, _COMPLETION_PARAMS, _COMPLETION_ENDPOINT)
    model = _model(params)
    prompt = _prompt(params)
    sampling = _sampling(params, limits, ("max_tokens",), _DEFAULT_COMPLETION_MAX_TOKENS)
    _check_completion_extras(params, sampling.n)
    most = min(_MAX_LEGACY_LOGPROBS, limits.max_top_logprobs)
    logprobs = _integer(params, "logprobs", low=0, high=most,
                        allowed=f"an integer from 0 to {most} (alternatives per token), or "
                                "null for no logprobs")
    stream, include_usage = _stream(params)
    return CompletionRequest(
        model=model, prompt=prompt, temperature=sampling.temperature, top_p=sampling.top_p,
        max_tokens=sampling.max_tokens, stop=sampling.stop, seed=sampling.seed, n=sampling.n,
        logprobs=logprobs, stream=stream, include_usage=include_usage, echo=False,
        clamped=sampling.clamped,
    )


# --------------------------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------------------------

TokenLogprob = tuple[str, float, list[tuple[str, float]]]

_CHAT_FINISH = ("stop", "length", "tool_calls")
_COMPLETION_FINISH = ("stop", "length")
_LOWEST_LOGPROB = -9999.0  # what -inf is sent as: JSON has no infinity (vLLM does the same)


@dataclass(frozen=True)
class Choice:
    """One sampled reply, as the server hands it to the reply builders.

    Attributes:
        index: its place among the request's ``n`` samples.
        text: the text shown to the client (tool-call markup already removed).
        finish_reason: ``"stop"``, ``"length"`` or (chat only) ``"tool_calls"``.
        tool_calls: chat only: ``[{"id": "call_...", "type": "function", "function":
            {"name": str, "arguments": str}}]``, ``arguments`` being JSON text.
        logprobs: per sampled token ``(token text, logprob, [(alternative, logprob), ...])``.
            When the token texts join to ``text`` a stream sends one chunk per token;
            otherwise (markup removed, partial UTF-8) the text and all logprobs go in one.
    """

    index: int
    text: str
    finish_reason: str
    tool_calls: list[dict[str, Any]] | None = None
    logprobs: list[TokenLogprob] | None = None


@dataclass(frozen=True)
class Usage:
    """Token counts of one request (all its choices): ``total_tokens`` = prompt + completion."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def _logprob(value: float) -> float:
    if math.isnan(value) or value == math.inf:
        raise ValueError(f"a logprob must be a number <= 0 or -inf, got {value!r}")
    return max(float(value), _LOWEST_LOGPROB)


def _check_choice(choice: Choice, finish_reasons: tuple[str, ...]) -> None:
    if choice.finish_reason not in finish_reasons:
        raise ValueError(f"Choice.finish_reason must be one of {', '.join(finish_reasons)} "
                         f"here, got {choice.finish_reason!r}")
    if choice.tool_calls and "tool_calls" not in finish_reasons:
        raise ValueError("a text completion cannot carry tool calls: Choice.tool_calls must be "
                         "None for completion() and completion_chunks()")


def _tool_call_out(call: object, k: int) -> dict[str, Any]:
    """One of a choice's tool calls as the API sends it, checked (``arguments`` is JSON text)."""
    function = call.get("function") if isinstance(call, dict) else None
    if isinstance(call, dict) and isinstance(function, dict):
        fields = (call.get("id"), function.get("name"), function.get("arguments"))
        if all(isinstance(field, str) for field in fields):
            return {"id": fields[0], "type": "function",
                    "function": {"name": fields[1], "arguments": fields[2]}}
    raise ValueError(
        f"Choice.tool_calls[{k}] must be {{'id': str, 'type': 'function', 'function': "
        "{'name': str, 'arguments': str}} with the arguments as JSON text "
        f"(json.dumps(arguments)), got {call!r}")


def _tool_calls_out(choice: Choice) -> list[dict[str, Any]]:
    return [_tool_call_out(call, k) for k, call in enumerate(choice.tool_calls or [])]


def _token_entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": _logprob(logprob), "bytes": list(token.encode("utf-8"))}


def _chat_logprobs(tokens: list[TokenLogprob]) -> dict[str, Any]:
    """``{"content": [{"token", "logprob", "bytes", "top_logprobs"}], "refusal": None}``."""
    content = [{**_token_entry(token, logprob),
                "top_logprobs": [_token_entry(alt, alt_logprob) for alt, alt_logprob in top]}
               for token, logprob, top in tokens]
    return {"content": content, "refusal": None}


def _legacy_logprobs(tokens: list[TokenLogprob], offset: int = 0) -> dict[str, Any]:
    """The legacy completions format; ``text_offset`` counts characters of the completion."""
    offsets = []
    for token, _, _ in tokens:
        offsets.append(offset)
        offset += len(token)
    return {
        "tokens": [token for token, _, _ in tokens],
        "token_logprobs": [_logprob(logprob) for _, logprob, _ in tokens],
        "top_logprobs": [{alt: _logprob(alt_logprob) for alt, alt_logprob in top}
                         for _, _, top in tokens],
        "text_offset": offsets,
    }


def _header(id: str, object: str, model: str, created: int) -> dict[str, Any]:
    return {"id": id, "object": object, "created": created, "model": model}


def chat_completion(*, id: str, model: str, created: int, choices: list[Choice],
                    usage: Usage) -> dict[str, Any]:
    """The JSON of a whole (not streamed) ``chat.completion``.

    Each choice's ``message`` is ``{"role": "assistant", "content", "refusal": None}`` plus
    ``"tool_calls"`` when it has any; ``content`` is ``None`` when there are tool calls and no
    text. ``logprobs`` is ``{"content": [...], "refusal": None}`` or ``None``.

    Raises:
        ValueError: a choice that the API cannot carry (an unknown finish reason, tool calls
            whose ``arguments`` are not JSON text, a NaN logprob).
    """
    out = []
    for choice in choices:
        _check_choice(choice, _CHAT_FINISH)
        calls = _tool_calls_out(choice)
        message: dict[str, Any] = {"role": "assistant",
                                   "content": None if calls and not choice.text else choice.text,
                                   "refusal": None}
        if calls:
            message["tool_calls"] = calls
        out.append({
            "index": choice.index,
            "message": message,
            "logprobs": None if choice.logprobs is None else _chat_logprobs(choice.logprobs),
            "finish_reason": choice.finish_reason,
        })
    return {**_header(id, "chat.completion", model, created), "choices": out,
            "usage": _usage(usage), "system_fingerprint": None}


def _event(payload: dict[str, Any]) -> str:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return f"data: {text}\n\n"


def _pieces(choice: Choice) -> Iterator[tuple[str, list[TokenLogprob] | None]]:
    """The text of a choice as streamed: ``(text piece, its tokens' logprobs)``.

    One piece per token when the tokens' texts join to the text, else the whole text at once.
    """
    tokens = choice.logprobs
    if tokens is not None and "".join(token for token, _, _ in tokens) == choice.text:
        for token in tokens:
            yield token[0], [token]
    elif tokens is not None or choice.text:
        yield choice.text, tokens


def _stream_end(events: list[str], header: dict[str, Any], usage: Usage | None) -> list[str]:
    if usage is not None:
        events.append(_event({**header, "choices": [], "usage": _usage(usage)}))
    events.append("data: [DONE]\n\n")
    return events


def chat_chunks(*, id: str, model: str, created: int, choices: list[Choice],
                usage: Usage | None) -> list[str]:
    """The same reply as :func:`chat_completion`, as the server-sent events of a stream.

    Each event is ``"data: {json}\\n\\n"``, a ``chat.completion.chunk``. Per choice, in order:
    a first chunk with ``delta = {"role": "assistant", "content": ""}``; the text (one chunk
    per token with its logprobs when they are given and join to the text, else one chunk); one
    chunk per tool call (``delta.tool_calls = [{"index", "id", "type", "function"}]``); a last
    chunk with an empty delta and the ``finish_reason``. With ``usage`` (the client asked for
    ``stream_options.include_usage``), every chunk has ``"usage": None`` and a final chunk
    has ``"choices": []`` and the usage. The stream ends with ``"data: [DONE]\\n\\n"``.

    Raises:
        ValueError: as :func:`chat_completion`.
    """
    header = _stream_header(id, "chat.completion.chunk", model, created, usage)
    events = []

    def chunk(index: int, delta: dict[str, Any], logprobs: dict[str, Any] | None = None,
              finish_reason: str | None = None) -> None:
        events.append(_choice_event(header, index=index, delta=delta, logprobs=logprobs,
                                    finish_reason=finish_reason))

    for choice in choices:
        _check_choice(choice, _CHAT_FINISH)
        chunk(choice.index, {"role": "assistant", "content": ""})
        for text, tokens in _pieces(choice):
            chunk(choice.index, {"content": text},
                  None if tokens is None else _chat_logprobs(tokens))
        for k, call in enumerate(_tool_calls_out(choice)):
            chunk(choice.index, {"tool_calls": [{"index": k, **call}]})
        chunk(choice.index, {}, finish_reason=choice.finish_reason)
    return _stream_end(events, header, usage)


def completion(*, id: str, model: str, created: int, choices: list[Choice],
               usage: Usage) -> dict[str, Any]:
    """The JSON of a whole (not streamed) ``text_completion``.

    ``logprobs`` is the legacy ``{"tokens", "token_logprobs", "top_logprobs", "text_offset"}``
    (``text_offset`` counts characters from the start of the completion) or ``None``.

    Raises:
        ValueError: a choice with tool calls, finish reason ``"tool_calls"`` or a NaN logprob.
    """
    out = []
    for choice in choices:
        _check_choice(choice, _COMPLETION_FINISH)
        out.append({
            "index": choice.index,
            "text": choice.text,
            "logprobs": None if choice.logprobs is None else _legacy_logprobs(choice.logprobs),
            "finish_reason": choice.finish_reason,
        })
    return {**_header(id, "text_completion", model, created), "choices": out,
            "usage": _usage(usage), "system_fingerprint": None}


def completion_chunks(*, id: str, model: str, created: int, choices: list[Choice],
                      usage: Usage | None) -> list[str]:
    """The same reply as :func:`completion`, as the server-sent events of a stream.

    Each event is a ``text_completion`` whose one choice carries a piece of ``text`` (one per
    token with its legacy logprobs when they are given and join to the text, else the whole
    text) and ``finish_reason`` ``None``; a last event per choice has ``text = ""`` and the
    finish reason. ``usage`` and ``[DONE]`` as in :func:`chat_chunks`.

    Raises:
        ValueError: as :func:`completion`.
    """
    header = _stream_header(id, "text_completion", model, created, usage)
    events = []

    def chunk(index: int, text: str, logprobs: dict[str, Any] | None,
              finish_reason: str | None) -> None:
        events.append(_choice_event(header, index=index, text=text, logprobs=logprobs,
                                    finish_reason=finish_reason))

    for choice in choices:
        _check_choice(choice, _COMPLETION_FINISH)
        offset = 0
        for text, tokens in _pieces(choice):
            chunk(choice.index, text,
                  None if tokens is None else _legacy_logprobs(tokens, offset), None)
            offset += len(text)
        chunk(choice.index, "", None, choice.finish_reason)
    return _stream_end(events, header, usage)


def _stream_header(id: str, object: str, model: str, created: int,
                   usage: Usage | None) -> dict[str, Any]:
    """The fields every event of a stream repeats (``"usage": None`` until the last one
    when the client asked for usage)."""
    header = _header(id, object, model, created)
    if usage is not None:
        header["usage"] = None
    return header


def _choice_event(header: dict[str, Any], **choice: Any) -> str:
    """One server-sent event carrying one choice's piece."""
    return _event({**header, "choices": [choice]})


def models_list(model_ids: list[str], created: int) -> dict[str, Any]:
    """The JSON of ``GET /v1/models``: each id as a model ``owned_by`` turnrl."""
    return {
        "object": "list",
        "data": [{"id": model_id, "object": "model", "created": created, "owned_by": "turnrl"}
                 for model_id in model_ids],
    }
