"""OpenAI's Responses API on the agent endpoint: ``POST /v1/responses``, whole or streamed
as the tokens are sampled, captured into the same token ledger as chat completions (the
wire format: :mod:`turnrl.agents.protocol.responses`)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from turnrl.agents.calls import Call
from turnrl.agents.endpoint import Endpoint
from turnrl.agents.http import read_body, server_error
from turnrl.agents.protocol import OpenAIError
from turnrl.agents.protocol.responses import (
    ResponsesRequest,
    ResponsesStream,
    parse_responses,
    response,
    to_chat_body,
)

__all__ = ["responses"]

log = logging.getLogger("turnrl.agents.server")


async def responses(self: Endpoint, request: Request) -> Response:
    """``POST /v1/responses``."""
    try:
        key, session = self.session_of(request)
        body = await read_body(request)
        req = parse_responses(body)
        call = self.begin_chat_body(key, session, to_chat_body(req),
                                    f"resp_{uuid.uuid4().hex[:24]}")
        created = int(time.time())
        # "incomplete" only when the agent's own max_output_tokens ended the reply: a reply
        # the run's cap (rollout.max_new_tokens) cut is "completed" (the agent could not ask
        # for more; the Agents SDK fails a run on "incomplete")
        own_limit = req.max_output_tokens is not None and \
            req.max_output_tokens <= self.limits.max_tokens  # not clamped to the run's cap
        if req.stream:
            return self.stream(call, _events(call, req, created, own_limit))
        reply = (await self.answer(request, call))[0]
        return JSONResponse(response(
            req, id=call.response_id, created=created, text=reply.text,
            tool_calls=reply.tool_calls, finish_reason=_finish(reply.finish_reason, own_limit),
            prompt_tokens=len(call.spec.prompt), cached_tokens=call.cached_tokens,
            output_tokens=len(reply.token_ids)))
    except OpenAIError as error:
        return JSONResponse(error.body(), status_code=error.status)
    except ClientDisconnect:
        raise
    except Exception as error:
        log.exception("responses call failed")
        return server_error(error)


def _finish(reason: str, own_limit: bool) -> str:
    return "stop" if reason == "length" and not own_limit else reason


async def _events(call: Call, req: ResponsesRequest, created: int,
                  own_limit: bool) -> AsyncIterator[str]:
    stream = ResponsesStream(req, id=call.response_id, created=created)
    for event in stream.opening():
        yield event
    async for _, text in call.deltas():
        for event in stream.text(text):
            yield event
    assert call.replies is not None
    reply = call.replies[0]
    for event in stream.closing(rest=call.rest(0), tool_calls=reply.tool_calls,
                                finish_reason=_finish(reply.finish_reason, own_limit),
                                prompt_tokens=len(call.spec.prompt),
                                cached_tokens=call.cached_tokens,
                                output_tokens=len(reply.token_ids)):
        yield event
