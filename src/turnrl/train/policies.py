"""Separate trained policies in one run (``multi.policies``, docs/multi_agent.md).

Each agent of a multi-agent env is played by one player; a player named in
``multi.policies`` is a policy of its own besides the run's model (``main``): its own weights
(a LoRA adapter on the shared frozen base, or a full copy of the model), SFT on its own
agents' demonstrations, learner, optimizer, KL reference and engine, and its part of every
checkpoint (``policies/<name>/``). The runner stamps each trajectory with the policy that
sampled it (``Trajectory.policy``); :func:`split_policies` hands each policy its own
episodes, so no policy ever trains on another's tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from turnrl.train.collect import Collected
from turnrl.train.multi import MAIN
from turnrl.types import Trajectory


def policy_of(trajectory: Trajectory) -> str:
    """The trained policy that sampled ``trajectory`` (``main`` when none is named)."""
    return trajectory.policy or MAIN


def split_policies(collected: Collected, names: Sequence[str]
                   ) -> tuple[Collected, dict[str, Collected]]:
    """``collected`` split by policy: the run's model's episodes (with the step's metrics,
    over every episode) and each of ``names``' episodes, in the same order, with its
    ``rollout/reward`` (mean episode reward) and ``rollout/success``. Without ``names`` the
    collection comes back as it is."""
    if not names:
        return collected, {}
    rows: dict[str, list[int]] = {name: [] for name in [MAIN, *names]}
    for index, trajectory in enumerate(collected.trajectories):
        owner = policy_of(trajectory)
        if owner not in rows:
            raise ValueError(f"an episode was sampled by {owner!r}, which is not a trained "
                             f"policy of this run ({', '.join(rows)})")
        rows[owner].append(index)

    def part(indices: list[int], metrics: dict[str, float] | None = None) -> Collected:
        episodes = [collected.trajectories[i] for i in indices]
        if metrics is None and episodes:  # a separate policy's own episodes
            metrics = {"rollout/reward": sum(t.total_reward for t in episodes) / len(episodes),
                       "rollout/success": sum(t.success for t in episodes) / len(episodes)}
        return Collected(episodes, [collected.scores[i] for i in indices],
                         collected.outcomes[indices], metrics or {})

    separate = {name: part(rows[name]) for name in names}
    return part(rows[MAIN], collected.metrics), separate
