"""Anthropic's Messages API (``POST /v1/messages``) as the endpoint serves it: the request as
pydantic models, read into the chat normal form every API shares, and the reply, whole or
as server-sent events.

An agent written on the ``anthropic`` SDK points its ``base_url`` at a run's session URL
without ``/v1`` (``http://127.0.0.1:PORT/s/KEY``; the SDK adds ``/v1/messages``) or sends the
session key as its API key (``x-api-key``).

Reading a request (:func:`to_chat_body`): ``system`` becomes a system message; a user
message's ``tool_result`` blocks become ``tool`` messages (in order, before its text); an
assistant message's ``text`` blocks its content and its ``tool_use`` blocks its tool calls
(``input`` as the arguments), so an echoed reply compares equal to the one recorded; tools
``{name, description, input_schema}`` become function tools; ``tool_choice`` ``auto``,
``any``, ``tool`` and ``none`` become ``"auto"``, ``"required"``, the named function and
``"none"``; ``stop_sequences`` the stop strings. Images, documents, ``top_k`` and extended
thinking are refused (a 400 naming them): the model reads text, and its samples are trained
with its own log-probs.

The reply (:func:`message`, :class:`MessagesStream`): a ``text`` block (when there is text,
or nothing else) and a ``tool_use`` block per call; ``stop_reason`` ``end_turn``,
``max_tokens``, ``stop_sequence`` (with ``stop_sequence``) or ``tool_use``; ``usage`` with
``input_tokens`` (not read from the cache), ``cache_read_input_tokens`` and
``output_tokens``. Errors are ``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from turnrl.agents.protocol.values import OpenAIError, validated

__all__ = ["MessagesRequest", "MessagesStream", "error_body", "message", "parse_messages",
           "to_chat_body"]

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                404: "not_found_error", 405: "invalid_request_error", 500: "api_error"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextBlock(_Model):
    type: Literal["text"]
    text: str
    cache_control: dict[str, Any] | None = None  # accepted, ignored
    citations: list[Any] | None = None


class ToolUseBlock(_Model):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]
    cache_control: dict[str, Any] | None = None


class ToolResultBlock(_Model):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock] = ""
    is_error: bool = False
    cache_control: dict[str, Any] | None = None


Block = Annotated[TextBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")]


class MessageParam(_Model):
    role: Literal["user", "assistant"]
    content: str | list[Block]


class Tool(_Model):
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = None
    input_schema: dict[str, Any]
    type: Literal["custom"] | None = None
    cache_control: dict[str, Any] | None = None


class ToolChoice(_Model):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class Thinking(_Model):
    type: Literal["disabled"]


class MessagesRequest(_Model):
    """A ``POST /v1/messages`` body (the fields turnrl serves; others are a 400)."""

    model: str
    max_tokens: int = Field(ge=1)
    messages: list[MessageParam] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, gt=0, le=1)
    metadata: dict[str, Any] | None = None  # accepted, ignored
    service_tier: str | None = None  # accepted, ignored
    thinking: Thinking | None = None  # only "disabled": the model does not think aloud


def parse_messages(body: object) -> MessagesRequest:
    """``body`` read into a :class:`MessagesRequest`, or a 400 naming the first problem."""
    return validated(MessagesRequest, body, {"unserved": (
        " (this endpoint reads text: images, documents and extended thinking are not served; "
        "top_k is refused, as it would change what is sampled)")})


def _text(content: str | list[TextBlock]) -> str:
    return content if isinstance(content, str) else "".join(b.text for b in content)


def _chat_messages(param: MessageParam) -> list[dict[str, Any]]:
    """One Anthropic message as chat messages (a user message's tool results first)."""
    blocks = [TextBlock(type="text", text=param.content)] if isinstance(
        param.content, str) else param.content
    text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    if param.role == "assistant":
        calls = [{"id": b.id, "type": "function",
                  "function": {"name": b.name, "arguments": json.dumps(b.input)}}
                 for b in blocks if isinstance(b, ToolUseBlock)]
        return [{"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}]
    if any(isinstance(b, ToolUseBlock) for b in blocks):
        raise OpenAIError("a user message cannot hold a tool_use block (the assistant calls "
                          "tools)", param="messages")
    results = [{"role": "tool", "tool_call_id": b.tool_use_id, "content": _text(b.content)}
               for b in blocks if isinstance(b, ToolResultBlock)]
    return results + ([{"role": "user", "content": text}] if text or not results else [])


def to_chat_body(request: MessagesRequest) -> dict[str, Any]:
    """The request as a chat-completions body (OpenAI's form, which the server renders)."""
    messages: list[dict[str, Any]] = []
    if request.system is not None:
        messages.append({"role": "system", "content": _text(request.system)})
    for param in request.messages:
        messages += _chat_messages(param)
    body: dict[str, Any] = {"model": request.model, "messages": messages,
                            "max_tokens": request.max_tokens}
    if request.tools:
        body["tools"] = [{"type": "function", "function": {
            "name": t.name, **({"description": t.description} if t.description else {}),
            "parameters": t.input_schema}} for t in request.tools]
    choice = request.tool_choice
    if choice is not None and request.tools:
        if choice.type == "tool" and not choice.name:
            raise OpenAIError("tool_choice: type 'tool' needs the tool's name",
                              param="tool_choice")
        body["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}.get(
            choice.type) or {"type": "function", "function": {"name": choice.name}}
    for key, value in (("temperature", request.temperature), ("top_p", request.top_p),
                       ("stop", request.stop_sequences or None)):
        if value is not None:
            body[key] = value
    return body


def _usage(prompt_tokens: int, cached_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": prompt_tokens - cached_tokens, "output_tokens": output_tokens,
            "cache_read_input_tokens": cached_tokens, "cache_creation_input_tokens": 0}


def _tool_use(call: dict) -> dict[str, Any]:
    """An OpenAI tool call as a ``tool_use`` block."""
    return {"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
            "input": json.loads(call["function"]["arguments"])}


def _blocks(text: str, tool_calls: list[dict] | None) -> list[dict[str, Any]]:
    text_blocks = [{"type": "text", "text": text}] if text or not tool_calls else []
    return text_blocks + [_tool_use(call) for call in tool_calls or []]


def message(*, id: str, model: str, text: str, tool_calls: list[dict] | None,
            finish_reason: str, stop: str | None, prompt_tokens: int, cached_tokens: int,
            output_tokens: int) -> dict[str, Any]:
    """The JSON of a whole ``message`` reply."""
    return {"id": id, "type": "message", "role": "assistant", "model": model,
            "content": _blocks(text, tool_calls),
            "stop_reason": "stop_sequence" if stop else _STOP_REASONS[finish_reason],
            "stop_sequence": stop,
            "usage": _usage(prompt_tokens, cached_tokens, output_tokens)}


def _event(name: str, payload: dict[str, Any]) -> str:
    data = json.dumps({"type": name, **payload}, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {data}\n\n"


class MessagesStream:
    """The server-sent events of a streamed reply: ``message_start``, a ``text`` block's
    ``content_block_start``/``text_delta``s as the text comes, then :meth:`closing`: the
    rest of the text, the text block's ``content_block_stop``, each ``tool_use`` block
    (its input as one ``input_json_delta``), ``message_delta`` (stop reason, output tokens)
    and ``message_stop``."""

    def __init__(self, *, id: str, model: str, prompt_tokens: int, cached_tokens: int) -> None:
        self.id, self.model = id, model
        self.prompt_tokens, self.cached_tokens = prompt_tokens, cached_tokens
        self.blocks = 0  # content blocks opened
        self.text_open = False

    def opening(self) -> list[str]:
        start: dict[str, Any] = {"id": self.id, "type": "message", "role": "assistant",
                                 "model": self.model, "content": [], "stop_reason": None,
                                 "stop_sequence": None,
                                 "usage": _usage(self.prompt_tokens, self.cached_tokens, 0)}
        return [_event("message_start", {"message": start}), _event("ping", {})]

    def text(self, text: str) -> list[str]:
        events = []
        if not self.text_open:
            events.append(_event("content_block_start", {
                "index": self.blocks, "content_block": {"type": "text", "text": ""}}))
            self.text_open, self.blocks = True, self.blocks + 1
        events.append(_event("content_block_delta", {
            "index": self.blocks - 1, "delta": {"type": "text_delta", "text": text}}))
        return events

    def closing(self, *, rest: str, tool_calls: list[dict] | None, finish_reason: str,
                stop: str | None, output_tokens: int) -> list[str]:
        events = self.text(rest) if rest or (not self.text_open and not tool_calls) else []
        if self.text_open:
            events.append(_event("content_block_stop", {"index": self.blocks - 1}))
        for block in map(_tool_use, tool_calls or []):
            index, self.blocks = self.blocks, self.blocks + 1
            events += [
                _event("content_block_start", {"index": index, "content_block": {
                    **block, "input": {}}}),
                _event("content_block_delta", {"index": index, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}),
                _event("content_block_stop", {"index": index})]
        reason = "stop_sequence" if stop else _STOP_REASONS[finish_reason]
        events.append(_event("message_delta", {
            "delta": {"stop_reason": reason, "stop_sequence": stop},
            "usage": {"output_tokens": output_tokens}}))
        events.append(_event("message_stop", {}))
        return events


def error_body(error: OpenAIError) -> dict[str, Any]:
    """An error in Anthropic's shape."""
    return {"type": "error", "error": {"type": _ERROR_TYPES.get(error.status, "api_error"),
                                       "message": error.message}}
