"""The two request parsers: :func:`parse_chat_request` and :func:`parse_completion_request`
(a body in, a frozen request out, or an :class:`~turnrl.agents.protocol.values.OpenAIError`):
the body validated by its pydantic model (:mod:`~turnrl.agents.protocol.bodies`, each
parameter checked in OpenAI's words), then its cap on new tokens clamped to the run's.
"""

from __future__ import annotations

from typing import Any

from turnrl.agents.protocol.bodies import ChatCompletionBody, CompletionBody
from turnrl.agents.protocol.values import ChatRequest, CompletionRequest, Limits


def _clamped(given: list[tuple[str, int | None]], default: int,
             limits: Limits) -> tuple[int, tuple[str, ...]]:
    """``(max_tokens, clamped)``: the first cap given (else ``default``), clamped to the
    run's ``limits.max_tokens``; ``clamped`` names the parameter when it was."""
    for key, value in given:
        if value is not None:
            return (limits.max_tokens, (key,)) if value > limits.max_tokens else (value, ())
    return min(default, limits.max_tokens), ()


def parse_chat_request(body: object, limits: Limits) -> ChatRequest:
    """Check a ``/v1/chat/completions`` request body and return it typed and normalised.

    Args:
        body: the decoded JSON body.
        limits: the run's limits (``max_tokens`` clamps, ``max_n`` and ``max_top_logprobs``
            refuse).

    Raises:
        OpenAIError: a 400 naming the parameter, what was given and what is allowed.
    """
    value: dict[str, Any] = vars(ChatCompletionBody.model_validate(
        body, context={"limits": limits}))
    max_tokens, clamped = _clamped([(key, value[key]) for key in ("max_completion_tokens",
                                                                  "max_tokens")],
                                   limits.max_tokens, limits)
    return ChatRequest(
        model=value["model"], messages=value["messages"], tools=value["tools"],
        tool_choice=value["tool_choice"], temperature=value["temperature"],
        top_p=value["top_p"], max_tokens=max_tokens, stop=value["stop"], seed=value["seed"],
        n=value["n"], logprobs=value["logprobs"], top_logprobs=value["top_logprobs"],
        stream=value["stream"], include_usage=value["stream_options"], clamped=clamped,
    )


def parse_completion_request(body: object, limits: Limits) -> CompletionRequest:
    """Check a ``/v1/completions`` request body and return it typed.

    Args:
        body: the decoded JSON body.
        limits: the run's limits; the legacy ``logprobs`` is capped at
            ``min(5, limits.max_top_logprobs)``.

    Raises:
        OpenAIError: a 400 naming the parameter, what was given and what is allowed.
    """
    value: dict[str, Any] = vars(CompletionBody.model_validate(
        body, context={"limits": limits}))
    max_tokens, clamped = _clamped([("max_tokens", value["max_tokens"])],
                                   CompletionBody.DEFAULT_MAX_TOKENS, limits)
    return CompletionRequest(
        model=value["model"], prompt=value["prompt"], temperature=value["temperature"],
        top_p=value["top_p"], max_tokens=max_tokens, stop=value["stop"], seed=value["seed"],
        n=value["n"], logprobs=value["logprobs"], stream=value["stream"],
        include_usage=value["stream_options"], echo=False, clamped=clamped,
    )
