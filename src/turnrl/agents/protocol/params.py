"""Reading one request parameter with a strict type check (numbers, integers, booleans,
stop strings, the model, sampling that must stay unaltered) into its value or an
:class:`~turnrl.agents.protocol.values.OpenAIError` naming it, in OpenAI's words; and
refusing a parameter a request does not declare. The request models
(:mod:`~turnrl.agents.protocol.bodies`) attach these checks to their fields.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from turnrl.agents.protocol.values import OpenAIError

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
