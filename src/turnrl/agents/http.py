"""The HTTP plumbing of the agent endpoint: reading a JSON body (with a nesting limit),
noticing a client that hangs up, streams that stop when it does, quiet disconnects, the
event loop and the 500 reply."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from turnrl.agents.protocol import OpenAIError

__all__ = ["MAX_BODY_DEPTH", "LiveStream", "QuietDisconnects", "disconnected", "json_depth",
           "new_event_loop", "read_body", "server_error"]

log = logging.getLogger("turnrl.agents.server")
MAX_BODY_DEPTH = 64  # arrays and objects nested deeper than this are refused (a 400)


async def disconnected(request: Request) -> None:
    """Returns when the client of ``request`` (its body read) hangs up."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class LiveStream(StreamingResponse):
    """A stream whose events stop when the client hangs up: Starlette cancels the sending
    (ASGI spec 2.3, uvicorn's), and the events' generator is closed here, then ``on_close``
    awaited, so a call being streamed cancels its generation at once, whatever the server's
    spec version, and also when the stream never began."""

    def __init__(self, content: Any, *, on_close: Callable[[], Awaitable[None]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.on_close = on_close

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            close = getattr(self.body_iterator, "aclose", None)
            if close is not None:
                await close()
            if self.on_close is not None:
                await self.on_close()


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (Linux and macOS: a call's round trip and
    the HTTP parsing cost less), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class QuietDisconnects:
    """ASGI wrapper: a client that hangs up before its reply is read (mid-body or mid-stream)
    is one INFO line naming the route, not an exception traceback."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            log.info("a client disconnected before its reply was sent (%s %s)",
                     scope.get("method", ""), scope.get("path", ""))


async def read_body(request: Request) -> object:
    """The request's JSON; a 400 for bad JSON or for nesting deeper than
    :data:`MAX_BODY_DEPTH` (checked without recursion; the decoder's own recursion limit,
    about 1,000 levels, gives the same error)."""
    raw = await request.body()
    try:
        body = json.loads(raw)
    except RecursionError:
        raise _too_deep() from None
    except (ValueError, UnicodeDecodeError) as error:
        raise OpenAIError(f"the request body is not valid JSON: {error}") from None
    if json_depth(body) > MAX_BODY_DEPTH:
        raise _too_deep()
    return body


def json_depth(value: object) -> int:
    """How deeply arrays and objects nest in ``value`` (a scalar: 0, ``[]``: 1,
    ``{"a": [1]}``: 2), with an explicit stack (no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) \
            else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_BODY_DEPTH:  # deeper is refused whatever lies below
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _too_deep() -> OpenAIError:
    return OpenAIError(f"the request body nests arrays and objects more than {MAX_BODY_DEPTH} "
                       "levels deep, the most this server reads; send a flatter body",
                       code="body_too_deep")


def server_error(error: Exception) -> Response:
    body = {"error": {"message": f"the server failed: {type(error).__name__}: {error}",
                      "type": "server_error", "param": None, "code": None}}
    return JSONResponse(body, status_code=500)
