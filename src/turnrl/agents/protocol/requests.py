"""The two request parsers: :func:`parse_chat_request` and :func:`parse_completion_request`
(a body in, a frozen request out, or an :class:`~turnrl.agents.protocol.values.OpenAIError`).
"""

from __future__ import annotations

from typing import Any

from turnrl.agents.protocol.messages import _messages, _tool_choice, _tools
from turnrl.agents.protocol.params import (
    _CHAT_ENDPOINT,
    _CHAT_PARAMS,
    _COMPLETION_ENDPOINT,
    _COMPLETION_PARAMS,
    _DEFAULT_COMPLETION_MAX_TOKENS,
    _MAX_LEGACY_LOGPROBS,
    _boolean,
    _check_response_format,
    _integer,
    _invalid_type,
    _invalid_value,
    _is_int,
    _missing,
    _model,
    _request_object,
    _sampling,
    _shown,
    _stream,
)
from turnrl.agents.protocol.values import ChatRequest, CompletionRequest, Limits, OpenAIError


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
