"""Env workers: processes (Ray actors) that host many envs, and the proxy the runner plays.

An :class:`EnvWorker` keeps one env per running episode, keyed by an episode id, and steps it
in its own thread pool (a threaded Ray actor), so slow tools, sandboxes and retrievers live
in the worker, never in the process that generates. A :class:`RemoteEnv` looks like an env to
the :class:`~turnrl.rollout.runner.Runner`: ``reset``/``step``/``close`` are coroutines that
await the worker, and the cheap queries the runner makes between turns (``state_key``,
``privileged_info``, ``tool_schemas``) are answered from what the worker sent back with
``reset`` and ``step``. A worker that dies takes its episodes with it: the proxy raises
:class:`~turnrl.rollout.runner.WorkerLost` and the episode's group is re-run from its seed.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from turnrl.envs.protocol import Env, EnvSpec
from turnrl.rollout.runner import WorkerLost
from turnrl.types import Message, StepResult

# how many env calls one worker runs at once (its thread pool): slow steps overlap
ENV_WORKER_CONCURRENCY = 64


class EpisodeNotHosted(LookupError):
    """The worker has no env for this episode: it restarted since the episode began."""


class EnvWorker:
    """Hosts the envs of many episodes; each call names its episode.

    Args:
        make_env: builds one env (called once per episode).
    """

    def __init__(self, make_env: Callable[[], Env]) -> None:
        self.make_env = make_env
        self.envs: dict[str, Env] = {}
        self.lock = threading.Lock()
        probe = make_env()
        self._spec = probe.spec
        self._tools = (probe.tool_schemas()  # type: ignore[attr-defined]
                       if probe.spec.tools else None)
        probe.close()

    def describe(self) -> tuple[EnvSpec, list[dict] | None]:
        """The spec of this worker's envs and their tool schemas (None without tools)."""
        return self._spec, self._tools

    def reset(self, episode: str, seed: int) -> tuple[list[Message], dict[str, Any], dict]:
        """A fresh env for ``episode``, reset with ``seed``; returns its messages, info and
        the extras the proxy answers from (state key, privileged info)."""
        env = self.make_env()
        with self.lock:
            self.envs[episode] = env
        messages, info = env.reset(seed=seed)
        extras = self._extras(env)
        if env.spec.has_privileged_info:
            extras["privileged_info"] = _outcome(env.privileged_info)  # type: ignore[attr-defined]
        return messages, info, extras

    def step(self, episode: str, action: str) -> tuple[StepResult, dict]:
        env = self._env(episode)
        return env.step(action), self._extras(env)

    def close(self, episode: str) -> None:
        with self.lock:
            env = self.envs.pop(episode, None)
        if env is not None:
            env.close()

    def open_episodes(self) -> int:
        return len(self.envs)

    def _env(self, episode: str) -> Env:
        env = self.envs.get(episode)
        if env is None:  # this worker restarted since the episode began
            raise EpisodeNotHosted(f"episode {episode} is not hosted here (the env worker "
                                   "restarted)")
        return env

    @staticmethod
    def _extras(env: Env) -> dict:
        return ({"state_key": _outcome(env.state_key)}  # type: ignore[attr-defined]
                if env.spec.has_state_key else {})


def _outcome(fn: Callable[[], Any]) -> tuple[bool, Any]:
    """(True, value) or (False, the exception): a failing query fails the episode only when
    the runner asks for it, as it would in-process."""
    try:
        return True, fn()
    except Exception as error:
        return False, error


class RemoteEnv:
    """An env played in an :class:`EnvWorker` actor (what ``make_env`` returns in a rollout
    worker that uses env workers).

    Args:
        worker: the env worker's Ray actor handle.
        spec: the spec of the worker's envs (:meth:`EnvWorker.describe`).
        tools: their tool schemas, or None.
    """

    _ids = itertools.count()

    def __init__(self, worker: Any, spec: EnvSpec, tools: list[dict] | None,
                 prefix: str = "") -> None:
        self.worker = worker
        self.spec = spec
        self._tools = tools
        self.episode = f"{prefix}{next(self._ids)}"
        self._extras: dict = {}
        self._open = False

    async def reset(self, *, seed: int | None = None,
                    options: dict[str, Any] | None = None) -> tuple[list[Message], dict]:
        self._open = True
        messages, info, self._extras = await self._remote("reset", self.episode, seed)
        return messages, info

    async def step(self, action: str) -> StepResult:
        result, self._extras = await self._remote("step", self.episode, action)
        return result

    async def close(self) -> None:
        if self._open:
            self._open = False
            await self._remote("close", self.episode)

    def state_key(self) -> Any:
        return self._answer("state_key")

    def privileged_info(self) -> str:
        return self._answer("privileged_info")

    def tool_schemas(self) -> list[dict] | None:
        return self._tools

    def _answer(self, name: str) -> Any:
        ok, value = self._extras[name]
        if not ok:
            raise value
        return value

    async def _remote(self, method: str, *args: Any) -> Any:
        import ray

        try:
            return await getattr(self.worker, method).remote(*args)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as error:
            raise WorkerLost(f"env worker lost during {method}: {error}") from error
        except EpisodeNotHosted as error:  # the worker restarted since the episode began
            raise WorkerLost(str(error)) from error
