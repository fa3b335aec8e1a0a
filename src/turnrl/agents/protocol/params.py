"""The request parameters: which are accepted, ignored or refused, and reading one with a
strict type check (numbers, integers, booleans, stop strings, streaming, ``max_tokens``, the
sampling parameters) into an :class:`~turnrl.agents.protocol.values.OpenAIError` naming it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NamedTuple

from turnrl.agents.protocol.values import Limits, OpenAIError

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
