"""What every API of the agent endpoint shares: the served models, the capture sessions (a
call's session picked by its URL or its API key), the checks a call passes, beginning a chat
call in its session and answering it whole or streamed (:class:`Endpoint`).

The routes of each API (:mod:`~turnrl.agents.openai_routes`,
:mod:`~turnrl.agents.anthropic_routes`, :mod:`~turnrl.agents.responses_routes`) read their
requests into the chat normal form, begin a :class:`~turnrl.agents.calls.Call` here and
write its replies in their own JSON; :class:`~turnrl.agents.server.ModelServer` serves them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from transformers import PreTrainedTokenizerBase

from turnrl.agents.calls import Call, CallSpec
from turnrl.agents.capture import RenderError, Session
from turnrl.agents.http import LiveStream, disconnected
from turnrl.agents.protocol import Limits, OpenAIError, models_list, parse_chat_request
from turnrl.agents.protocol.schema import openapi
from turnrl.agents.replies import Reply
from turnrl.rollout.engine import Engine

__all__ = ["Endpoint", "engine_session"]


class Endpoint:
    """The models, sessions and calls of an agent endpoint (served by
    :class:`~turnrl.agents.server.ModelServer`, which documents the arguments)."""

    def __init__(self, engine: Engine, tokenizer: PreTrainedTokenizerBase, *, model_name: str,
                 limits: Limits, max_context_tokens: int, max_calls: int | None = None,
                 open_access: bool = False,
                 engines: Mapping[str, Engine] | None = None) -> None:
        self.tokenizer, self.model_name = tokenizer, model_name
        self.engines: dict[str, Engine] = {model_name: engine, **(engines or {})}
        self.limits, self.max_context_tokens = limits, max_context_tokens
        self.max_calls = max_calls
        self.sampling: tuple[float, float] | None = None
        self.train_partial = False  # agent.train_partial: keep a cancelled call's tokens
        self.open_access = open_access
        self.eos_token_id = tokenizer.eos_token_id
        self.sessions: dict[str, Session] = {}

    @property
    def engine(self) -> Engine:
        """The engine of ``model_name`` (the run's model)."""
        return self.engines[self.model_name]

    @engine.setter
    def engine(self, engine: Engine) -> None:
        self.engines[self.model_name] = engine

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
                engine.end_session(engine_session(key, segment))
        return session

    def session_of(self, request: Request) -> tuple[str | None, Session]:
        key = request.path_params.get("key")
        if key is None:
            token = self.session_key(request)
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

    def session_key(self, request: Request) -> str:
        """The API key of ``request``: ``Authorization: Bearer KEY`` (OpenAI's SDK) or
        ``x-api-key: KEY`` (Anthropic's)."""
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        return token or request.headers.get("x-api-key", "").strip()

    # ------------------------------------------------------------------ calls
    def begin_chat(self, key: str | None, session: Session, messages: list[dict],
                   tools: list[dict] | None, *, model: str, max_tokens: int,
                   temperature: float, top_p: float, seed: int | None, n: int,
                   stops: tuple[str, ...], reply_tools: bool, response_id: str) -> Call:
        """A chat call (any API's, its messages and tools in OpenAI's normal form) begun in
        ``session``: checked, rendered and captured; sample it with :meth:`answer` or
        :meth:`stream`. Raises :class:`OpenAIError` for a call it refuses (which never
        counts as a call)."""
        self.check_model(model)
        self.check_calls(key, session)
        try:
            turn = session.begin(messages, tools, model)
        except RenderError as error:
            raise OpenAIError(str(error), param="messages") from None
        try:
            spec = self.spec(turn.prompt_ids, max_tokens, temperature, top_p,
                              seed if seed is not None else session.call_seed(turn.call), n,
                              model, stops, tools if reply_tools else None,
                              engine_session(key, turn.segment))
        except BaseException:
            session.abandon(turn)
            raise
        return Call(self.engines, self.tokenizer, self.eos_token_id, spec, session=session,
                    turn=turn, response_id=response_id, keep_partial=self.train_partial)

    def begin_chat_body(self, key: str | None, session: Session, body: dict[str, Any],
                        response_id: str) -> Call:
        """A one-reply call of an API read into a chat-completions ``body`` (the Responses
        and Messages APIs): checked as one and begun as :meth:`begin_chat` begins it."""
        chat = parse_chat_request(body, self.limits)
        return self.begin_chat(key, session, chat.messages, chat.tools, model=chat.model,
                               max_tokens=chat.max_tokens, temperature=chat.temperature,
                               top_p=chat.top_p, seed=None, n=1, stops=chat.stop,
                               reply_tools=chat.tool_choice != "none",
                               response_id=response_id)

    def spec(self, prompt: list[int], max_tokens: int, temperature: float, top_p: float,
              seed: int | None, n: int, model: str, stops: tuple[str, ...],
              tools: list[dict] | None, engine_session: str | None) -> CallSpec:
        temperature, top_p = self.sampling or (temperature, top_p)
        return CallSpec(prompt, self.fit(len(prompt), max_tokens), temperature, top_p, seed,
                        n, model, stops, tools, engine_session)

    async def answer(self, request: Request, call: Call) -> list[Reply]:
        """The call's replies, sampled whole; a client that hangs up first cancels it
        (:class:`ClientDisconnect`, nothing recorded). The call is queued in the engine
        before anything is awaited, and awaited in the handler's own task, so it joins the
        engine's next step and its reply goes out in the loop round after it is sampled."""
        call.start()
        task = asyncio.current_task()
        assert task is not None

        def hung_up(watch: asyncio.Future) -> None:
            if not watch.cancelled():
                task.cancel()

        hangup = asyncio.ensure_future(disconnected(request))
        hangup.add_done_callback(hung_up)
        try:
            return await call.run()
        except asyncio.CancelledError:
            if hangup.done() and not hangup.cancelled():
                task.uncancel()
                raise ClientDisconnect() from None
            raise
        finally:
            hangup.remove_done_callback(hung_up)
            hangup.cancel()

    def stream(self, call: Call, events: AsyncIterator[str]) -> Response:
        """Server-sent ``events`` of ``call`` as they come (the call is queued in the engine
        now); the client hanging up stops them and the call's generation, even before the
        stream began."""
        call.start(live=True)
        return LiveStream(events, on_close=call.close, media_type="text/event-stream",
                          headers={"cache-control": "no-cache"})

    async def models(self, request: Request) -> Response:
        try:
            self.session_of(request)
        except OpenAIError as error:
            return JSONResponse(error.body(), status_code=error.status)
        return JSONResponse(models_list(list(self.engines), int(time.time())))

    async def openapi(self, request: Request) -> Response:
        """``GET /openapi.json``: the endpoint's OpenAPI schema."""
        return JSONResponse(openapi(list(self.engines)))

    async def not_found(self, request: Request, _exc: Exception) -> Response:
        error = OpenAIError(f"no route {request.url.path}: this server serves /v1/chat/"
                            "completions, /v1/completions, /v1/responses, /v1/messages and "
                            "/v1/models (GET /openapi.json describes them)", status=404,
                            type="not_found_error")
        return JSONResponse(error.body(), status_code=404)

    async def not_allowed(self, request: Request, _exc: Exception) -> Response:
        error = OpenAIError(f"{request.method} is not allowed on {request.url.path}",
                            status=405, type="invalid_request_error")
        return JSONResponse(error.body(), status_code=405)
    # ------------------------------------------------------------------ checks
    def check_model(self, model: str) -> None:
        """OpenAI's answer to a model it does not serve: 404, ``model_not_found``."""
        if model not in self.engines:
            served = ", ".join(repr(name) for name in self.engines)
            raise OpenAIError(f"The model `{model}` does not exist or you do not have access "
                              f"to it. This endpoint serves {served} (agent.model_name and "
                              "multi.policies; /v1/models lists them).", status=404,
                              param="model", code="model_not_found")

    def check_calls(self, key: str | None, session: Session) -> None:
        if key is not None and self.max_calls is not None and session.calls >= self.max_calls:
            raise OpenAIError(f"this agent run has made {session.calls} model calls, the most "
                              "it may (agent.max_calls)", code="max_calls_exceeded")

    def fit(self, prompt_tokens: int, max_tokens: int) -> int:
        room = self.max_context_tokens - prompt_tokens
        if room < 1:
            raise OpenAIError(
                f"the prompt has {prompt_tokens} tokens; this model serves at most "
                f"{self.max_context_tokens} tokens of context (rollout.max_context_tokens)",
                param="messages", code="context_length_exceeded")
        return min(max_tokens, room)


def engine_session(key: str | None, segment: Any) -> str | None:
    """The engine's KV session of a capture segment (None outside a registered session)."""
    return f"{key}/{id(segment)}" if key is not None else None
