"""The replies, whole or as server-sent events, built from :class:`Choice` and :class:`Usage`:
:func:`chat_completion`, :func:`chat_chunks`, :func:`completion`, :func:`completion_chunks` and
:func:`models_list`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

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
    if usage is not None and "usage" in header:
        events.append(_event({**header, "choices": [], "usage": _usage(usage)}))
    events.append("data: [DONE]\n\n")
    return events


class ChatStream:
    """The server-sent events of a streamed ``chat.completion``, built as its pieces come.

    Each event is ``"data: {json}\\n\\n"``, a ``chat.completion.chunk``. Per choice, in order:
    :meth:`opening` (``delta = {"role": "assistant", "content": ""}``), any number of
    :meth:`text` pieces as they are sampled, then :meth:`closing` with the finished choice
    (the text not sent yet: one chunk per token with its logprobs when they are given and
    join to it, else one chunk; one chunk per tool call, ``delta.tool_calls = [{"index", "id",
    "type", "function"}]``; a last chunk with an empty delta and the ``finish_reason``); at the
    end :meth:`end`. With ``include_usage`` (the client asked for
    ``stream_options.include_usage``) every chunk has ``"usage": None`` and a final chunk has
    ``"choices": []`` and the usage. The stream ends with ``"data: [DONE]\\n\\n"``.
    """

    def __init__(self, *, id: str, model: str, created: int, include_usage: bool) -> None:
        self.header = _stream_header(id, "chat.completion.chunk", model, created, include_usage)

    def _chunk(self, index: int, delta: dict[str, Any], logprobs: dict[str, Any] | None = None,
               finish_reason: str | None = None) -> str:
        return _choice_event(self.header, index=index, delta=delta, logprobs=logprobs,
                             finish_reason=finish_reason)

    def opening(self, index: int) -> list[str]:
        return [self._chunk(index, {"role": "assistant", "content": ""})]

    def text(self, index: int, text: str) -> str:
        return self._chunk(index, {"content": text})

    def closing(self, choice: Choice) -> list[str]:
        """The rest of ``choice`` (``choice.text``: what was not sent yet).

        Raises:
            ValueError: as :func:`chat_completion`.
        """
        _check_choice(choice, _CHAT_FINISH)
        events = [self._chunk(choice.index, {"content": text},
                              None if tokens is None else _chat_logprobs(tokens))
                  for text, tokens in _pieces(choice)]
        events += [self._chunk(choice.index, {"tool_calls": [{"index": k, **call}]})
                   for k, call in enumerate(_tool_calls_out(choice))]
        events.append(self._chunk(choice.index, {}, finish_reason=choice.finish_reason))
        return events

    def end(self, usage: Usage) -> list[str]:
        return _stream_end([], self.header, usage)


def chat_chunks(*, id: str, model: str, created: int, choices: list[Choice],
                usage: Usage | None) -> list[str]:
    """The same reply as :func:`chat_completion`, as the events of a stream sent at once
    (:class:`ChatStream`; ``usage`` None: the client did not ask for it).

    Raises:
        ValueError: as :func:`chat_completion`.
    """
    stream = ChatStream(id=id, model=model, created=created, include_usage=usage is not None)
    events = []
    for choice in choices:
        events += [*stream.opening(choice.index), *stream.closing(choice)]
    return events + _stream_end([], stream.header, usage)


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


class CompletionStream:
    """The server-sent events of a streamed ``text_completion``, built as its pieces come:
    each event's one choice carries a piece of ``text`` and ``finish_reason`` ``None``
    (:meth:`text` as sampled; :meth:`closing`: the rest, one piece per token with its legacy
    logprobs when they are given and join to it, else the whole rest), then a last event per
    choice with ``text = ""`` and the finish reason. ``usage`` and ``[DONE]`` as in
    :class:`ChatStream`."""

    def __init__(self, *, id: str, model: str, created: int, include_usage: bool) -> None:
        self.header = _stream_header(id, "text_completion", model, created, include_usage)
        self.sent: dict[int, int] = {}  # characters sent per choice (text_offset)

    def _chunk(self, index: int, text: str, logprobs: dict[str, Any] | None,
               finish_reason: str | None) -> str:
        return _choice_event(self.header, index=index, text=text, logprobs=logprobs,
                             finish_reason=finish_reason)

    def opening(self, index: int) -> list[str]:
        return []  # a text completion's first event already carries text

    def text(self, index: int, text: str) -> str:
        self.sent[index] = self.sent.get(index, 0) + len(text)
        return self._chunk(index, text, None, None)

    def closing(self, choice: Choice) -> list[str]:
        """The rest of ``choice``.

        Raises:
            ValueError: as :func:`completion`.
        """
        _check_choice(choice, _COMPLETION_FINISH)
        events, offset = [], self.sent.get(choice.index, 0)
        for text, tokens in _pieces(choice):
            events.append(self._chunk(choice.index, text, None if tokens is None
                                      else _legacy_logprobs(tokens, offset), None))
            offset += len(text)
        events.append(self._chunk(choice.index, "", None, choice.finish_reason))
        return events

    def end(self, usage: Usage) -> list[str]:
        return _stream_end([], self.header, usage)


def completion_chunks(*, id: str, model: str, created: int, choices: list[Choice],
                      usage: Usage | None) -> list[str]:
    """The same reply as :func:`completion`, as the events of a stream sent at once
    (:class:`CompletionStream`).

    Raises:
        ValueError: as :func:`completion`.
    """
    stream = CompletionStream(id=id, model=model, created=created,
                              include_usage=usage is not None)
    events = []
    for choice in choices:
        events += stream.closing(choice)
    return events + _stream_end([], stream.header, usage)


def _stream_header(id: str, object: str, model: str, created: int,
                   include_usage: bool) -> dict[str, Any]:
    """The fields every event of a stream repeats (``"usage": None`` until the last one
    when the client asked for usage)."""
    header = _header(id, object, model, created)
    if include_usage:
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
