"""The typed values of the endpoint's wire format: :class:`OpenAIError` (a refused request,
as OpenAI words it), :class:`Limits` (what one run allows) and the checked requests
(:class:`ChatRequest`, :class:`CompletionRequest`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
# pydantic error types that mean "a field or a kind of content this endpoint does not serve"
UNSERVED = ("extra_forbidden", "union_tag_invalid", "literal_error")


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


def validated(model: type[M], body: object, hints: dict[str, str]) -> M:
    """``body`` read into ``model``, or a 400 naming the first problem's field; ``hints``
    adds a sentence for a field (by its dotted path) or for any unserved field or content
    (key ``"unserved"``)."""
    try:
        return model.model_validate(body)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        hint = hints.get(where) or (hints.get("unserved", "") if first["type"] in UNSERVED
                                    else "")
        raise OpenAIError(f"{where}: {first['msg']}{hint}", param=where) from None
