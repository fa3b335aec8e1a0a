"""The multi-turn runner: drives episodes concurrently and records their token ledgers."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

from transformers import PreTrainedTokenizerBase

from turnrl.envs.protocol import Env, HasPrivilegedInfo, HasStateKey, HasTools
from turnrl.eval.tool_use import count_tool_use
from turnrl.models.chat import TemplateLedger
from turnrl.rollout.engine import Engine, SamplingParams
from turnrl.rollout.guard import EnvCalls, EnvFailure, WorkerLost, episode_error, guarded
from turnrl.types import EpisodeCounts, Trajectory

__all__ = ["ANSWER_KEYS", "EnvFailure", "Runner", "WorkerLost", "stable_hash"]

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
        max_turns: a cap on agent turns below the env's ``spec.max_turns`` (an episode cut
            by it is truncated); None plays up to the env's. A horizon curriculum changes
            it between steps.

    Fault isolation: every env call goes through :class:`~turnrl.rollout.guard.EnvCalls`;
    an exception (or timeout, or a malformed ``StepResult``) in ``env.reset``, ``env.step``
    or a tool ends that episode only. Its trajectory keeps what
    was played, is marked ``truncated`` with its ``error`` (the message, with the env id,
    seed and turn) and is logged with the command that replays it.
    """

    _episode_ids = itertools.count()

    def __init__(self, engine: Engine, tokenizer: PreTrainedTokenizerBase,
                 params: SamplingParams, *, max_context_tokens: int = 2048,
                 offload_env_steps: bool = False, step_timeout_s: float | None = None,
                 sampling_seed: int | None = None, max_turns: int | None = None) -> None:
        self.engine = engine
        self.max_turns = max_turns  # a cap below the env's max_turns (None: the env's)
        self.tokenizer = tokenizer
        self.params = params
        self.max_context_tokens = max_context_tokens
        self.calls = EnvCalls(step_timeout_s=step_timeout_s, offload=offload_env_steps)
        self.sampling_seed = sampling_seed

    def collect(self, make_env: Callable[[], Env], seeds: Sequence[int], group_size: int, *,
                first_group_id: int = 0, on_done: Callable[[], None] | None = None
                ) -> list[Trajectory]:
        """Run ``group_size`` episodes for each task seed; returns them grouped, seed by seed
        (``on_done()`` as each one ends).

        Episode ``j`` of seed ``seeds[i]`` has ``group_id = first_group_id + i``.
        """
        jobs = [(seed, first_group_id + i, member) for i, seed in enumerate(seeds)
                for member in range(group_size)]
        return asyncio.run(self._collect(make_env, jobs, on_done))

    async def _collect(self, make_env: Callable[[], Env], jobs: list[tuple[int, int, int]],
                       on_done: Callable[[], None] | None = None) -> list[Trajectory]:
        async def play(seed: int, group_id: int, member: int) -> Trajectory:
            trajectory = await self.run_episode(make_env(), seed, group_id, member=member)
            if on_done is not None:
                on_done()
            return trajectory

        return list(await asyncio.gather(*(play(*job) for job in jobs)))

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
            await self.calls.close(env)

    async def _play(self, env: Env, seed: int, group_id: int, member: int) -> Trajectory:
        messages, reset_info = await self.calls.reset(env, seed)
        # a capability declared on the spec is implemented (check_env checks that they agree)
        privileged = (await self.calls.call(env, cast(HasPrivilegedInfo, env).privileged_info)
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
        limit = min(env.spec.max_turns, self.max_turns or env.spec.max_turns)
        for turn in range(limit):
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
                result = await self.calls.step(env, action)
            except EnvFailure as failure:  # this episode ends; the others go on
                error = episode_error(env, seed, f"env.step at turn {turn}", failure)
                turn_rewards.append(0.0)
                terminated, truncated, step_info = False, True, {}
                break
            step_info = result.info
            counts.invalid_actions += bool(step_info.get("invalid_action", False))
            counts.tool_calls += int(step_info.get("tool_calls", 0))
            count_tool_use(counts, step_info)
            answer_info.update({k: step_info[k] for k in ANSWER_KEYS if k in step_info})
            turn_rewards.append(float(result.reward))
            terminated = bool(result.terminated)
            truncated = bool(result.truncated) or (not terminated and turn == limit - 1)
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

