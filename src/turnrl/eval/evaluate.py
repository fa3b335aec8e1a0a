"""Evaluate a policy on held-out env seeds: success, reward, turns, tokens, pass@k."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from turnrl.envs.protocol import Env
from turnrl.eval.metrics import summarize_episodes
from turnrl.rollout.runner import Runner
from turnrl.types import Trajectory


def evaluate(runner: Runner, make_env: Callable[[], Env], seeds: Sequence[int], *,
             samples_per_task: int = 1, pass_k: Sequence[int] = (1,)
             ) -> tuple[dict[str, float], list[Trajectory]]:
    """Play ``samples_per_task`` episodes per seed; returns the summary and the episodes.

    Summary keys (see docs/metrics.md): ``success`` with its 95% interval
    ``success_lo``/``success_hi``, ``reward`` (+ interval), ``turns``, ``tokens``,
    ``pass@k`` (+ interval) for each k, ``episodes`` and ``tasks``.
    """
    trajectories = runner.collect(make_env, seeds, samples_per_task)
    records = [
        {"task": t.seed, "success": t.success,
         "reward": t.total_reward, "turns": t.num_turns, "tokens": t.num_sampled_tokens}
        for t in trajectories
    ]
    return summarize_episodes(records, pass_k=list(pass_k)), trajectories
