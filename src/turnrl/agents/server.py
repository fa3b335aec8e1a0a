"""The agent endpoint served over HTTP: OpenAI's ``/v1/chat/completions``,
``/v1/completions`` and ``/v1/models``, OpenAI's Responses API (``/v1/responses``) and
Anthropic's Messages API (``/v1/messages``) over turnrl engines, served by Starlette and
uvicorn on a thread of its own.

Each agent run talks to its own capture :class:`~turnrl.agents.capture.Session`, chosen by
its base URL (``http://127.0.0.1:PORT/s/KEY/v1``; Anthropic's SDK: ``.../s/KEY``) or by its
API key on the plain ``/v1`` routes. Without a registered key (``turnrl serve``) every call
is served and nothing is kept. Bad requests get each API's errors (OpenAI's ``{"error":
{"message", "type", "param", "code"}}``); an unexpected failure is a 500 with its message,
never a crashed server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import socket
import threading
import time
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

import torch
from starlette.applications import Starlette
from starlette.routing import Route
from transformers import PreTrainedTokenizerBase

from turnrl.agents import anthropic_routes, openai_routes, responses_routes
from turnrl.agents.endpoint import Endpoint
from turnrl.agents.http import MAX_BODY_DEPTH, QuietDisconnects, new_event_loop
from turnrl.agents.protocol import Limits
from turnrl.rollout.engine import Engine

__all__ = ["MAX_BODY_DEPTH", "ModelServer"]

T = TypeVar("T")
KEEP_ALIVE_S = 30.0  # longer than a client pool keeps an idle connection (httpx: 5 s), so the
# client, never the server, closes one: no request is sent on a connection the server dropped


class ModelServer(Endpoint):
    """The agent endpoint over ``engine``, on ``host:port`` (0: a free port).

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
    training run samples at the learner's temperature. ``train_partial`` (default False,
    ``agent.train_partial``): a call its client hangs up on keeps the tokens it had sampled
    as its reply instead of being abandoned.

    Use as a context manager, or :meth:`start` and :meth:`close`; :meth:`run` submits a
    coroutine to the server's loop (the agent runner plays its episodes there).
    """

    def __init__(self, engine: Engine, tokenizer: PreTrainedTokenizerBase, *, model_name: str,
                 limits: Limits, max_context_tokens: int, max_calls: int | None = None,
                 host: str = "127.0.0.1", port: int = 0, open_access: bool = False,
                 engines: Mapping[str, Engine] | None = None) -> None:
        super().__init__(engine, tokenizer, model_name=model_name, limits=limits,
                         max_context_tokens=max_context_tokens, max_calls=max_calls,
                         open_access=open_access, engines=engines)
        self.host, self.requested_port = host, port
        self.port = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._socket: socket.socket | None = None
        handlers = {"chat/completions": openai_routes.chat,
                    "completions": openai_routes.completions,
                    "responses": responses_routes.responses,
                    "messages": anthropic_routes.messages}
        routes = []
        for prefix in ("/v1", "/s/{key}/v1"):
            routes += [Route(f"{prefix}/{path}", functools.partial(handler, self),
                             methods=["POST"]) for path, handler in handlers.items()]
            routes.append(Route(f"{prefix}/models", self.models, methods=["GET"]))
        routes.append(Route("/openapi.json", self.openapi, methods=["GET"]))
        self.app = QuietDisconnects(Starlette(routes=routes, exception_handlers={
            404: self.not_found, 405: self.not_allowed}))

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

    def url(self, key: str | None = None) -> str:
        """The base URL of session ``key`` (None: the plain ``/v1`` routes)."""
        root = f"http://{self.host}:{self.port}"
        return f"{root}/s/{key}/v1" if key else f"{root}/v1"
