"""Evaluate a policy on held-out env seeds: success, reward, turns, tokens, pass@k."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from turnrl.envs.protocol import Env
from turnrl.eval.metrics import summarize_episodes
from turnrl.eval.tool_use import tool_metrics
from turnrl.types import Trajectory


class EpisodeRunner(Protocol):
    """Plays episodes of tasks: the env runner (:class:`~turnrl.rollout.runner.Runner`) or
    an agent program's (:class:`~turnrl.agents.runner.AgentRunner`)."""

    def collect(self, make_env: Callable[[], Env], seeds: Sequence[int], group_size: int, *,
                first_group_id: int = 0, on_done: Callable[[], None] | None = None
                ) -> list[Trajectory]: ...


def tool_use(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """How episodes used their tools (an env with tools, played by the env runner):
    :func:`~turnrl.eval.tool_use.tool_metrics` of their counts (``tool_call_rate``,
    ``tool_calls``, ``valid_call_rate``, ``invalid_actions``, ``tool_calls/<name>``)."""
    return tool_metrics([t.counts for t in trajectories if t.counts is not None])


def evaluate(runner: EpisodeRunner, make_env: Callable[[], Env], seeds: Sequence[int], *,
             samples_per_task: int = 1, pass_k: Sequence[int] = (1,),
             on_done: Callable[[], None] | None = None, tools: bool = False
             ) -> tuple[dict[str, float], list[Trajectory]]:
    """Play ``samples_per_task`` episodes per seed; returns the summary and the episodes
    (``on_done`` is called as each episode ends: a progress display).

    Summary keys (see docs/metrics.md): ``success`` with its 95% interval
    ``success_lo``/``success_hi``, ``reward`` (+ interval), ``turns``, ``tokens``,
    ``pass@k`` (+ interval) for each k, ``episodes`` and ``tasks``; with ``tools`` (the env
    has tools) also :func:`tool_use`'s keys.
    """
    trajectories = runner.collect(make_env, seeds, samples_per_task, on_done=on_done)
    return summarize(trajectories, pass_k=pass_k, tools=tools), trajectories


def summarize(trajectories: Sequence[Trajectory], *, pass_k: Sequence[int] = (1,),
              tools: bool = False) -> dict[str, float]:
    """:func:`evaluate`'s summary of ``trajectories`` (also of several runners' episodes
    together: a multi-agent evaluation's seatings)."""
    records = [  # an agent run of several segments counts once (its first segment)
        {"task": t.seed, "success": t.success,
         "reward": t.total_reward, "turns": t.num_turns, "tokens": t.num_sampled_tokens}
        for t in trajectories if not t.info.get("segment")
    ]
    summary = summarize_episodes(records, pass_k=list(pass_k))
    return {**summary, **(tool_use(trajectories) if tools else {})}
