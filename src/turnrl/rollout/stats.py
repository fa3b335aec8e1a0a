"""Summary metrics of a batch of trajectories (``rollout/`` and ``reward/`` prefixes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from turnrl.eval.tool_use import tool_metrics
from turnrl.types import EpisodeCounts, Trajectory


def rollout_metrics(trajectories: Sequence[Trajectory],
                    returns: Sequence[float] | None = None) -> dict[str, float]:
    """Means over episodes; group spread is the mean within-group reward std. ``returns``
    are the episodes' scored outcome rewards (default: the env's, summed).
    ``rollout/context_overflow_rate`` (the fraction of episodes that ended because their
    next turn did not fit ``rollout.max_context_tokens``) is there only when it is not 0."""
    if returns is None:
        returns = [t.total_reward for t in trajectories]
    rewards = np.array(returns, dtype=float)
    groups: dict[int, list[float]] = {}
    for traj, ret in zip(trajectories, returns, strict=True):
        groups.setdefault(traj.group_id, []).append(float(ret))
    # a group of one has no spread to measure
    spreads = [float(np.std(g)) for g in groups.values() if len(g) > 1]

    counts = [t.counts or EpisodeCounts() for t in trajectories]

    def mean(values: list[float]) -> float:
        return float(np.mean(values)) if values else 0.0

    # reported on steps where an episode ran out of context (absent means 0)
    overflow = mean([float(c.context_overflow) for c in counts])

    return {
        "reward/mean": float(rewards.mean()),
        "reward/std": float(rewards.std()),
        **({"reward/group_std": mean(spreads),
            "reward/frac_zero_std_groups": mean([float(s == 0.0) for s in spreads])}
           if spreads else {}),
        "rollout/success": mean([float(t.success) for t in trajectories]),
        "rollout/turns": mean([t.num_turns for t in trajectories]),
        "rollout/sampled_tokens": mean([t.num_sampled_tokens for t in trajectories]),
        "rollout/total_tokens": mean([len(t.token_ids) for t in trajectories]),
        "rollout/truncated": mean([float(t.truncated) for t in trajectories]),
        "rollout/invalid_actions": mean([c.invalid_actions for c in counts]),
        "rollout/length_finishes": mean([c.length_finishes for c in counts]),
        "rollout/tool_calls": mean([c.tool_calls for c in counts]),
        "rollout/tool_errors": mean([c.tool_errors for c in counts]),
        **{f"rollout/{key}": value for key, value in tool_metrics(counts).items()
           if key.startswith("tool_calls/")},
        "rollout/repeated_outputs": repeated_outputs(trajectories),
        **({"rollout/context_overflow_rate": overflow} if overflow else {}),
        "rollout/episodes": float(len(trajectories)),
        **segments_per_episode(trajectories),
        **role_metrics(trajectories, returns),
    }


def role_metrics(trajectories: Sequence[Trajectory], returns: Sequence[float]
                 ) -> dict[str, float]:
    """A multi-agent run's ``rollout/role/<agent>/reward`` and ``.../success``: the mean
    return and success of the episodes each agent played; empty for an env of one agent."""
    by_agent: dict[str, list[tuple[float, bool]]] = {}
    for trajectory, value in zip(trajectories, returns, strict=True):
        if trajectory.agent is not None:
            by_agent.setdefault(trajectory.agent, []).append((float(value),
                                                              trajectory.success))
    out: dict[str, float] = {}
    for agent, rows in sorted(by_agent.items()):
        out[f"rollout/role/{agent}/reward"] = float(np.mean([r for r, _ in rows]))
        out[f"rollout/role/{agent}/success"] = float(np.mean([s for _, s in rows]))
    return out


def segments_per_episode(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """``agent/segments_per_episode``: trajectories per agent run (a run whose agent
    rewrote its history has several segments, :mod:`turnrl.agents.capture`); absent for
    env episodes."""
    segmented = [t for t in trajectories if "segments" in t.info]
    runs = sum(1 for t in segmented if t.info.get("segment") == 0)
    return {"agent/segments_per_episode": len(segmented) / runs} if runs else {}


def repeated_outputs(trajectories: Sequence[Trajectory]) -> float:
    """Fraction of episodes whose sampled tokens equal those of another episode of their
    group (a policy that answers every sample of a task the same way)."""
    seen: dict[int, dict[tuple[int, ...], int]] = {}
    for traj in trajectories:
        sampled = tuple(t for t, m in zip(traj.token_ids, traj.loss_mask, strict=True) if m)
        counts = seen.setdefault(traj.group_id, {})
        counts[sampled] = counts.get(sampled, 0) + 1
    repeats = sum(n for counts in seen.values() for n in counts.values() if n > 1)
    return repeats / len(trajectories) if trajectories else 0.0
