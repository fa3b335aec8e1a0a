"""The OpenAI routes of the agent endpoint: ``POST /v1/chat/completions`` and
``POST /v1/completions``, whole or streamed as the tokens are sampled (the wire format:
:mod:`turnrl.agents.protocol`)."""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from turnrl.agents.calls import Call
from turnrl.agents.endpoint import Endpoint
from turnrl.agents.http import read_body, server_error
from turnrl.agents.protocol import (
    ChatStream,
    Choice,
    CompletionStream,
    OpenAIError,
    Usage,
    chat_completion,
    completion,
    parse_chat_request,
    parse_completion_request,
)
from turnrl.agents.replies import Reply
from turnrl.models.chat import encode

__all__ = ["chat", "completions", "usage"]

log = logging.getLogger("turnrl.agents.server")
_NO_TOP_LOGPROBS = ("alternative tokens' log-probs are not served: the engine gives the "
                    "sampled token's log-prob only")


async def chat(self: Endpoint, request: Request) -> Response:
    """``POST /v1/chat/completions``."""
    choice = functools.partial(_choice, self)
    try:
        key, session = self.session_of(request)
        req = parse_chat_request(await read_body(request), self.limits)
        if req.top_logprobs:
            raise OpenAIError(_NO_TOP_LOGPROBS, param="top_logprobs",
                              code="unsupported_value")
        call = self.begin_chat(key, session, req.messages, req.tools, model=req.model,
                               max_tokens=req.max_tokens, temperature=req.temperature,
                               top_p=req.top_p, seed=req.seed, n=req.n, stops=req.stop,
                               reply_tools=req.tool_choice != "none",
                               response_id=f"chatcmpl-{uuid.uuid4().hex[:24]}")
        head: dict[str, Any] = {"id": call.response_id, "model": req.model,
                                "created": int(time.time())}
        if req.stream:
            return self.stream(call, _chat_events(
                call, ChatStream(**head, include_usage=req.include_usage), choice,
                req.logprobs))
        replies = await self.answer(request, call)
        return JSONResponse(chat_completion(
            **head, choices=[choice(i, r, r.text, req.logprobs)
                             for i, r in enumerate(replies)], usage=usage(call)))
    except OpenAIError as error:
        return JSONResponse(error.body(), status_code=error.status)
    except ClientDisconnect:
        raise  # one quiet line (_QuietDisconnects)
    except Exception as error:  # never take the server down
        log.exception("chat completion failed")
        return server_error(error)


async def completions(self: Endpoint, request: Request) -> Response:
    """``POST /v1/completions``."""
    choice = functools.partial(_choice, self)
    try:
        key, session = self.session_of(request)
        req = parse_completion_request(await read_body(request), self.limits)
        self.check_model(req.model)
        if req.logprobs:  # the legacy form: logprobs=k asks for k alternatives
            raise OpenAIError(_NO_TOP_LOGPROBS + "; send logprobs=0",
                              param="logprobs", code="unsupported_value")
        prompt = (encode(self.tokenizer, req.prompt) if isinstance(req.prompt, str)
                  else list(req.prompt))
        if not prompt:
            raise OpenAIError("the prompt is empty", param="prompt")
        vocab = len(self.tokenizer)
        if any(not 0 <= t < vocab for t in prompt):
            raise OpenAIError(f"prompt token ids must be in [0, {vocab})", param="prompt")
        self.check_calls(key, session)
        turn = session.begin_raw(prompt, req.model) if key is not None else None
        try:
            spec = self.spec(prompt, req.max_tokens, req.temperature, req.top_p,
                              req.seed if req.seed is not None or turn is None
                              else session.call_seed(turn.call), req.n, req.model,
                              req.stop, None, None)
        except BaseException:
            if turn is not None:
                session.abandon(turn)
            raise
        call = Call(self.engines, self.tokenizer, self.eos_token_id, spec,
                    session=session, turn=turn, messages=False, keep_partial=self.train_partial,
                    response_id=f"cmpl-{uuid.uuid4().hex[:24]}")
        head: dict[str, Any] = {"id": call.response_id, "model": req.model,
                                "created": int(time.time())}
        logprobs = req.logprobs is not None
        if req.stream:
            return self.stream(call, _chat_events(
                call, CompletionStream(**head, include_usage=req.include_usage),
                choice, logprobs))
        replies = await self.answer(request, call)
        return JSONResponse(completion(
            **head, choices=[choice(i, r, r.text, logprobs)
                             for i, r in enumerate(replies)], usage=usage(call)))
    except OpenAIError as error:
        return JSONResponse(error.body(), status_code=error.status)
    except ClientDisconnect:
        raise
    except Exception as error:
        log.exception("completion failed")
        return server_error(error)


def _choice(self: Endpoint, index: int, reply: Reply, text: str, logprobs: bool) -> Choice:
    return Choice(index=index, text=text, finish_reason=reply.finish_reason,
                  tool_calls=reply.tool_calls,
                  logprobs=[(self.tokenizer.decode([t]), lp, []) for t, lp in
                            zip(reply.token_ids, reply.logprobs, strict=True)]
                  if logprobs else None)


async def _chat_events(call: Call, stream: ChatStream | CompletionStream,
                       choice: Callable[[int, Reply, str, bool], Choice],
                       logprobs: bool) -> AsyncIterator[str]:
    """A chat completion's or a completion's events: each choice's opening, its text as it
    is sampled, then its rest (tool calls, finish reason), the usage and ``[DONE]``."""
    for i in range(call.spec.n):
        for event in stream.opening(i):
            yield event
    async for i, text in call.deltas():
        yield stream.text(i, text)
    assert call.replies is not None
    for i, reply in enumerate(call.replies):
        for event in stream.closing(choice(i, reply, call.rest(i), logprobs)):
            yield event
    for event in stream.end(usage(call)):
        yield event


def usage(call: Call) -> Usage:
    """A finished call's token counts."""
    assert call.replies is not None
    return Usage(prompt_tokens=len(call.spec.prompt),
                 completion_tokens=sum(len(r.token_ids) for r in call.replies),
                 cached_tokens=call.cached_tokens)
