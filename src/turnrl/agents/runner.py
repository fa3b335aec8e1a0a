"""Runs agent programs on tasks against the model server and turns what they did into
trajectories.

An agent is a Python function (sync or async) that gets an OpenAI-compatible client and a
task, and returns a reward::

    def solve(client, task):
        reply = client.chat.completions.create(model="policy", messages=[...])
        return 1.0 if reply.choices[0].message.content == task["answer"] else 0.0

It may ask for ``base_url`` and ``api_key`` instead of ``client`` (for another SDK), and
return a float, an :class:`AgentResult` (per-call rewards, success, info) or a dict with
those keys (:mod:`turnrl.agents.program`: loading it, its arguments and its result). Each
run has its own capture session; its segments (:mod:`turnrl.agents.capture`) become one
trajectory each, sharing the episode's group.

A run that raises, times out (``timeout_s``) or never calls the model is a *failed episode*
(``Trajectory.error``), not a zero reward: the collector leaves it out (``env.on_error``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from turnrl.agents.capture import Segment, Session
from turnrl.agents.connection import CONNECTION, ERROR_KIND, is_connection_error
from turnrl.agents.program import (
    AgentError,
    AgentResult,
    RunFailed,
    agent_arguments,
    http_pool,
    load_agent,
    openai_client,
    to_result,
)
from turnrl.types import EpisodeCounts, Trajectory

if TYPE_CHECKING:
    from turnrl.agents.server import ModelServer
    from turnrl.agents.workers import AgentWorkers

__all__ = ["AgentError", "AgentResult", "AgentRunner", "RunFailed", "load_agent", "to_result"]

log = logging.getLogger(__name__)

class AgentRunner:
    """Plays agent runs on tasks through ``server`` and records them as trajectories.

    Args:
        server: the running model server (the runs' HTTP calls go there).
        agent: the agent function (:func:`load_agent`).
        tasks: the task list; task seed ``s`` is ``tasks[s % len(tasks)]``.
        name: the trajectories' ``env_id``.
        timeout_s: a run still going after this long fails (None: no limit).
        model: the model name the agent's client is told to use.
        sampling: ``(temperature, top_p)`` every call is sampled with, whatever the agent
            asks (training: the learner's temperature); None: the agent's.
        workers: worker processes that run the agent (:mod:`turnrl.agents.workers`); None:
            threads of this process (an ``async`` agent: the server's event loop).
        seed: seeds each run's sampling from ``(seed, task seed, group id, member)``, so a
            run's samples do not depend on the timing of the others (None: the engine's
            draws, in the order requests arrive).
    """

    def __init__(self, server: ModelServer, agent: Callable[..., Any], tasks: Sequence[Any], *,
                 name: str = "agent", timeout_s: float | None = None,
                 model: str = "policy", sampling: tuple[float, float] | None = None,
                 workers: AgentWorkers | None = None, seed: int | None = None) -> None:
        if not tasks:
            raise AgentError("the agent has no tasks (agent.tasks is empty)")
        self.server, self.agent, self.tasks, self.name = server, agent, tasks, name
        self.timeout_s, self.model, self.sampling = timeout_s, model, sampling
        self.arguments = agent_arguments(agent, name)
        self.is_async = inspect.iscoroutinefunction(agent)
        self.workers, self.seed = workers, seed
        self._http: Any = None  # the clients' connection pool (:func:`http_pool`)
        self._http_lock = threading.Lock()

    def close(self) -> None:
        """Close the clients' connection pool (a sync run still going, past its timeout, is
        left to end in its daemon thread)."""
        http, self._http = self._http, None
        if http is None:
            return
        if self.is_async:
            with contextlib.suppress(RuntimeError):  # the server (and its loop) is gone already
                self.server.run(http.aclose()).result(timeout=10)
        else:
            http.close()

    def collect(self, _make_env: object, seeds: Sequence[int], group_size: int, *,
                first_group_id: int = 0, on_done: Callable[[], None] | None = None
                ) -> list[Trajectory]:
        """Run ``group_size`` copies of the agent on each task seed, concurrently; the
        trajectories grouped seed by seed (a run with several segments gives several;
        ``on_done()`` as each run ends)."""
        jobs = [(seed, first_group_id + i, member) for i, seed in enumerate(seeds)
                for member in range(group_size)]
        self.server.sampling = self.sampling
        runs = self.server.run(self._collect(jobs, on_done)).result()
        return [t for run in runs for t in run]

    async def _collect(self, jobs: list[tuple[int, int, int]],
                       on_done: Callable[[], None] | None = None) -> list[list[Trajectory]]:
        async def play(seed: int, group_id: int, member: int) -> list[Trajectory]:
            found = await self.run_episode(seed, group_id, member)
            if on_done is not None:
                on_done()
            return found

        return list(await asyncio.gather(*(play(*job) for job in jobs)))

    async def run_episode(self, seed: int, group_id: int, member: int = 0) -> list[Trajectory]:
        """One agent run on task ``seed`` (``member`` of its group): its segments'
        trajectories, or one failed one."""
        task = self.tasks[seed % len(self.tasks)]
        key, session = self.server.open_session(
            None if self.seed is None else hash((self.seed, seed, group_id, member)))
        try:
            result = to_result(await self._call(key, task))
            return trajectories(session, result, env_id=self.name, seed=seed,
                                group_id=group_id, main=self.model)
        except Exception as error:
            if isinstance(error, TimeoutError):
                reason = f"did not finish within {self.timeout_s:g} s (agent.timeout_s)"
            else:
                reason = str(error) if isinstance(error, RunFailed) \
                    else f"{type(error).__name__}: {error}"
            connection = error.connection if isinstance(error, RunFailed) \
                else is_connection_error(error)
            message = f"agent {self.name} on task {seed}: {reason}"
            log.warning("%s", message)
            return [Trajectory(env_id=self.name, seed=seed, group_id=group_id, messages=[],
                               terminated=False, truncated=True, error=message,
                               info={ERROR_KIND: CONNECTION} if connection else {})]
        finally:
            self.server.close_session(key)

    async def _call(self, key: str, task: Any) -> Any:
        url = self.server.url(key)
        if self.workers is not None:
            return await asyncio.wait_for(self.workers.call(url, key, task), self.timeout_s)
        if self.is_async:
            client = self._client(url, key, asynchronous=True) if "client" in self.arguments \
                else None
            return await asyncio.wait_for(self.agent(*self._args(url, key, task, client)),
                                          self.timeout_s)

        def run() -> Any:  # the client shares the runner's pool: nothing to close
            client = self._client(url, key, asynchronous=False) if "client" in self.arguments \
                else None
            return self.agent(*self._args(url, key, task, client))

        return await asyncio.wait_for(in_daemon_thread(run), self.timeout_s)

    def _args(self, url: str, key: str, task: Any, client: Any) -> list[Any]:
        given = {"client": client, "base_url": url, "api_key": key, "task": task}
        return [given[name] for name in self.arguments]

    def _client(self, url: str, key: str, *, asynchronous: bool) -> Any:
        with self._http_lock:
            if self._http is None:
                self._http = http_pool(asynchronous=asynchronous)
        return openai_client(url, key, self._http, asynchronous=asynchronous,
                             timeout_s=self.timeout_s)


def in_daemon_thread(fn: Callable[[], Any]) -> asyncio.Future[Any]:
    """``fn()`` in a daemon thread of its own, as a future of the running loop. A run past
    its timeout is abandoned there (it cannot be killed) and never blocks the exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if not future.done():  # not given up on (a timeout cancels it)
            if error is None:
                future.set_result(value)
            else:
                future.set_exception(error)

    def target() -> None:
        try:
            value, error = fn(), None
        except BaseException as raised:  # handed to the awaiting run
            value, error = None, raised
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=target, name="turnrl-agent", daemon=True).start()
    return future


def trajectories(session: Session, result: AgentResult, *, env_id: str, seed: int,
                 group_id: int, main: str | None = None) -> list[Trajectory]:
    """One trajectory per sampled segment of ``session``. Each turn's reward is the
    call's ``call_rewards`` entry (if given); the outcome ``result.reward`` is added at the
    last turn of every segment (each is trained on the episode's outcome). A segment of
    another model than ``main`` (a separate policy's) names it in ``Trajectory.policy``."""
    segments = session.sampled_segments()
    if not segments:
        raise AgentError("the agent never called the model")
    per_call = call_rewards(session, result.call_rewards)
    thrown = discarded_calls(session, result.discarded)
    success = result.success if result.success is not None else result.reward > 0
    out = []
    for index, segment in enumerate(segments):
        untrained = {k for k, (c, choice) in enumerate(zip(segment.calls, segment.choices,
                                                           strict=True))
                     if ((c, None) in thrown or (c, choice) in thrown) and c not in per_call}
        trained = [k for k in range(len(segment.calls)) if k not in untrained]
        if not trained:  # every reply of it thrown away: nothing to train
            continue
        rewards = [per_call.get(c, 0.0) for c in segment.calls]
        rewards[trained[-1]] += float(result.reward)  # the outcome, at its last kept reply
        out.append(_trajectory(segment, rewards, env_id=env_id, seed=seed, group_id=group_id,
                               success=bool(success),
                               info={**result.info, "segment": index,
                                     "segments": len(segments)},
                               policy=None if segment.model in (None, main) else segment.model,
                               untrained=untrained))
    if not out:
        raise AgentError("the agent discarded every reply, so the run has nothing to train")
    return out


def discarded_calls(session: Session, discarded: Sequence[str] | None
                    ) -> set[tuple[int, int | None]]:
    """The agent's ``discarded`` reply ids as ``(call, choice)`` (choice None: every choice
    of the call); an id no reply of the run carried fails the run, naming it."""
    out: set[tuple[int, int | None]] = set()
    for name in discarded or []:
        rid, _, choice = name.partition("/")
        if rid not in session.response_ids or (choice and not choice.isdigit()):
            raise AgentError(f"discarded names {name!r}, which no reply of this run carried; "
                             "give reply.id, or '<id>/<k>' for choice k of an n > 1 call")
        out.add((session.response_ids[rid], int(choice) if choice else None))
    return out


def call_rewards(session: Session, given: Sequence[float] | Mapping[str, float] | None
                 ) -> dict[int, float]:
    """Each answered call's reward (by its index in ``session``) from the agent's
    ``call_rewards``: keyed by the response id its reply carried (``reply.id``), or a list
    with one entry per answered call in the order they were made, which only a run whose
    calls never overlapped can give (the server answered them in that order). A refused call
    (an error reply) is never answered, so it never counts."""
    if given is None:
        return {}
    if isinstance(given, Mapping):
        unknown = sorted(set(given) - set(session.response_ids))
        if unknown:
            raise AgentError(f"call_rewards names response id(s) {unknown[:3]} that no reply of "
                             f"this run carried (its replies: "
                             f"{sorted(session.response_ids)[:3]}...); key each reward by its "
                             "reply's id (reply.id)")
        return {session.response_ids[rid]: float(r) for rid, r in given.items()}
    if session.overlapped:
        raise AgentError("call_rewards is a list, but the agent's calls overlapped, so their "
                         "order is not the order they were answered; key the rewards by each "
                         "reply's id instead: {reply.id: reward}")
    if len(given) != len(session.answered):
        raise AgentError(f"call_rewards has {len(given)} entries, but the agent made "
                         f"{len(session.answered)} answered model calls (refused calls, "
                         "answered with an error, do not count)")
    return {call: float(r) for call, r in zip(session.answered, given, strict=True)}


def _trajectory(segment: Segment, rewards: list[float], *, env_id: str, seed: int,
                group_id: int, success: bool, info: dict[str, Any],
                policy: str | None = None, untrained: set[int] | None = None) -> Trajectory:
    ledger = segment.ledger
    mask = [0 if turn in (untrained or ()) else m
            for m, turn in zip(ledger.loss_mask, ledger.turn_index, strict=True)]
    return Trajectory(
        env_id=env_id, seed=seed, group_id=group_id, messages=list(ledger.messages),
        token_ids=list(ledger.token_ids), loss_mask=mask,
        logprobs=list(ledger.logprobs), turn_index=list(ledger.turn_index),
        turn_rewards=rewards, terminated=True, truncated=False, success=success,
        counts=tool_counts(segment), policy_versions=list(segment.versions) or None,
        info=info, policy=policy)


def tool_counts(segment: Segment) -> EpisodeCounts:
    """The tool calls of a segment's replies, as the env runner counts an env's
    (``rollout/tool_calls``, ``tool_call_rate``, ``tool_calls/<name>``): every call the
    server parsed from a reply is an attempt that ran (the agent runs its tools; what they
    returned is in the next call's ``tool`` messages)."""
    counts = EpisodeCounts()
    for names in segment.tool_calls:
        counts.tool_calls += len(names)
        counts.tool_attempts += bool(names)
        counts.valid_tool_calls += bool(names)
        for name in names:
            counts.tool_uses[name] = counts.tool_uses.get(name, 0) + 1
    return counts
