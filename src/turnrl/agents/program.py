"""An agent program as turnrl sees it: the function an ``agent.entry_point`` names
(:func:`load_agent`), the arguments it takes (:func:`agent_arguments`), what it returns
(:class:`AgentResult`, :func:`to_result`), the errors of a run, and the ``openai`` client of
one run over a shared connection pool.

Both sides that run agents use it: :mod:`turnrl.agents.runner` (runs in the trainer's process)
and :mod:`turnrl.agents.workers` (runs in worker processes).
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from turnrl.agents.connection import AsyncRetryTransport, RetryTransport, http_library

__all__ = ["AgentError", "AgentResult", "RunFailed", "agent_arguments", "http_pool",
           "load_agent", "openai_client", "to_result"]

CLIENT_ARGS = ("client", "base_url", "api_key", "task")


class AgentError(ValueError):
    """The agent entry point cannot be used (not found, wrong signature)."""


class RunFailed(RuntimeError):
    """An agent run failed where it ran (a worker process); the message says how, e.g.
    ``ValueError: ...`` for a run that raised. ``connection``: the run failed on its connection
    to the endpoint (:func:`turnrl.agents.connection.is_connection_error`), not on its own."""

    def __init__(self, message: str, *, connection: bool = False) -> None:
        super().__init__(message)
        self.connection = connection


@dataclass(frozen=True)
class AgentResult:
    """What an agent run earned.

    ``reward`` is the outcome, given at the last call; ``call_rewards`` (optional) are added
    at each call: a dict keyed by the id of each reply (``reply.id``; calls it leaves out get
    0), or a list with one entry per answered call in the order they were made (only when
    the calls never overlapped; a call refused with an error does not count); ``success``
    defaults to ``reward > 0``; ``info`` is kept in ``Trajectory.info`` (e.g. the agent's
    final answer). ``discarded`` names replies the agent threw away (a best-of-n's losers)
    by their id (``reply.id``: every choice of the call) or ``"<id>/<k>"`` (choice ``k`` of
    an ``n > 1`` call): their tokens are not trained, unless ``call_rewards`` gives the
    call a reward of its own.
    """

    reward: float
    call_rewards: list[float] | dict[str, float] | None = None
    success: bool | None = None
    info: dict[str, Any] = field(default_factory=dict)
    discarded: list[str] | None = None


def to_result(value: object) -> AgentResult:
    """An agent's return value as an :class:`AgentResult`; :class:`AgentError` if it is none
    of a number, a dict with ``reward`` or an :class:`AgentResult`."""
    if isinstance(value, AgentResult):
        result = value
    elif isinstance(value, bool | int | float):
        result = AgentResult(float(value))
    elif isinstance(value, Mapping) and "reward" in value:
        unknown = set(value) - {"reward", "call_rewards", "success", "info", "discarded"}
        if unknown:
            raise AgentError(f"the agent returned a dict with unknown key(s) {sorted(unknown)}; "
                             "use reward, call_rewards, success, info and discarded")
        result = AgentResult(value["reward"], value.get("call_rewards"), value.get("success"),
                             dict(value.get("info") or {}), value.get("discarded"))
    else:
        raise AgentError(f"the agent returned {value!r:.80}; return a float reward, a dict "
                         "with 'reward' (and optionally 'call_rewards', 'success', 'info') or "
                         "an AgentResult")
    if isinstance(result.reward, bool) or not isinstance(result.reward, int | float) \
            or not math.isfinite(result.reward):
        raise AgentError(f"the agent's reward must be a finite number, got {result.reward!r}")
    given = result.call_rewards
    values = list(given.values()) if isinstance(given, Mapping) else given
    if given is not None and (not isinstance(given, list | Mapping) or not all(
            isinstance(r, int | float) and not isinstance(r, bool) and math.isfinite(r)
            for r in values or []) or (isinstance(given, Mapping) and not all(
            isinstance(k, str) for k in given))):
        raise AgentError(f"call_rewards must be a list of finite numbers or a dict of reply id "
                         f"-> finite number, got {given!r:.80}")
    if result.discarded is not None and not (isinstance(result.discarded, list | tuple) and all(
            isinstance(d, str) for d in result.discarded)):
        raise AgentError(f"discarded must be a list of reply ids (reply.id, or '<id>/<k>' for "
                         f"choice k), got {result.discarded!r:.80}")
    return result


def load_agent(entry_point: str) -> Callable[..., Any]:
    """The function ``module:attribute`` names; :class:`AgentError` saying what is wrong."""
    module_name, _, attribute = entry_point.partition(":")
    if not module_name or not attribute:
        raise AgentError(f"agent.entry_point {entry_point!r} must be 'module:function', e.g. "
                         "'mypkg.agents:solve'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise AgentError(f"agent.entry_point {entry_point!r}: cannot import {module_name!r} "
                         f"({error}); is it installed or on PYTHONPATH?") from None
    fn: Any = module
    for part in attribute.split("."):
        if not hasattr(fn, part):
            raise AgentError(f"agent.entry_point {entry_point!r}: {module_name!r} has no "
                             f"{attribute!r}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise AgentError(f"agent.entry_point {entry_point!r} is not callable")
    agent_arguments(fn, entry_point)
    return fn


def agent_arguments(fn: Callable[..., Any], name: str) -> list[str]:
    """Which of ``client``, ``base_url``, ``api_key`` and ``task`` ``fn`` takes, in order:
    by name, else positionally ``(client, task)``."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ["client", "task"]
    names = [p.name for p in parameters
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if set(names) & set(CLIENT_ARGS):
        required = [p.name for p in parameters if p.default is p.empty
                    and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        unknown = [n for n in required if n not in CLIENT_ARGS]
        if unknown:
            raise AgentError(f"agent {name}: parameter(s) {unknown} cannot be given; an agent "
                             f"takes some of {', '.join(CLIENT_ARGS)}")
        return [n for n in names if n in CLIENT_ARGS]
    if len(names) < 2 and not any(p.kind == p.VAR_POSITIONAL for p in parameters):
        raise AgentError(f"agent {name} must take (client, task), or parameters named "
                         f"{', '.join(CLIENT_ARGS)}")
    return ["client", "task"]


def http_pool(*, asynchronous: bool) -> Any:
    """One HTTP connection pool for many runs' clients (a client's own pool and SSL context
    cost ~20 ms to build, more than a tiny model's call), without a connection limit; a
    request the server never read (refused, or reset before it was read) is sent again
    (:mod:`turnrl.agents.connection`)."""
    openai = _openai()
    lib = http_library()
    limits = lib.Limits(max_connections=None, max_keepalive_connections=None)
    if asynchronous:
        return openai.DefaultAsyncHttpxClient(
            transport=AsyncRetryTransport(lib.AsyncHTTPTransport(limits=limits)))
    return openai.DefaultHttpxClient(transport=RetryTransport(lib.HTTPTransport(limits=limits)))


def openai_client(url: str, key: str, http: Any, *, asynchronous: bool,
                  timeout_s: float | None) -> Any:
    """An ``openai`` client of one run (its session's ``url`` and ``key``) over ``http``;
    no retries of a call the server read (a refused call is the agent's to handle)."""
    openai = _openai()
    kind = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return kind(base_url=url, api_key=key, max_retries=0, http_client=http,
                timeout=timeout_s if timeout_s else 600.0)


def _openai() -> Any:
    try:
        import openai
    except ImportError:
        raise AgentError("the agent takes a client, which needs the openai package: pip "
                         "install openai (or take base_url and api_key)") from None
    return openai
