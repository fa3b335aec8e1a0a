"""OpenAI's Responses API (``POST /v1/responses``) as the endpoint serves it: the subset
agent programs use (the OpenAI Agents SDK's default model among them), as pydantic models,
read into the chat normal form every API shares, and the reply, whole or as events.

Reading a request (:func:`to_chat_body`): ``instructions`` becomes a system message; ``input``
(a string: one user message; or items) becomes messages: a ``message`` item its role's
message (``developer`` is ``system``; its ``input_text``/``output_text`` parts joined), an
assistant ``message`` and the ``function_call`` items after it one assistant message with
tool calls (so an echoed reply compares equal to the one recorded), a
``function_call_output`` a ``tool`` message. Function tools ``{type, name, description,
parameters}`` become chat tools. Nothing is stored: ``previous_response_id``, built-in tools
(web search, files, computer use), images and files are refused with a 400 naming them.

The reply (:func:`response`, :class:`ResponsesStream`): an output ``message`` item (when
there is text, or nothing else) and a ``function_call`` item per call (``call_id`` is the
call's id); ``status`` ``completed``, or ``incomplete`` with ``incomplete_details.reason
= "max_output_tokens"``.
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from turnrl.agents.protocol.values import validated

__all__ = ["ResponsesRequest", "ResponsesStream", "parse_responses", "response",
           "to_chat_body"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputText(_Model):
    type: Literal["input_text"]
    text: str


class OutputText(_Model):
    type: Literal["output_text"]
    text: str
    annotations: list[Any] = []
    logprobs: list[Any] | None = None


Part = Annotated[InputText | OutputText, Field(discriminator="type")]


class MessageItem(_Model):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[Part]
    id: str | None = None
    status: str | None = None


class FunctionCallItem(_Model):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: str | None = None


class FunctionCallOutputItem(_Model):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[InputText]
    id: str | None = None
    status: str | None = None


def _item_kind(value: Any) -> str:
    kind = value.get("type", "message") if isinstance(value, dict) else getattr(
        value, "type", "message")
    return kind if isinstance(kind, str) else "message"


Item = Annotated[Annotated[MessageItem, Tag("message")]
                 | Annotated[FunctionCallItem, Tag("function_call")]
                 | Annotated[FunctionCallOutputItem, Tag("function_call_output")],
                 Discriminator(_item_kind)]


class FunctionTool(_Model):
    type: Literal["function"]
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class NamedFunction(_Model):
    type: Literal["function"]
    name: str


class TextFormat(_Model):
    type: Literal["text"]


class TextConfig(_Model):
    format: TextFormat | None = None
    verbosity: str | None = None  # accepted, ignored


class ResponsesRequest(_Model):
    """A ``POST /v1/responses`` body (the fields turnrl serves; others are a 400)."""

    model: str
    input: str | list[Item]
    instructions: str | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedFunction | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    stream: bool = False
    text: TextConfig | None = None
    previous_response_id: None = None  # nothing is stored
    # accepted, ignored
    parallel_tool_calls: bool | None = None
    store: bool | None = None
    metadata: dict[str, Any] | None = None
    user: str | None = None
    include: list[str] | None = None
    truncation: Literal["disabled", "auto"] | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None
    reasoning: dict[str, Any] | None = None
    top_logprobs: Literal[0] | None = None
    stream_options: dict[str, Any] | None = None
    background: Literal[False] | None = None
    max_tool_calls: int | None = None


def parse_responses(body: object) -> ResponsesRequest:
    """``body`` read into a :class:`ResponsesRequest`, or a 400 naming the first problem."""
    return validated(ResponsesRequest, body, {
        "previous_response_id": "; nothing is stored here: send the whole conversation as input",
        "unserved": (" (this endpoint serves text and function tools: built-in tools, images, "
                     "files and structured outputs are not served)")})


def _text(content: str | list[Any]) -> str:
    return content if isinstance(content, str) else "".join(part.text for part in content)


def to_chat_body(request: ResponsesRequest) -> dict[str, Any]:
    """The request as a chat-completions body (OpenAI's form, which the server renders)."""
    messages: list[dict[str, Any]] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    items = [MessageItem(role="user", content=request.input)] if isinstance(
        request.input, str) else request.input
    assistant: dict[str, Any] | None = None  # the assistant message being gathered
    for item in items:
        if isinstance(item, FunctionCallItem):
            if assistant is None:
                assistant = {"role": "assistant", "content": None}
                messages.append(assistant)
            assistant.setdefault("tool_calls", []).append({
                "id": item.call_id, "type": "function",
                "function": {"name": item.name, "arguments": item.arguments}})
            continue
        assistant = None
        if isinstance(item, FunctionCallOutputItem):
            messages.append({"role": "tool", "tool_call_id": item.call_id,
                             "content": _text(item.output)})
        elif item.role == "assistant":
            assistant = {"role": "assistant", "content": _text(item.content)}
            messages.append(assistant)
        else:
            role = "system" if item.role == "developer" else item.role
            messages.append({"role": role, "content": _text(item.content)})
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.tools:
        body["tools"] = [{"type": "function", "function": {
            "name": t.name, **({"description": t.description} if t.description else {}),
            "parameters": t.parameters or {"type": "object", "properties": {}}}}
            for t in request.tools]
        choice = request.tool_choice
        if choice is not None:
            body["tool_choice"] = choice if isinstance(choice, str) else {
                "type": "function", "function": {"name": choice.name}}
    for key, value in (("max_tokens", request.max_output_tokens),
                       ("temperature", request.temperature), ("top_p", request.top_p)):
        if value is not None:
            body[key] = value
    return body


def _message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [] if status == "in_progress" else [
        {"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": content}


def _call_item(item_id: str, call: dict, status: str = "completed") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call["id"],
            "name": call["function"]["name"],
            "arguments": call["function"]["arguments"] if status == "completed" else "",
            "status": status}


def _usage(prompt_tokens: int, cached_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt_tokens + output_tokens}


def _envelope(request: ResponsesRequest, *, id: str, created: int,
              status: str) -> dict[str, Any]:
    tool_choice = request.tool_choice or "auto"
    return {
        "id": id, "object": "response", "created_at": created, "status": status,
        "error": None, "incomplete_details": None, "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens, "model": request.model, "output": [],
        "parallel_tool_calls": request.parallel_tool_calls is not False,
        "previous_response_id": None, "reasoning": None, "store": False,
        "temperature": request.temperature, "text": {"format": {"type": "text"}},
        "tool_choice": tool_choice if isinstance(tool_choice, str)
        else tool_choice.model_dump(),
        "tools": [t.model_dump(exclude_none=True) for t in request.tools or []],
        "top_p": request.top_p, "truncation": "disabled", "usage": None,
        "metadata": request.metadata or {}, "user": request.user}


def response(request: ResponsesRequest, *, id: str, created: int, text: str,
             tool_calls: list[dict] | None, finish_reason: str, prompt_tokens: int,
             cached_tokens: int, output_tokens: int,
             item_ids: list[str] | None = None) -> dict[str, Any]:
    """The JSON of a whole ``response`` (``item_ids``: its output items' ids, fresh ones by
    default)."""
    ids = iter(item_ids or [])
    output = []
    if text or not tool_calls:
        output.append(_message_item(next(ids, None) or _new_id("msg"), text))
    output += [_call_item(next(ids, None) or _new_id("fc"), call) for call in tool_calls or []]
    incomplete = finish_reason == "length"
    return {**_envelope(request, id=id, created=created,
                        status="incomplete" if incomplete else "completed"),
            "output": output,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "usage": _usage(prompt_tokens, cached_tokens, output_tokens)}


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


class ResponsesStream:
    """The events of a streamed response, each ``event: TYPE`` with a ``sequence_number``:
    ``response.created`` and ``response.in_progress``; the message item's
    ``output_item.added`` and ``content_part.added`` at its first text, then
    ``output_text.delta`` as the text comes; :meth:`closing`: the rest of the text, the
    message's ``output_text.done``, ``content_part.done`` and ``output_item.done``, per tool
    call ``output_item.added``, ``function_call_arguments.delta``/``.done`` and
    ``output_item.done``, and ``response.completed`` (``response.incomplete``) with the whole
    response."""

    def __init__(self, request: ResponsesRequest, *, id: str, created: int) -> None:
        self.request, self.id, self.created = request, id, created
        self.sequence = 0
        self.message_id: str | None = None
        self.sent = ""

    def _event(self, name: str, payload: dict[str, Any]) -> str:
        data = json.dumps({"type": name, "sequence_number": self.sequence, **payload},
                          ensure_ascii=False, separators=(",", ":"))
        self.sequence += 1
        return f"event: {name}\ndata: {data}\n\n"

    def opening(self) -> list[str]:
        start = _envelope(self.request, id=self.id, created=self.created, status="in_progress")
        return [self._event("response.created", {"response": start}),
                self._event("response.in_progress", {"response": start})]

    def text(self, text: str) -> list[str]:
        events = []
        if self.message_id is None:
            self.message_id = _new_id("msg")
            where = {"item_id": self.message_id, "output_index": 0, "content_index": 0}
            events += [
                self._event("response.output_item.added", {
                    "output_index": 0,
                    "item": _message_item(self.message_id, "", "in_progress")}),
                self._event("response.content_part.added", {**where, "part": {
                    "type": "output_text", "text": "", "annotations": [], "logprobs": []}})]
        self.sent += text
        events.append(self._event("response.output_text.delta", {
            "item_id": self.message_id, "output_index": 0, "content_index": 0, "delta": text,
            "logprobs": []}))
        return events

    def closing(self, *, rest: str, tool_calls: list[dict] | None, finish_reason: str,
                prompt_tokens: int, cached_tokens: int, output_tokens: int) -> list[str]:
        events = self.text(rest) if rest or (self.message_id is None and not tool_calls) \
            else []
        ids = []
        if self.message_id is not None:
            item = _message_item(self.message_id, self.sent)
            where = {"item_id": self.message_id, "output_index": 0, "content_index": 0}
            events += [
                self._event("response.output_text.done", {**where, "text": self.sent,
                                                          "logprobs": []}),
                self._event("response.content_part.done", {**where,
                                                           "part": item["content"][0]}),
                self._event("response.output_item.done", {"output_index": 0, "item": item})]
            ids.append(self.message_id)
        for call in tool_calls or []:
            index, item_id = len(ids), _new_id("fc")
            ids.append(item_id)
            done = _call_item(item_id, call)
            events += [
                self._event("response.output_item.added", {
                    "output_index": index, "item": _call_item(item_id, call, "in_progress")}),
                self._event("response.function_call_arguments.delta", {
                    "item_id": item_id, "output_index": index, "delta": done["arguments"]}),
                self._event("response.function_call_arguments.done", {
                    "item_id": item_id, "output_index": index, "name": done["name"],
                    "arguments": done["arguments"]}),
                self._event("response.output_item.done", {"output_index": index,
                                                          "item": done})]
        whole = response(self.request, id=self.id, created=self.created, text=self.sent,
                         tool_calls=tool_calls, finish_reason=finish_reason,
                         prompt_tokens=prompt_tokens, cached_tokens=cached_tokens,
                         output_tokens=output_tokens, item_ids=ids)
        name = "response.incomplete" if whole["status"] == "incomplete" \
            else "response.completed"
        events.append(self._event(name, {"response": whole}))
        return events
