"""An agent run's connection to the endpoint: retrying what the server never read, and telling
a failed connection from the agent's own failure.

**Retries.** A run's ``openai`` client has ``max_retries=0``: a refused call (a 400, a 404) is
the agent's to handle, and a call the server did read must never be sent twice (its tokens
would be captured twice). What is safe to send again is a request the server never read:

- the connection was refused or timed out while opening (``ConnectError``,
  ``ConnectTimeout``): nothing was sent;
- a pooled keep-alive connection was closed or reset by the server before any byte of a
  response came back (``RemoteProtocolError`` "without sending a response", or a
  ``ReadError``/``WriteError`` caused by ``ECONNRESET`` or ``EPIPE``). The endpoint never drops a
  connection that has a request in flight (it closes idle ones only, after
  :data:`turnrl.agents.server.KEEP_ALIVE_S`), so such a request was not read.

:class:`RetryTransport` (and its async twin) wraps the transport of the HTTP package that
``openai`` uses (:func:`http_library`: httpx, or httpx2 from openai 3.x) and retries those,
at most ``tries`` times in all with a short backoff; anything else is raised as it came.

**Kinds of failure.** :func:`is_connection_error` says whether a run's exception came from its
connection to the endpoint (``openai.APIConnectionError``, a ``TransportError`` of httpx or
httpx2, or an ``OSError`` of the connection family, anywhere in its ``__cause__`` or
``__context__`` chain). The
collector counts those in ``rollout/agent_connection_error_rate``, apart from the agent's own
errors (``rollout/agent_error_rate``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from types import ModuleType
from typing import Any

import httpx

__all__ = ["CONNECTION", "ERROR_KIND", "AsyncRetryTransport", "RetryTransport", "http_library",
           "is_connection_error", "unread"]

ERROR_KIND = "error_kind"  # Trajectory.info key of a failed run: CONNECTION, or absent
CONNECTION = "connection"  # the run failed on its connection to the endpoint, not on its own
TRIES = 4  # attempts in all
BACKOFF_S = (0.05, 0.2, 0.5)  # the wait before the 2nd, 3rd and 4th attempt
_RESETS = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


def http_library() -> ModuleType:
    """The HTTP package the installed ``openai`` builds its clients on: ``httpx`` (openai 1.x
    and 2.x) or its successor ``httpx2`` (openai 3.x), which share one API."""
    import openai

    for base in openai.DefaultHttpxClient.__mro__[1:]:
        root = base.__module__.split(".")[0]
        if root != "openai":
            return importlib.import_module(root)
    return httpx


def _libraries() -> list[ModuleType]:
    found = [httpx]
    with contextlib.suppress(ImportError):
        found.append(importlib.import_module("httpx2"))
    return found


def _kind(*names: str) -> tuple[type, ...]:
    """The exception classes ``names`` of every HTTP package present."""
    return tuple(getattr(lib, name) for lib in _libraries() for name in names)


def unread(error: BaseException) -> bool:
    """Whether ``error`` (raised by a transport before a response) means the server cannot
    have read the request (see the module docstring)."""
    if isinstance(error, _kind("ConnectError", "ConnectTimeout")):
        return True
    if isinstance(error, _kind("RemoteProtocolError")):
        return "without sending a response" in str(error)
    if isinstance(error, _kind("ReadError", "WriteError")):
        return any(isinstance(e, _RESETS) for e in _chain(error))
    return False


def _backoff(error: BaseException, attempt: int, tries: int) -> float:
    """The wait before sending again after ``error`` on ``attempt`` (0-based); re-raises
    ``error`` when the server may have read the request or the tries are used up."""
    if attempt == tries - 1 or not unread(error):
        raise error
    return BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]


class RetryTransport:
    """``inner`` (an ``HTTPTransport`` of httpx or httpx2), retrying requests the server never
    read; the transport protocol by delegation, so it serves either package's client."""

    def __init__(self, inner: Any, tries: int = TRIES) -> None:
        self.inner, self.tries = inner, tries

    def handle_request(self, request: Any) -> Any:
        for attempt in range(self.tries):
            try:
                return self.inner.handle_request(request)
            except _kind("TransportError") as error:
                time.sleep(_backoff(error, attempt, self.tries))
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> RetryTransport:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.inner.__exit__(*exc)


class AsyncRetryTransport:
    """:class:`RetryTransport` over an ``AsyncHTTPTransport``."""

    def __init__(self, inner: Any, tries: int = TRIES) -> None:
        self.inner, self.tries = inner, tries

    async def handle_async_request(self, request: Any) -> Any:
        for attempt in range(self.tries):
            try:
                return await self.inner.handle_async_request(request)
            except _kind("TransportError") as error:
                await asyncio.sleep(_backoff(error, attempt, self.tries))
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> AsyncRetryTransport:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.inner.__aexit__(*exc)


def is_connection_error(error: BaseException) -> bool:
    """Whether ``error`` is a failure of the run's connection (see the module docstring)."""
    kinds = (*_kind("TransportError"), ConnectionError)
    with contextlib.suppress(ImportError):
        import openai

        kinds = (*kinds, openai.APIConnectionError)
    return any(isinstance(e, kinds) for e in _chain(error))


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and its causes and contexts, each once."""
    seen: list[BaseException] = []
    current: Any = error
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen
