"""The endpoint's OpenAPI schema (``GET /openapi.json``): every route, its request body as a
pydantic model and its replies.

The Messages and Responses requests are the models their routes validate with
(:mod:`~turnrl.agents.protocol.anthropic`, :mod:`~turnrl.agents.protocol.responses`); the
chat-completions and completions requests are described by :class:`ChatCompletionBody` and
:class:`CompletionBody` (their routes check each parameter with a message naming it,
:mod:`~turnrl.agents.protocol.params`). CI fuzzes a running server from this schema with
schemathesis: no input may get a 500.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema

from turnrl.agents.protocol.anthropic import MessagesRequest
from turnrl.agents.protocol.responses import ResponsesRequest

__all__ = ["ChatCompletionBody", "CompletionBody", "openapi"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="allow")  # the routes name an unknown parameter


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


class _Sampling(_Body):
    model: str
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int | None = Field(default=None, ge=1)
    stream: bool | None = None
    stream_options: dict[str, bool] | None = None
    user: str | None = None


class ChatCompletionBody(_Sampling):
    """A ``POST /v1/chat/completions`` body."""

    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ChatTool] | None = None
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    metadata: dict[str, str] | None = None
    store: bool | None = None
    parallel_tool_calls: bool | None = None


class CompletionBody(_Sampling):
    """A ``POST /v1/completions`` body (``prompt``: text or token ids)."""

    prompt: str | list[int]
    logprobs: int | None = Field(default=None, ge=0, le=5)
    echo: bool | None = None


_BODIES: dict[str, tuple[type[BaseModel], str]] = {
    "/v1/chat/completions": (ChatCompletionBody, "A chat completion (OpenAI)."),
    "/v1/completions": (CompletionBody, "A text completion (OpenAI)."),
    "/v1/responses": (ResponsesRequest, "A response (OpenAI's Responses API)."),
    "/v1/messages": (MessagesRequest, "A message (Anthropic's Messages API)."),
}
_ERROR = {"type": "object", "description": "OpenAI's {error: {message, type, param, code}} "
          "(Anthropic's {type: error, error: {type, message}} on /v1/messages)"}


def openapi(models: list[str]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the endpoint serving ``models``."""
    _, defs = models_json_schema([(model, "validation") for model, _ in _BODIES.values()],
                                 ref_template="#/components/schemas/{model}")
    errors = {str(code): {"description": text, "content": {"application/json": {
        "schema": _ERROR}}} for code, text in (
        (400, "a request the server refuses, naming the parameter"),
        (401, "an unknown API key"), (404, "an unknown model or session"))}
    paths: dict[str, Any] = {
        path: {"post": {
            "summary": summary, "operationId": path.strip("/").replace("/", "_"),
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}},
            "responses": {"200": {"description": "the reply, or its server-sent events "
                                                 "with stream: true",
                                  "content": {"application/json": {"schema": {
                                      "type": "object"}},
                                              "text/event-stream": {"schema": {
                                                  "type": "string"}}}}, **errors}}}
        for path, (model, summary) in _BODIES.items()}
    paths["/v1/models"] = {"get": {
        "summary": "The models served.", "operationId": "v1_models",
        "responses": {"200": {"description": "{object: list, data: [{id, object, created, "
                                             "owned_by}]}",
                              "content": {"application/json": {"schema": {
                                  "type": "object", "required": ["object", "data"]}}}},
                      **errors}}}
    return {"openapi": "3.1.0",
            "info": {"title": "turnrl agent endpoint", "version": "1",
                     "description": "OpenAI- and Anthropic-compatible endpoint of a turnrl run: "
                                    f"serves {', '.join(models)}; every call is captured "
                                    "token-exactly for training."},
            "paths": paths,
            "components": {"schemas": defs.get("$defs", {}),
                           "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"},
                                               "apiKey": {"type": "apiKey", "in": "header",
                                                          "name": "x-api-key"}}},
            "security": [{"bearer": []}, {"apiKey": []}]}
