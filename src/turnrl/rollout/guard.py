"""Guarded env calls: how the framework calls an env's methods, in rollouts and in SFT
demonstrations alike.

:class:`EnvCalls` runs a call inline, in a daemon worker thread (slow envs, or when asked)
or under a time limit (``env.step_timeout_s``), awaits coroutine methods (a remote env), and
validates what ``reset`` and ``step`` return. Whatever goes wrong (an exception, a timeout,
a malformed result) comes out as one :class:`EnvFailure` whose message says what failed;
the caller ends that episode only (``env.on_error`` decides what the update does with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import numbers
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from turnrl.envs.protocol import Env
from turnrl.types import Message, StepResult

log = logging.getLogger("turnrl")


class EnvFailure(Exception):
    """An env call raised, timed out or returned a malformed result: its episode ends."""


class WorkerLost(Exception):
    """The process hosting an env died (a Ray env worker): not the env's fault, so the
    episode is not scored as failed; it is re-run from its seed by whoever submitted it."""


@dataclass(frozen=True)
class EnvCalls:
    """How env methods are called.

    Args:
        step_timeout_s: a limit on each call (then every call runs in a worker thread); a
            call past it raises :class:`EnvFailure`. A hung call's thread cannot be killed:
            it is a daemon thread, left behind, that never blocks the run or its exit.
        offload: run every call in a worker thread. Envs whose spec declares
            ``slow_steps`` always run there.
    """

    step_timeout_s: float | None = None
    offload: bool = False

    async def call(self, env: Env, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` (a method of ``env``); any failure is raised as
        :class:`EnvFailure`, except :class:`WorkerLost`."""
        if inspect.iscoroutinefunction(fn):
            try:
                return await asyncio.wait_for(fn(*args, **kwargs), self.step_timeout_s)
            except WorkerLost:
                raise
            except (TimeoutError, asyncio.TimeoutError):
                name = getattr(fn, "__qualname__", repr(fn))
                raise EnvFailure(f"{name} did not return within {self.step_timeout_s:g} s "
                                 "(env.step_timeout_s)") from None
            except Exception as error:
                raise env_failure(fn, error) from error
        if self.offload or env.spec.slow_steps or self.step_timeout_s:
            try:
                return await in_thread(fn, *args, timeout=self.step_timeout_s, **kwargs)
            except Exception as error:
                raise env_failure(fn, error) from error
        return guarded(fn, *args, **kwargs)

    async def reset(self, env: Env, seed: int) -> tuple[list[Message], dict[str, Any]]:
        """``env.reset(seed=seed)``, checked to be ``(messages, info: dict)``."""
        reset = await self.call(env, env.reset, seed=seed)
        if not (isinstance(reset, tuple) and len(reset) == 2 and isinstance(reset[1], dict)
                and valid_messages(reset[0])):
            raise EnvFailure(f"env.reset must return (messages, info: dict) with messages a "
                             f"list of {{'role', 'content': str}}, got {reset!r:.200}")
        return reset

    async def step(self, env: Env, action: str) -> StepResult:
        """``env.step(action)``, checked to be a well-formed :class:`StepResult`."""
        result = await self.call(env, env.step, action)
        try:
            return check_step_result(result)
        except TypeError as error:
            raise EnvFailure(str(error)) from None

    async def text(self, env: Env, fn: Callable[..., Any], *args: Any) -> str | None:
        """A capability that returns an action (``oracle_action``, ``sample_action``),
        checked to be a string or None."""
        action = await self.call(env, fn, *args)
        if action is not None and not isinstance(action, str):
            name = getattr(fn, "__qualname__", repr(fn))
            raise EnvFailure(f"{name} must return a str (or None), got {action!r:.200}")
        return action

    async def close(self, env: Env) -> None:
        """``env.close()``; a failure is logged, never raised."""
        try:
            await self.call(env, env.close)
        except EnvFailure as failure:
            log.warning("env %s: %s", env.spec.id, failure)


def episode_error(env: Env, seed: int, where: str, error: BaseException) -> str:
    """The message of a failed episode (logged as a warning): what failed, where, and the
    command that replays it."""
    text = str(error) if isinstance(error, EnvFailure) else f"{type(error).__name__}: {error}"
    message = (f"{text} (env {env.spec.id}, seed {seed}, {where}; "
               f"replay with `turnrl play {env.spec.id} --seed {seed}`)")
    log.warning("episode failed: %s", message)
    return message


def guarded(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with any exception raised as :class:`EnvFailure`."""
    try:
        return fn(*args, **kwargs)
    except Exception as error:
        raise env_failure(fn, error) from error


def env_failure(fn: Callable[..., Any], error: BaseException) -> EnvFailure:
    if isinstance(error, TimeoutError):
        return EnvFailure(str(error))
    name = getattr(fn, "__qualname__", repr(fn))
    return EnvFailure(f"{name} raised {type(error).__name__}: {error}")


def valid_messages(messages: Any) -> bool:
    """A list of ``{"role": str, "content": str}`` messages."""
    return isinstance(messages, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in messages)


def check_step_result(result: Any) -> StepResult:
    """``result`` if it is a well-formed :class:`StepResult`, else a ``TypeError`` naming
    what is wrong (an env returning Gymnasium's tuple, a non-numeric reward, ...)."""
    if not isinstance(result, StepResult):
        raise TypeError(f"env.step must return turnrl.types.StepResult, got "
                        f"{type(result).__name__}")
    if not valid_messages(result.observation):
        raise TypeError("StepResult.observation must be a list of {'role', 'content': str} "
                        f"messages, got {result.observation!r:.200}")
    if isinstance(result.reward, bool) or not isinstance(result.reward, numbers.Real) \
            or not math.isfinite(float(result.reward)):
        raise TypeError(f"StepResult.reward must be a finite number, got {result.reward!r}")
    if not isinstance(result.info, dict):
        raise TypeError(f"StepResult.info must be a dict, got {type(result.info).__name__}")
    return result


async def in_thread(fn: Callable[..., Any], *args: Any, timeout: float | None = None,
                    **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a daemon thread, awaited with an optional timeout
    (``TimeoutError`` after ``timeout`` seconds). Unlike ``asyncio.to_thread``, a call that
    never returns does not block the event loop's shutdown or the process's exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: tuple[bool, Any]) -> None:
        ok, value = outcome
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            outcome: tuple[bool, Any] = (True, fn(*args, **kwargs))
        except BaseException as error:  # handed to the awaiting episode
            outcome = (False, error)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=work, daemon=True, name="turnrl-env").start()
    try:
        return await asyncio.wait_for(future, timeout)
    except (TimeoutError, asyncio.TimeoutError):  # distinct classes before Python 3.11
        name = getattr(fn, "__qualname__", repr(fn))
        raise TimeoutError(f"{name} did not return within {timeout:g} s "
                           "(env.step_timeout_s)") from None
