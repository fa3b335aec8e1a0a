"""The chat-completions and completions request bodies as pydantic models: one declaration
per request of its parameters, their wire types (what ``GET /openapi.json`` publishes) and
their checks.

Each field carries the function that checks it (:func:`checked`): pydantic calls it with the
value as sent (``None`` when the parameter is absent or null, which counts as not given) and
keeps what it returns: the checked value, in the form that
:class:`~turnrl.agents.protocol.values.ChatRequest` holds (messages in normal form, defaults
filled in). A check that fails raises an
:class:`~turnrl.agents.protocol.values.OpenAIError` in OpenAI's own words, naming the
parameter (``"Invalid value for 'temperature': 2.5 is out of range; ..."``); pydantic's
generic messages never reach a client. A check may read the fields declared before it
(``tool_choice`` reads ``tools``) and the run's :class:`~turnrl.agents.protocol.values.Limits`
(the validation context). A parameter the model does not declare is refused, naming the
ones it does. The field annotations are the wire types, so a field's value after validation
can be the checked form (``messages``: normal-form dicts) rather than the annotated model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    WrapValidator,
    model_validator,
)

from turnrl.agents.protocol.messages import _messages, _tool_choice, _tools
from turnrl.agents.protocol.params import (
    _DEFAULT_COMPLETION_MAX_TOKENS,
    _INT64,
    _MAX_LEGACY_LOGPROBS,
    _STREAM_OPTIONS,
    _boolean,
    _check_response_format,
    _check_unchanged_sampling,
    _integer,
    _invalid_type,
    _invalid_value,
    _is_int,
    _missing,
    _model,
    _number,
    _request_object,
    _shown,
    _stop,
)
from turnrl.agents.protocol.values import Limits, OpenAIError

__all__ = ["ChatCompletionBody", "CompletionBody", "checked"]

Check = Callable[[Any, ValidationInfo], Any]


def checked(check: Check) -> WrapValidator:
    """A field validated by ``check(value, info)`` alone (not by pydantic's own check of the
    annotated type, which only describes the wire format in the schema): ``value`` as sent or
    ``None``; ``info.field_name`` the parameter, ``info.data`` the fields checked before it,
    ``info.context["limits"]`` the run's :class:`Limits`."""
    return WrapValidator(lambda value, _handler, info: check(value, info))


def _params(info: ValidationInfo, value: Any) -> dict[str, Any]:
    """``{parameter: value}``: what the per-parameter readers of ``params`` take."""
    return {str(info.field_name): value}


def _limits(info: ValidationInfo) -> Limits:
    return info.context["limits"]  # type: ignore[index]


def _typed(kind: type, expected: str) -> WrapValidator:
    """A parameter accepted and ignored: only its type is checked."""
    def check(value: Any, info: ValidationInfo) -> Any:
        if value is not None and not isinstance(value, kind):
            raise _invalid_type(str(info.field_name), expected, value)
        return value
    return checked(check)


def _max_tokens_given(value: Any, info: ValidationInfo) -> int | None:
    """A cap on new tokens as given (more than the run's cap is clamped later, not refused);
    a second spelling of it must agree with the first (``max_completion_tokens``)."""
    name = str(info.field_name)
    allowed = (f"an integer >= 1 (more is clamped to this run's cap, "
               f"{_limits(info).max_tokens})")
    given = _integer(_params(info, value), name, low=1, high=_INT64[1], allowed=allowed)
    first = info.data.get("max_completion_tokens")
    if given is not None and first is not None and first != given:
        raise _invalid_value("max_completion_tokens", f"'max_completion_tokens' = {first} and "
                                                      f"'{name}' = {given} disagree; give only "
                                                      "one of them.")
    return given


def _unchanged(value: Any, info: ValidationInfo) -> Any:
    _check_unchanged_sampling(_params(info, value))
    return value


def _n(value: Any, info: ValidationInfo) -> int:
    most = _limits(info).max_n
    n = _integer(_params(info, value), "n", low=1, high=most,
                 allowed=f"an integer from 1 to {most} (this run's limit)")
    return 1 if n is None else n


def _sampling_number(default: float, low: float, high: float, *,
                     low_open: bool = False) -> WrapValidator:
    return checked(lambda value, info: _number(_params(info, value), str(info.field_name),
                                               default=default, low=low, high=high,
                                               low_open=low_open))


def _stream_options(value: Any, info: ValidationInfo) -> bool:
    """``stream_options.include_usage`` (only with ``stream: true``)."""
    if value is None:
        return False
    if not isinstance(value, dict):
        raise _invalid_type("stream_options", 'an object ({"include_usage": true})', value)
    if not info.data.get("stream"):
        raise _invalid_value("stream_options", "it is only allowed when 'stream' is true; "
                                               "set \"stream\": true or leave it out.")
    for key in value:
        if key not in _STREAM_OPTIONS:
            raise OpenAIError(
                f"Unsupported parameter 'stream_options.{key}': stream_options accepts "
                f"{', '.join(_STREAM_OPTIONS)}.", param=f"stream_options.{key}",
                code="unsupported_parameter")
    for key in _STREAM_OPTIONS:
        if value.get(key) is not None and not isinstance(value[key], bool):
            raise _invalid_type(f"stream_options.{key}", "a boolean", value[key])
    return bool(value.get("include_usage"))


class FunctionSpec(BaseModel):
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ChatTool(BaseModel):
    type: Literal["function"]
    function: FunctionSpec


class ToolCallFunction(BaseModel):
    name: str
    arguments: str | dict[str, Any]


class ToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None


def _top_logprobs(value: Any, info: ValidationInfo) -> int:
    most = _limits(info).max_top_logprobs
    top = _integer(_params(info, value), "top_logprobs", low=0, high=most,
                   allowed=f"an integer from 0 to {most} (this run's limit)")
    if top is not None and not info.data.get("logprobs"):
        raise _invalid_value("top_logprobs", "it is only allowed when 'logprobs' is true; "
                                             "set \"logprobs\": true or leave it out.")
    return top or 0


def _token_ids(value: list[Any], param: str) -> list[int]:
    if not value:
        raise _invalid_value(param, "it is empty; send at least one token id.")
    for token in value:
        if not _is_int(token) or token < 0:
            raise _invalid_value(param, f"{_shown(token)} is not a token id; token ids are "
                                        "integers >= 0.")
    return list(value)


def _prompt(prompt: Any, _info: ValidationInfo) -> str | list[int]:
    """One prompt: a non-empty string or a non-empty list of token ids (also each in a list)."""
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


def _echo(value: Any, info: ValidationInfo) -> bool:
    """``echo`` is accepted only when it changes nothing (false)."""
    if _boolean(_params(info, value), "echo"):
        raise OpenAIError(
            "Unsupported value for 'echo': true; echoing the prompt (and its logprobs) is not "
            "supported. Leave 'echo' out or set it to false.", param="echo",
            code="unsupported_value")
    return False


def _best_of(best_of: Any, info: ValidationInfo) -> int | None:
    """``best_of`` is accepted only when it changes nothing (equal to ``n``)."""
    n = info.data.get("n", 1)
    if best_of is not None:
        if not _is_int(best_of):
            raise _invalid_type("best_of", f"an integer (only {n}, the value of 'n')", best_of)
        if best_of != n:
            raise OpenAIError(
                f"Unsupported value for 'best_of': {best_of}; only best_of = n ({n}) is "
                "supported, as every sample is returned. Leave 'best_of' out.",
                param="best_of", code="unsupported_value")
    return best_of


def _suffix(suffix: Any, _info: ValidationInfo) -> str | None:
    """``suffix`` is accepted only when it changes nothing (empty)."""
    if suffix is not None:
        if not isinstance(suffix, str):
            raise _invalid_type("suffix", 'a string (only "")', suffix)
        if suffix:
            raise OpenAIError("Unsupported value for 'suffix': inserting text before a suffix "
                              "is not supported. Leave 'suffix' out.", param="suffix",
                              code="unsupported_value")
    return suffix


def _legacy_logprobs(value: Any, info: ValidationInfo) -> int | None:
    """The legacy ``logprobs``: alternatives per token, at most 5 (and the run's limit)."""
    most = min(_MAX_LEGACY_LOGPROBS, _limits(info).max_top_logprobs)
    return _integer(_params(info, value), "logprobs", low=0, high=most,
                    allowed=f"an integer from 0 to {most} (alternatives per token), or "
                            "null for no logprobs")


class _Body(BaseModel):
    """A request body; ``ENDPOINT`` names its route in the error for an unknown parameter."""

    model_config = ConfigDict(extra="allow")  # refused by _known, in OpenAI's words
    ENDPOINT: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _known(cls, body: Any) -> dict[str, Any]:
        """Refuse a body that is not an object or names a parameter not declared; every
        declared one is then present (``None`` when absent), so each field's check runs."""
        params = _request_object(body, frozenset(cls.model_fields), cls.ENDPOINT)
        return {name: params.get(name) for name in cls.model_fields}


_Bool = Annotated[bool | None, checked(lambda v, info: _boolean(_params(info, v),
                                                                  str(info.field_name)))]
_Penalty = Annotated[float | None, checked(_unchanged)]


class _Sampling(_Body):
    """The parameters both requests share."""

    model: Annotated[str, checked(lambda v, info: _model(_params(info, v)))]
    frequency_penalty: _Penalty = Field(None, description="only 0 (sampling is not altered)")
    presence_penalty: _Penalty = Field(None, description="only 0 (sampling is not altered)")
    logit_bias: Annotated[dict[str, float] | None, checked(_unchanged)] = Field(
        None, description="only {} (sampling is not altered)")
    temperature: Annotated[float | None, Field(ge=0, le=2), _sampling_number(1.0, 0.0, 2.0)] \
        = None
    top_p: Annotated[float | None, Field(gt=0, le=1),
                     _sampling_number(1.0, 0.0, 1.0, low_open=True)] = None
    stop: Annotated[str | list[Annotated[str, Field(min_length=1)]] | None,
                    checked(lambda v, info: _stop(_params(info, v)))] = Field(
        None, description="a stop string or up to 4")
    seed: Annotated[int | None, checked(lambda v, info: _integer(
        _params(info, v), "seed", low=_INT64[0], high=_INT64[1],
        allowed="a 64-bit signed integer"))] = None
    n: Annotated[int | None, Field(ge=1), checked(_n)] = None
    stream: _Bool = None
    stream_options: Annotated[dict[str, bool] | None, checked(_stream_options)] = None
    user: Annotated[str | None, _typed(str, "a string")] = None


class ChatCompletionBody(_Sampling):
    """A ``POST /v1/chat/completions`` body."""

    ENDPOINT: ClassVar[str] = "/v1/chat/completions"
    response_format: Annotated[dict[str, Any] | None, checked(
        lambda v, info: _check_response_format(_params(info, v)))] = Field(
        None, description='only {"type": "text"}')
    messages: Annotated[list[ChatMessage], Field(min_length=1),
                        checked(lambda v, info: _messages(_params(info, v)))]
    tools: Annotated[list[ChatTool] | None,
                     checked(lambda v, info: _tools(_params(info, v)))] = None
    tool_choice: Annotated[Literal["none", "auto", "required"] | dict[str, Any] | None,
                           checked(lambda v, info: _tool_choice(_params(info, v),
                                                                info.data.get("tools")))] = None
    max_completion_tokens: Annotated[int | None, Field(ge=1), checked(_max_tokens_given)] = None
    max_tokens: Annotated[int | None, Field(ge=1), checked(_max_tokens_given)] = None
    logprobs: _Bool = None
    top_logprobs: Annotated[int | None, Field(ge=0, le=20), checked(_top_logprobs)] = None
    metadata: Annotated[dict[str, str] | None, _typed(dict, "an object")] = None
    store: Annotated[bool | None, _typed(bool, "a boolean")] = None
    parallel_tool_calls: Annotated[bool | None, _typed(bool, "a boolean")] = None


class CompletionBody(_Sampling):
    """A ``POST /v1/completions`` body (``prompt``: text or token ids)."""

    ENDPOINT: ClassVar[str] = "/v1/completions"
    prompt: Annotated[str | list[int], checked(_prompt)]
    max_tokens: Annotated[int | None, Field(ge=1), checked(_max_tokens_given)] = None
    echo: Annotated[bool | None, checked(_echo)] = None
    best_of: Annotated[int | None, checked(_best_of)] = None
    suffix: Annotated[str | None, checked(_suffix)] = None
    logprobs: Annotated[int | None, Field(ge=0, le=_MAX_LEGACY_LOGPROBS),
                        checked(_legacy_logprobs)] = None

    DEFAULT_MAX_TOKENS: ClassVar[int] = _DEFAULT_COMPLETION_MAX_TOKENS
