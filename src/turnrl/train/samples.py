"""``samples/``: what a step trained on (``step_<n>.jsonl``) and what an evaluation played
(``eval_<n>.jsonl``), for reading trajectories later (``turnrl show``, ``turnrl report``).

Each line is one trajectory's ledger (:meth:`~turnrl.types.Trajectory.to_dict`) with what
scoring and the estimator made of it: the final per-turn rewards (after shaping), the
reward terms, and the advantage of every token; with the learner's token statistics (taken
before the step's update), also ``learner_logprobs`` (the learner's recomputation of each
token's log-prob, to set against the sampler's ``logprobs``) and ``entropies`` (the policy's
entropy where each token was drawn, nats).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from turnrl.io import atomic_write_text, run_write
from turnrl.train.learner import Learner
from turnrl.train.scoring import EpisodeScore, ScoredBatch
from turnrl.types import TokenBatch, TrainBatch, Trajectory


def sample_rows(trajectories: Sequence[Trajectory], turn_rewards: Tensor, n: int, which: str,
                seed: int) -> list[int]:
    """The rows of a step's batch that ``samples/`` keeps: whole groups (a task's episodes,
    by ``group_id``) until ``n`` trajectories, chosen by ``which``: ``first`` (in batch
    order), ``random`` (a generator seeded by ``seed``, apart from training's), ``best`` /
    ``worst`` (highest / lowest mean return), ``extremes`` (best, worst, next best, ...).
    ``turn_rewards`` (B, K) are the final per-turn rewards. Rows come back in batch order."""
    if n <= 0:
        return []
    groups: dict[int, list[int]] = {}
    for row, trajectory in enumerate(trajectories):
        groups.setdefault(trajectory.group_id, []).append(row)
    order = list(groups)
    mean = {g: float(turn_rewards[rows].sum(-1).mean()) for g, rows in groups.items()}
    if which == "random":
        random.Random(seed).shuffle(order)
    elif which in ("best", "worst", "extremes"):
        ranked = sorted(order, key=lambda g: -mean[g])  # stable: ties keep batch order
        if which == "worst":
            ranked = sorted(order, key=lambda g: mean[g])
        elif which == "extremes":
            ranked = [g for pair in zip(ranked, reversed(ranked), strict=True) for g in pair]
            ranked = list(dict.fromkeys(ranked))
        order = ranked
    kept: list[int] = []
    for group in order:
        if len(kept) >= n:
            break
        kept.extend(groups[group])
    return sorted(kept)


def sample_stats(learner: Learner, tokens: TokenBatch, rows: Sequence[int]
                 ) -> tuple[Tensor, Tensor] | None:
    """The learner's log-probs and entropies (len(rows), T) of those ``rows`` of ``tokens``
    (the trajectories :func:`save_samples` keeps), or None when none are kept."""
    if not rows:
        return None
    return learner.policy_token_stats(tokens.select(torch.tensor(list(rows))))


def save_samples(run_dir: Path, step: int, trajectories: Sequence[Trajectory],
                 scores: Sequence[EpisodeScore], scored: ScoredBatch, batch: TrainBatch,
                 rows: Sequence[int], stats: tuple[Tensor, Tensor] | None = None) -> None:
    """The trajectories ``rows`` of a step (:func:`sample_rows`), written atomically.
    ``stats``: the learner's log-probs and entropies (len(rows), T) of those trajectories
    (:func:`sample_stats`)."""
    if not rows:
        return
    lines = []
    for i, row in enumerate(rows):
        traj, episode_score = trajectories[row], scores[row]
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
                kept = [round(v, 6) for v in values[i, : len(traj.token_ids)].tolist()]
                record[key] = kept + [0.0] * (len(traj.token_ids) - len(kept))
        lines.append(json.dumps(record))
    _write(run_dir / "samples" / f"step_{step}.jsonl", f"the samples of step {step}", lines)


def save_eval_samples(run_dir: Path, step: int, trajectories: Sequence[Trajectory]) -> None:
    """A held-out evaluation's episodes (``samples/eval_<step>.jsonl``: ledgers and
    rewards; no advantages, nothing was trained on them)."""
    lines = []
    for traj in trajectories:
        lines.append(json.dumps(traj.to_dict()))
    if lines:
        _write(run_dir / "samples" / f"eval_{step}.jsonl", f"the evaluation at step {step}",
               lines)


def _write(path: Path, what: str, lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    with run_write(what, path, len(text.encode())):
        atomic_write_text(path, text)
