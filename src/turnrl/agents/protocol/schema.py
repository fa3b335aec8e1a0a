"""The endpoint's OpenAPI schema (``GET /openapi.json``): every route, its request body as a
pydantic model and its replies.

Each request body is the pydantic model its route validates with
(:mod:`~turnrl.agents.protocol.bodies`, :mod:`~turnrl.agents.protocol.anthropic`,
:mod:`~turnrl.agents.protocol.responses`). CI fuzzes a running server from this schema with
schemathesis: no input may get a 500.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from turnrl.agents.protocol.anthropic import MessagesRequest
from turnrl.agents.protocol.bodies import ChatCompletionBody, CompletionBody
from turnrl.agents.protocol.responses import ResponsesRequest

__all__ = ["openapi"]


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
