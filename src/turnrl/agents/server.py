"""The OpenAI-compatible endpoint: ``/v1/chat/completions``, ``/v1/completions`` and
``/v1/models`` over a turnrl engine, served by Starlette and uvicorn on a thread of its own.

Each agent run talks to its own capture :class:`~turnrl.agents.capture.Session`, chosen by
its base URL (``http://127.0.0.1:PORT/s/KEY/v1``) or by its API key on the plain ``/v1``
routes. Without a registered key (``turnrl serve``) every call is served and nothing is
kept. Bad requests get OpenAI-style errors (``{"error": {"message", "type", "param",
"code"}}``); an unexpected failure is a 500 with its message, never a crashed server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

import torch
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from transformers import PreTrainedTokenizerBase

from turnrl.agents.capture import RenderError, Session, Turn
from turnrl.agents.protocol import (
    Choice,
    Limits,
    OpenAIError,
    Usage,
    chat_chunks,
    chat_completion,
    completion,
    completion_chunks,
    models_list,
    normalize_message,
    parse_chat_request,
    parse_completion_request,
)
from turnrl.agents.replies import Reply, cut_at_stop, reply_message, split_tool_calls
from turnrl.models.chat import encode
from turnrl.rollout.engine import Completion, Engine, SamplingParams

__all__ = ["ModelServer"]

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_BODY_DEPTH = 64  # arrays and objects nested deeper than this are refused (a 400)
KEEP_ALIVE_S = 30.0  # longer than a client pool keeps an idle connection (httpx: 5 s), so the
# client, never the server, closes one: no request is sent on a connection the server dropped
_NO_TOP_LOGPROBS = ("alternative tokens' log-probs are not served: the engine gives the "
                    "sampled token's log-prob only")


class ModelServer:
    """An OpenAI-compatible HTTP server over ``engine``, on ``host:port`` (0: a free port).

    Args:
        engine: samples the replies (its ``generate`` runs on the server's event loop).
        tokenizer: renders the messages with its chat template.
        model_name: the id ``/v1/models`` lists and responses carry (``engine``'s).
        engines: further models served by name (separate policies, ``multi.policies``): a
            request's ``model`` picks the engine that answers.
        limits: the run's caps on a request (new tokens, ``n``).
        max_context_tokens: a prompt this long is refused; ``max_tokens`` is cut to fit.
        max_calls: the most calls of one session (later ones are refused).
        open_access: serve calls without a registered session key (``turnrl serve``).

    ``sampling`` (``(temperature, top_p)`` or None) overrides what each request asks: a
    training run samples at the learner's temperature.

    Use as a context manager, or :meth:`start` and :meth:`close`; :meth:`run` submits a
    coroutine to the server's loop (the agent runner plays its episodes there).
    """

    def __init__(self, engine: Engine, tokenizer: PreTrainedTokenizerBase, *, model_name: str,
                 limits: Limits, max_context_tokens: int, max_calls: int | None = None,
                 host: str = "127.0.0.1", port: int = 0, open_access: bool = False,
                 engines: Mapping[str, Engine] | None = None) -> None:
        self.tokenizer, self.model_name = tokenizer, model_name
        self.engines: dict[str, Engine] = {model_name: engine, **(engines or {})}
        self.limits, self.max_context_tokens = limits, max_context_tokens
        self.max_calls = max_calls
        self.sampling: tuple[float, float] | None = None
        self.host, self.requested_port, self.open_access = host, port, open_access
        self.eos_token_id = tokenizer.eos_token_id
        self.sessions: dict[str, Session] = {}
        self.port = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._socket: socket.socket | None = None
        routes = []
        for prefix in ("/v1", "/s/{key}/v1"):
            routes += [Route(f"{prefix}/chat/completions", self._chat, methods=["POST"]),
                       Route(f"{prefix}/completions", self._completions, methods=["POST"]),
                       Route(f"{prefix}/models", self._models, methods=["GET"])]
        self.app = _QuietDisconnects(Starlette(routes=routes, exception_handlers={
            404: self._not_found, 405: self._not_allowed}))

    @property
    def engine(self) -> Engine:
        """The engine of ``model_name`` (the run's model)."""
        return self.engines[self.model_name]

    @engine.setter
    def engine(self, engine: Engine) -> None:
        self.engines[self.model_name] = engine

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> ModelServer:
        """Bind the socket and serve on a daemon thread; returns once requests are served."""
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.requested_port))
        except OSError as error:
            sock.close()
            raise OSError(f"cannot serve on {self.host}:{self.requested_port}: {error}; choose "
                          "another --port (0 picks a free one)") from None
        self._socket, self.port = sock, sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=1, timeout_keep_alive=KEEP_ALIVE_S)
        self._server = uvicorn.Server(config)
        self.loop = new_event_loop()
        started = threading.Event()
        # the engine steps on the server's thread: with this thread's torch threads (OpenMP
        # keeps a count per thread, and vLLM's CPU attention checks that it matches)
        threads = torch.get_num_threads()

        def serve() -> None:
            assert self.loop is not None
            torch.set_num_threads(threads)
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(started.set)
            try:
                self.loop.run_until_complete(self._server.serve(sockets=[sock]))
            finally:
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.close()

        self._thread = threading.Thread(target=serve, name="turnrl-server", daemon=True)
        self._thread.start()
        started.wait(30)
        deadline = time.monotonic() + 30
        while not self._server.started and self._thread.is_alive():
            if time.monotonic() > deadline:
                raise RuntimeError("the model server did not start within 30 s")
            time.sleep(0.01)
        if not self._server.started:
            raise RuntimeError(f"the model server on {self.host}:{self.port} stopped at start")
        return self

    def close(self) -> None:
        """Stop serving, join the thread and free the port (idempotent)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        self._server = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coroutine`` on the server's event loop (where the engine generates)."""
        if self.loop is None or self._thread is None:
            coroutine.close()
            raise RuntimeError("the model server is not running; call start() first")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    # ------------------------------------------------------------------ sessions
    def url(self, key: str | None = None) -> str:
        """The base URL of session ``key`` (None: the plain ``/v1`` routes)."""
        root = f"http://{self.host}:{self.port}"
        return f"{root}/s/{key}/v1" if key else f"{root}/v1"

    def open_session(self, seed: int | None = None) -> tuple[str, Session]:
        """A new capture session and its key; ``seed`` seeds its calls that do not send a
        ``seed`` of their own (:meth:`Session.call_seed`)."""
        key = uuid.uuid4().hex
        self.sessions[key] = Session(self.tokenizer, eos_token_id=self.eos_token_id, seed=seed)
        return key, self.sessions[key]

    def close_session(self, key: str) -> Session | None:
        """Stop serving session ``key`` (later calls get 404) and free its engine state."""
        session = self.sessions.pop(key, None)
        if session is not None:
            for segment in session.segments:
                engine = self.engines.get(segment.model or self.model_name, self.engine)
                engine.end_session(_engine_session(key, segment))
        return session

    def _session(self, request: Request) -> tuple[str | None, Session]:
        key = request.path_params.get("key")
        if key is None:
            auth = request.headers.get("authorization", "")
            token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
            if token in self.sessions:
                key = token
            elif self.open_access:
                return None, Session(self.tokenizer, eos_token_id=self.eos_token_id)
            else:
                raise OpenAIError("unknown API key: each agent run has its own key (or base "
                                  "URL) while it runs", status=401, type="authentication_error",
                                  code="invalid_api_key")
        session = self.sessions.get(key)
        if session is None:
            raise OpenAIError(f"no session {key!r}: the agent run it belonged to has ended "
                              "(finished, failed or timed out)", status=404,
                              type="not_found_error")
        return key, session

    # ------------------------------------------------------------------ routes
    async def _chat(self, request: Request) -> Response:
        try:
            key, session = self._session(request)
            req = parse_chat_request(await _body(request), self.limits)
            self._check_model(req.model)
            if req.top_logprobs:
                raise OpenAIError(_NO_TOP_LOGPROBS, param="top_logprobs",
                                  code="unsupported_value")
            self._check_calls(key, session)
            try:
                turn = session.begin(req.messages, req.tools, req.model)
            except RenderError as error:
                raise OpenAIError(str(error), param="messages") from None
            temperature, top_p = self.sampling or (req.temperature, req.top_p)
            try:
                max_tokens = self._fit(len(turn.prompt_ids), req.max_tokens)
                seed = req.seed if req.seed is not None else session.call_seed(turn.call)
                completions = await self._sample(turn.prompt_ids, max_tokens, temperature,
                                                 top_p, seed, req.n,
                                                 _engine_session(key, turn.segment), req.model)
            except BaseException:
                session.abandon(turn)
                raise
            tools = req.tools if req.tool_choice != "none" else None
            replies = [self._reply(c, req.stop, tools) for c in completions]
            rid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
            session.finish(turn, [r.token_ids for r in replies], [r.logprobs for r in replies],
                           [normalize_message(reply_message(r)) for r in replies],
                           [r.versions for r in replies], response_id=rid)
            return self._respond(req.stream, req.include_usage, chat_completion, chat_chunks,
                                 replies, req.logprobs, turn, model=req.model, response_id=rid)
        except OpenAIError as error:
            return JSONResponse(error.body(), status_code=error.status)
        except ClientDisconnect:
            raise  # one quiet line (_QuietDisconnects)
        except Exception as error:  # never take the server down
            log.exception("chat completion failed")
            return _server_error(error)

    async def _completions(self, request: Request) -> Response:
        try:
            key, session = self._session(request)
            req = parse_completion_request(await _body(request), self.limits)
            self._check_model(req.model)
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
            self._check_calls(key, session)
            turn = session.begin_raw(prompt, req.model) if key is not None else None
            temperature, top_p = self.sampling or (req.temperature, req.top_p)
            try:
                max_tokens = self._fit(len(prompt), req.max_tokens)
                seed = req.seed if req.seed is not None or turn is None \
                    else session.call_seed(turn.call)
                completions = await self._sample(prompt, max_tokens, temperature, top_p,
                                                 seed, req.n, None, req.model)
            except BaseException:
                if turn is not None:
                    session.abandon(turn)
                raise
            replies = [self._reply(c, req.stop, None) for c in completions]
            rid = f"cmpl-{uuid.uuid4().hex[:24]}"
            if turn is not None:
                session.finish(turn, [r.token_ids for r in replies],
                               [r.logprobs for r in replies], [None] * len(replies),
                               [r.versions for r in replies], response_id=rid)
            return self._respond(req.stream, req.include_usage, completion, completion_chunks,
                                 replies, req.logprobs is not None, None, len(prompt),
                                 model=req.model, response_id=rid)
        except OpenAIError as error:
            return JSONResponse(error.body(), status_code=error.status)
        except ClientDisconnect:
            raise
        except Exception as error:
            log.exception("completion failed")
            return _server_error(error)

    async def _models(self, request: Request) -> Response:
        try:
            self._session(request)
        except OpenAIError as error:
            return JSONResponse(error.body(), status_code=error.status)
        return JSONResponse(models_list(list(self.engines), int(time.time())))

    async def _not_found(self, request: Request, _exc: Exception) -> Response:
        error = OpenAIError(f"no route {request.url.path}: this server serves /v1/chat/"
                            "completions, /v1/completions and /v1/models", status=404,
                            type="not_found_error")
        return JSONResponse(error.body(), status_code=404)

    async def _not_allowed(self, request: Request, _exc: Exception) -> Response:
        error = OpenAIError(f"{request.method} is not allowed on {request.url.path}",
                            status=405, type="invalid_request_error")
        return JSONResponse(error.body(), status_code=405)

    # ------------------------------------------------------------------ sampling
    def _check_model(self, model: str) -> None:
        """OpenAI's answer to a model it does not serve: 404, ``model_not_found``."""
        if model not in self.engines:
            served = ", ".join(repr(name) for name in self.engines)
            raise OpenAIError(f"The model `{model}` does not exist or you do not have access "
                              f"to it. This endpoint serves {served} (agent.model_name and "
                              "multi.policies; /v1/models lists them).", status=404,
                              param="model", code="model_not_found")

    def _check_calls(self, key: str | None, session: Session) -> None:
        if key is not None and self.max_calls is not None and session.calls >= self.max_calls:
            raise OpenAIError(f"this agent run has made {session.calls} model calls, the most "
                              "it may (agent.max_calls)", code="max_calls_exceeded")

    def _fit(self, prompt_tokens: int, max_tokens: int) -> int:
        room = self.max_context_tokens - prompt_tokens
        if room < 1:
            raise OpenAIError(
                f"the prompt has {prompt_tokens} tokens; this model serves at most "
                f"{self.max_context_tokens} tokens of context (rollout.max_context_tokens)",
                param="messages", code="context_length_exceeded")
        return min(max_tokens, room)

    async def _sample(self, prompt: list[int], max_tokens: int, temperature: float,
                      top_p: float, seed: int | None, n: int,
                      engine_session: str | None, model: str) -> list[Completion]:
        params = [SamplingParams(max_new_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                 seed=None if seed is None else seed + i) for i in range(n)]
        return list(await asyncio.gather(*(
            self.engines[model].generate(prompt, p, session=engine_session if i == 0 else None)
            for i, p in enumerate(params))))

    def _reply(self, sampled: Completion, stops: tuple[str, ...],
               tools: list[dict] | None) -> Reply:
        n, text, stopped = cut_at_stop(self.tokenizer, sampled.token_ids, self.eos_token_id,
                                       stops)
        finish = "stop" if stopped else sampled.finish_reason
        content, tool_calls = split_tool_calls(text, tools)
        if tool_calls and finish == "stop":
            finish = "tool_calls"
        versions = sampled.versions[:n] if sampled.versions is not None else None
        return Reply(sampled.token_ids[:n], sampled.logprobs[:n], content, tool_calls, finish,
                     versions)

    def _respond(self, stream: bool, include_usage: bool, whole: Any, chunks: Any,
                 replies: list[Reply], logprobs: bool, turn: Turn | None,
                 prompt_tokens: int | None = None, *, model: str,
                 response_id: str) -> Response:
        choices = [Choice(index=i, text=r.text, finish_reason=r.finish_reason,
                          tool_calls=r.tool_calls,
                          logprobs=[(self.tokenizer.decode([t]), lp, []) for t, lp in
                                    zip(r.token_ids, r.logprobs, strict=True)]
                          if logprobs else None)
                   for i, r in enumerate(replies)]
        usage = Usage(prompt_tokens=len(turn.prompt_ids) if turn else prompt_tokens or 0,
                      completion_tokens=sum(len(r.token_ids) for r in replies),
                      cached_tokens=turn.cached_tokens if turn else 0)
        head = {"id": response_id, "model": model,
                "created": int(time.time())}
        if stream:
            events = chunks(**head, choices=choices, usage=usage if include_usage else None)
            return StreamingResponse(iter(events), media_type="text/event-stream")
        return JSONResponse(whole(**head, choices=choices, usage=usage))


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (Linux and macOS: a call's round trip and
    the HTTP parsing cost less), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _engine_session(key: str | None, segment: Any) -> str | None:
    """The engine's KV session of a capture segment (None outside a registered session)."""
    return f"{key}/{id(segment)}" if key is not None else None


class _QuietDisconnects:
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


async def _body(request: Request) -> object:
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


def _server_error(error: Exception) -> Response:
    body = {"error": {"message": f"the server failed: {type(error).__name__}: {error}",
                      "type": "server_error", "param": None, "code": None}}
    return JSONResponse(body, status_code=500)
