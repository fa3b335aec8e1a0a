"""The multi-turn runner: drives episodes concurrently and records their token ledgers."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import inspect
import itertools
import logging
import math
import numbers
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

from transformers import PreTrainedTokenizerBase

from turnrl.envs.protocol import Env, HasPrivilegedInfo, HasStateKey, HasTools
from turnrl.models.chat import TemplateLedger
from turnrl.rollout.engine import Engine, SamplingParams
from turnrl.types import EpisodeCounts, StepResult, Trajectory

log = logging.getLogger("turnrl")


class EnvFailure(Exception):
    """An env call raised, timed out or returned a malformed result: its episode ends."""


class WorkerLost(Exception):
    """The process hosting an env died (a Ray env worker): not the env's fault, so the
    episode is not scored as failed; it is re-run from its seed by whoever submitted it."""

# what reward functions read (turnrl.rewards): the gold answer from reset info; the agent's
# final answer and the evidence it retrieved from step info. Copied into trajectory.info.
ANSWER_KEYS = ("answer", "final_answer", "retrieved")


def stable_hash(key: Hashable) -> int:
    """A process-independent 63-bit id of an env state key (``hash`` is salted per process)."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class Runner:
    """Plays episodes of text environments with an :class:`Engine`.

    Every episode is an asyncio task; each turn it sends its whole ledger as the prompt, so
    the engine sees all runnable episodes at once and batches them.

    Args:
        engine: generates the agent's turns.
        tokenizer: renders messages with its chat template.
        params: sampling parameters of every agent turn.
        max_context_tokens: an episode whose next prompt would not fit is truncated.
        offload_env_steps: run every env's ``reset``/``step`` in worker threads. Envs whose
            spec declares ``slow_steps`` (retrieval, code execution) always run there, so
            they do not stall the other episodes' generation; for fast envs the thread
            hand-off would only split engine batches, so they run inline by default.
        step_timeout_s: a limit on each env call (then every call runs in a worker thread);
            a call past it fails its episode. A hung call's thread cannot be killed: it is a
            daemon thread, left behind, that never blocks the run or its exit.
        sampling_seed: derive every request's ``SamplingParams.seed`` from (this seed, the
            task seed, the episode's index in its group, the turn), so the samples do not
            depend on the order in which episodes reach the engine (threads, timeouts).
            None leaves the seeding to the engine.

    Fault isolation: an exception (or timeout, or a malformed ``StepResult``) in
    ``env.reset``, ``env.step`` or a tool ends that episode only. Its trajectory keeps what
    was played, is marked ``truncated`` with its ``error`` (the message, with the env id,
    seed and turn) and is logged with the command that replays it.
    """

    _episode_ids = itertools.count()

    def __init__(self, engine: Engine, tokenizer: PreTrainedTokenizerBase,
                 params: SamplingParams, *, max_context_tokens: int = 2048,
                 offload_env_steps: bool = False, step_timeout_s: float | None = None,
                 sampling_seed: int | None = None) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.params = params
        self.max_context_tokens = max_context_tokens
        self.offload_env_steps = offload_env_steps
        self.step_timeout_s = step_timeout_s
        self.sampling_seed = sampling_seed

    def collect(self, make_env: Callable[[], Env], seeds: Sequence[int], group_size: int, *,
                first_group_id: int = 0) -> list[Trajectory]:
        """Run ``group_size`` episodes for each task seed; returns them grouped, seed by seed.

        Episode ``j`` of seed ``seeds[i]`` has ``group_id = first_group_id + i``.
        """
        jobs = [(seed, first_group_id + i, member) for i, seed in enumerate(seeds)
                for member in range(group_size)]
        return asyncio.run(self._collect(make_env, jobs))

    async def _collect(self, make_env: Callable[[], Env],
                       jobs: list[tuple[int, int, int]]) -> list[Trajectory]:
        return list(await asyncio.gather(
            *(self.run_episode(make_env(), seed, group_id, member=member)
              for seed, group_id, member in jobs)
        ))

    async def run_episode(self, env: Env, seed: int, group_id: int, *,
                          member: int = 0) -> Trajectory:
        """One episode from ``env.reset(seed=seed)`` to termination or truncation (the
        ``member``-th of its group); a failure before the first turn gives an empty
        trajectory with its ``error``."""
        try:
            return await self._play(env, seed, group_id, member)
        except EnvFailure as failure:  # reset, privileged_info, tool_schemas, state_key
            message = episode_error(env, seed, "outside env.step", failure)
            return Trajectory(env_id=env.spec.id, seed=seed, group_id=group_id, messages=[],
                              token_ids=[], loss_mask=[], logprobs=[], turn_index=[],
                              turn_rewards=[], terminated=False, truncated=True,
                              error=message)
        finally:
            try:
                await self._call(env, env.close)
            except EnvFailure as failure:
                log.warning("env %s seed %s: %s", env.spec.id, seed, failure)

    async def _play(self, env: Env, seed: int, group_id: int, member: int) -> Trajectory:
        reset = await self._call(env, env.reset, seed=seed)
        if not (isinstance(reset, tuple) and len(reset) == 2 and isinstance(reset[1], dict)
                and valid_messages(reset[0])):
            raise EnvFailure(f"env.reset must return (messages, info: dict) with messages a "
                             f"list of {{'role', 'content': str}}, got {reset!r:.200}")
        messages, reset_info = reset
        # a capability declared on the spec is implemented (check_env checks that they agree)
        privileged = (await self._call(env, cast(HasPrivilegedInfo, env).privileged_info)
                      if env.spec.has_privileged_info else None)
        tools = guarded(cast(HasTools, env).tool_schemas) if env.spec.tools else None
        ledger = TemplateLedger(self.tokenizer, tools=tools)
        ledger.add_messages(messages, turn=-1, add_generation_prompt=False)
        session = f"episode-{next(self._episode_ids)}"
        try:
            trajectory = await self._turns(env, seed, group_id, ledger, session, reset_info,
                                           member)
        finally:
            self.engine.end_session(session)
        # for a privileged critic; never in the policy's context
        return dataclasses.replace(trajectory, privileged_info=privileged)

    async def _call(self, env: Env, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run an env method inline, or in a worker thread for slow envs, when asked, or
        under a timeout; a coroutine method (a remote env) is awaited. Any failure is raised
        as :class:`EnvFailure`, except :class:`WorkerLost`."""
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
        if self.offload_env_steps or env.spec.slow_steps or self.step_timeout_s:
            try:
                return await in_thread(fn, *args, timeout=self.step_timeout_s, **kwargs)
            except Exception as error:
                raise env_failure(fn, error) from error
        return guarded(fn, *args, **kwargs)

    def _open_turn(self, ledger: TemplateLedger, turn: int) -> bool:
        """Append the assistant header of the next turn if that turn fits the context."""
        full, header = ledger.delta([], add_generation_prompt=True)
        needed = len(ledger.token_ids) + len(header) + self.params.max_new_tokens
        if needed > self.max_context_tokens:
            return False
        ledger.commit([], full, header, turn=turn - 1)
        return True

    async def _turns(self, env: Env, seed: int, group_id: int, ledger: TemplateLedger,
                     session: str, reset_info: dict[str, Any], member: int) -> Trajectory:
        eos = self.tokenizer.eos_token_id
        turn_rewards: list[float] = []
        step_info: dict[str, Any] = {}
        terminated = truncated = False
        counts = EpisodeCounts()
        error: str | None = None
        answer_info: dict[str, Any] = {k: reset_info[k] for k in ANSWER_KEYS if k in reset_info}
        state_keys: list[int] = []
        versions: list[int] = []  # the engine's weight version of each sampled token
        for turn in range(env.spec.max_turns):
            if not self._open_turn(ledger, turn):
                truncated, counts.context_overflow = True, 1
                break
            if env.spec.has_state_key:
                try:
                    key = guarded(cast(HasStateKey, env).state_key)  # declared by the spec
                except EnvFailure as failure:  # keep the turns played so far
                    error = episode_error(env, seed, f"state_key at turn {turn}", failure)
                    truncated = True
                    break
                state_keys.append(stable_hash(key))
            params = self.params if self.sampling_seed is None else dataclasses.replace(
                self.params, seed=stable_hash((self.sampling_seed, seed, member, turn)))
            completion = await self.engine.generate(ledger.token_ids, params, session=session)
            action = ledger.add_sampled(completion.token_ids, completion.logprobs, turn=turn,
                                        eos_token_id=eos)
            counts.length_finishes += completion.finish_reason == "length"
            if completion.versions is not None:
                versions += completion.versions
            try:
                result = await self._call(env, env.step, action)
                check_step_result(result)
            except (EnvFailure, TypeError) as failure:  # this episode ends; the others go on
                error = episode_error(env, seed, f"env.step at turn {turn}", failure)
                turn_rewards.append(0.0)
                terminated, truncated, step_info = False, True, {}
                break
            step_info = result.info
            counts.invalid_actions += bool(step_info.get("invalid_action", False))
            counts.tool_calls += int(step_info.get("tool_calls", 0))
            counts.tool_errors += bool(step_info.get("tool_error", False))
            answer_info.update({k: step_info[k] for k in ANSWER_KEYS if k in step_info})
            turn_rewards.append(float(result.reward))
            terminated = bool(result.terminated)
            truncated = bool(result.truncated) or (
                not terminated and turn == env.spec.max_turns - 1
            )
            ledger.add_messages(result.observation, turn=turn, add_generation_prompt=False)
            if terminated or truncated:
                break
        return Trajectory(
            env_id=env.spec.id, seed=seed, group_id=group_id, messages=ledger.messages,
            token_ids=ledger.token_ids, loss_mask=ledger.loss_mask, logprobs=ledger.logprobs,
            turn_index=ledger.turn_index, turn_rewards=turn_rewards, terminated=terminated,
            truncated=truncated, success=bool(step_info.get("success", False)) and error is None,
            error=error, counts=counts,
            state_keys=state_keys if env.spec.has_state_key else None,
            # one per sampled token (the positions where loss_mask is 1), in order
            policy_versions=versions or None, info=answer_info,
        )


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
