"""Rollout workers: processes (async Ray actors) that each hold an engine and play groups.

A :class:`RolloutWorker` plays whole groups (``group_size`` episodes of one task seed) with
its own :class:`~turnrl.rollout.runner.Runner` and engine; every group it is playing shares
one event loop, so the engine batches all of their turns. New weights arrive between two
decoding steps (:meth:`RolloutWorker.load_weights`): episodes in the middle of a turn go on
with them, and every sampled token records the version it was sampled with
(``Trajectory.policy_versions``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import torch

from turnrl.envs.protocol import Env
from turnrl.rollout.engine import SamplingParams
from turnrl.rollout.engines import build_engine
from turnrl.rollout.runner import Runner
from turnrl.types import Trajectory


class RolloutWorker:
    """Plays groups of episodes with its own copy of the policy.

    Args:
        policy: the policy module (a copy; its weights are replaced by :meth:`load_weights`).
        tokenizer: the policy's tokenizer.
        make_env: builds one env, used when ``env_workers`` is empty.
        params: sampling parameters of every agent turn.
        runner_kwargs: the runner's keyword arguments (context length, timeouts, seeding).
        engine_kwargs: the engine's options (:func:`~turnrl.rollout.engines.build_engine`).
        env_workers: Ray handles of env workers; episodes are spread over them in turn.
        threads: torch CPU threads of this process.
        device: where the policy runs (``cpu`` or ``cuda``).
        name: this worker's name in logs and metrics.
    """

    def __init__(self, policy: torch.nn.Module, tokenizer: Any, make_env: Callable[[], Env],
                 params: SamplingParams, runner_kwargs: dict, engine_kwargs: dict, *,
                 env_workers: list | None = None, threads: int = 1, device: str = "cpu",
                 name: str = "rollout-0") -> None:
        torch.set_num_threads(threads)
        self.name = name
        # the vllm engine holds its own copy on the device: the worker's stays on the CPU
        own_copy = engine_kwargs.get("kind", "hf") != "hf"
        self.policy = policy.to("cpu" if own_copy else device).eval()
        self.engine = build_engine(self.policy, tokenizer, engine_kwargs, device=device)
        self.runner = Runner(self.engine, tokenizer, params, **runner_kwargs)
        self.make_env = make_env
        self.env_workers = list(env_workers or [])
        self._described: tuple | None = None
        self._next_env_worker = 0
        self.started = time.perf_counter()
        self.busy_s = 0.0  # wall time with at least one group in flight
        self._running = 0
        self._busy_since = 0.0
        self.counts = {"groups": 0, "episodes": 0, "sampled_tokens": 0}
        self._weights_arrived = asyncio.Event()

    async def run_group(self, seed: int, group_id: int, group_size: int, *,
                        min_version: int = 0) -> list[Trajectory]:
        """``group_size`` episodes of task ``seed`` (members 0..G−1 of group ``group_id``),
        started once this worker has weights of at least ``min_version``.

        If one episode's env worker is lost, the whole group is cancelled and the error
        raised, so the caller re-runs the group from its seed (nothing is half counted)."""
        while self.engine.version < min_version:  # its weights are on their way
            await self._weights_arrived.wait()
        self._enter()
        tasks = [asyncio.ensure_future(self.runner.run_episode(await self._env(), seed,
                                                               group_id, member=member))
                 for member in range(group_size)]
        try:
            trajectories = list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            self._leave()
        trajectories = [dataclasses.replace(traj, worker=self.name) for traj in trajectories]
        self.counts["groups"] += 1
        self.counts["episodes"] += len(trajectories)
        self.counts["sampled_tokens"] += sum(t.num_sampled_tokens for t in trajectories)
        return trajectories

    async def load_weights(self, state: dict[str, torch.Tensor], version: int) -> int:
        """Take the learner's weights of ``version`` (between two decoding steps)."""
        device = next(self.policy.parameters()).device
        self.policy.load_state_dict({k: v.to(device) for k, v in state.items()})
        self.engine.load_weights(self.policy)  # hf: shares it; vllm: copies it
        self.engine.version = version
        self._weights_arrived.set()
        self._weights_arrived = asyncio.Event()
        return version

    async def version(self) -> int:
        return self.engine.version

    async def stats(self) -> dict[str, float]:
        """Counters since start: groups, episodes, sampled tokens, busy and wall seconds."""
        busy = self.busy_s + (time.perf_counter() - self._busy_since if self._running else 0)
        engine = {k: float(self.engine.stats.get(k, 0))  # type: ignore[attr-defined]
                  for k in ("prompt_tokens", "cached_tokens")}
        return {**{k: float(v) for k, v in self.counts.items()}, **engine, "busy_s": busy,
                "wall_s": time.perf_counter() - self.started}

    async def _env(self) -> Env:
        if not self.env_workers:
            return self.make_env()
        from turnrl.distributed.env_worker import RemoteEnv

        if self._described is None:
            self._described = await self.env_workers[0].describe.remote()
        worker = self.env_workers[self._next_env_worker % len(self.env_workers)]
        self._next_env_worker += 1
        spec, tools = self._described
        return RemoteEnv(worker, spec, tools, prefix=f"{self.name}/")  # type: ignore[return-value]

    def _enter(self) -> None:
        if self._running == 0:
            self._busy_since = time.perf_counter()
        self._running += 1

    def _leave(self) -> None:
        self._running -= 1
        if self._running == 0:
            self.busy_s += time.perf_counter() - self._busy_since
