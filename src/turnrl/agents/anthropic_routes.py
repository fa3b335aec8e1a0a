"""Anthropic's Messages API on the agent endpoint: ``POST /v1/messages``, whole or streamed
as the tokens are sampled, captured into the same token ledger as chat completions (the
wire format: :mod:`turnrl.agents.protocol.anthropic`)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from turnrl.agents.calls import Call
from turnrl.agents.endpoint import Endpoint
from turnrl.agents.http import read_body, server_error
from turnrl.agents.protocol import OpenAIError
from turnrl.agents.protocol.anthropic import (
    MessagesStream,
    error_body,
    message,
    parse_messages,
    to_chat_body,
)

__all__ = ["messages"]

log = logging.getLogger("turnrl.agents.server")


async def messages(self: Endpoint, request: Request) -> Response:
    """``POST /v1/messages``."""
    try:
        key, session = self.session_of(request)
        body = await read_body(request)
        req = parse_messages(body)
        call = self.begin_chat_body(key, session, to_chat_body(req),
                                    f"msg_{uuid.uuid4().hex[:24]}")
        if req.stream:
            return self.stream(call, _events(call))
        reply = (await self.answer(request, call))[0]
        return JSONResponse(message(
            id=call.response_id, model=req.model, text=reply.text, tool_calls=reply.tool_calls,
            finish_reason=reply.finish_reason, stop=reply.stop,
            prompt_tokens=len(call.spec.prompt), cached_tokens=call.cached_tokens,
            output_tokens=len(reply.token_ids)))
    except OpenAIError as error:
        return JSONResponse(error_body(error), status_code=error.status)
    except ClientDisconnect:
        raise
    except Exception as error:
        log.exception("messages call failed")
        return server_error(error)


async def _events(call: Call) -> AsyncIterator[str]:
    stream = MessagesStream(id=call.response_id, model=call.spec.model,
                            prompt_tokens=len(call.spec.prompt), cached_tokens=call.cached_tokens)
    for event in stream.opening():
        yield event
    async for _, text in call.deltas():
        for event in stream.text(text):
            yield event
    assert call.replies is not None
    reply = call.replies[0]
    for event in stream.closing(rest=call.rest(0), tool_calls=reply.tool_calls,
                                finish_reason=reply.finish_reason, stop=reply.stop,
                                output_tokens=len(reply.token_ids)):
        yield event
