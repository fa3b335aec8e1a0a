"""``samples/step_<n>.jsonl``: what a step trained on, for reading trajectories later.

Each line is one trajectory's ledger (:meth:`~turnrl.types.Trajectory.to_dict`) with what
scoring and the estimator made of it: the final per-turn rewards (after shaping), the
reward terms, and the advantage of every token; with the learner's token statistics (taken
before the step's update), also ``learner_logprobs`` (the learner's recomputation of each
token's log-prob, to set against the sampler's ``logprobs``) and ``entropies`` (the policy's
entropy where each token was drawn, nats).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from turnrl.io import atomic_write_text, disk_space
from turnrl.train.learner import Learner
from turnrl.train.scoring import EpisodeScore, ScoredBatch
from turnrl.types import TokenBatch, TrainBatch, Trajectory


def sample_stats(learner: Learner, tokens: TokenBatch, n: int) -> tuple[Tensor, Tensor] | None:
    """The learner's log-probs and entropies (n, T) of the first ``n`` rows of ``tokens``
    (the trajectories :func:`save_samples` keeps), or None when none are kept."""
    kept = min(n, tokens.size)
    return learner.policy_token_stats(tokens.select(torch.arange(kept))) if kept > 0 else None


def save_samples(run_dir: Path, step: int, trajectories: Sequence[Trajectory],
                 scores: Sequence[EpisodeScore], scored: ScoredBatch, batch: TrainBatch,
                 n: int, stats: tuple[Tensor, Tensor] | None = None) -> None:
    """The first ``n`` trajectories of a step, written atomically. ``stats``: the learner's
    log-probs and entropies (n, T) of those trajectories (``Learner.policy_token_stats``)."""
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
        if stats is not None:
            for key, values in zip(("learner_logprobs", "entropies"), stats, strict=True):
                kept = [round(v, 6) for v in values[row, : len(traj.token_ids)].tolist()]
                record[key] = kept + [0.0] * (len(traj.token_ids) - len(kept))
        lines.append(json.dumps(record))
    path, text = run_dir / "samples" / f"step_{step}.jsonl", "\n".join(lines) + "\n"
    with disk_space(f"the samples of step {step}", path, len(text.encode())):
        atomic_write_text(path, text)
