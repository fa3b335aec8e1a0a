"""``samples/step_<n>.jsonl``: what a step trained on, for reading trajectories later.

Each line is one trajectory's ledger (:meth:`~turnrl.types.Trajectory.to_dict`) with what
scoring and the estimator made of it: the final per-turn rewards (after shaping), the
reward terms, and the advantage of every token.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from turnrl.io import atomic_write_text, disk_space
from turnrl.train.scoring import EpisodeScore, ScoredBatch
from turnrl.types import TrainBatch, Trajectory


def save_samples(run_dir: Path, step: int, trajectories: Sequence[Trajectory],
                 scores: Sequence[EpisodeScore], scored: ScoredBatch, batch: TrainBatch,
                 n: int) -> None:
    """The first ``n`` trajectories of a step, written atomically."""
    if n <= 0:
        return
    lines = []
    for row, (traj, episode_score) in enumerate(zip(trajectories[:n], scores, strict=False)):
        record = traj.to_dict()
        record["env_rewards"] = record.pop("turn_rewards")
        record["turn_rewards"] = [round(r, 6) for r in
                                  scored.turn_rewards[row, : traj.num_turns].tolist()]
        if episode_score.terms:
            record["reward_terms"] = episode_score.terms
        used = [round(a, 6) for a in batch.advantages[row, : len(traj.token_ids)].tolist()]
        record["advantages"] = used + [0.0] * (len(traj.token_ids) - len(used))
        lines.append(json.dumps(record))
    path, text = run_dir / "samples" / f"step_{step}.jsonl", "\n".join(lines) + "\n"
    with disk_space(f"the samples of step {step}", path, len(text.encode())):
        atomic_write_text(path, text)
