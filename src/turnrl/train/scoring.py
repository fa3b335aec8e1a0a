"""Scoring: the reward terms of each episode, and the rewards of a batch.

Two steps, each building a new value from the last:

1. :func:`score_episodes` calls the configured reward functions (``reward.terms``) on each
   finished trajectory (user code: a function that raises fails its episode only) and
   returns one :class:`EpisodeScore` each;
2. :func:`score` lays those scores beside the token batch and runs the one pure shaping
   function (:func:`turnrl.algos.shaping.shape_rewards`: env weight, terms, failures, the
   overlong penalty, KL in the reward) into a :class:`ScoredBatch`.

The collector uses the same shaping (without the length and KL penalties, which need the
laid-out tokens and the reference model) to decide which episodes to keep.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from turnrl.algos.filters import turn_lengths
from turnrl.algos.shaping import RewardInputs, ShapedRewards, shape_rewards
from turnrl.rewards import CombinedReward
from turnrl.types import TokenBatch, Trajectory

log = logging.getLogger("turnrl")


@dataclass(frozen=True)
class EpisodeScore:
    """The reward terms of one episode: ``total = Σ_i w_i f_i`` and each term's unweighted
    value (``reward/<label>`` metrics); ``error`` when the episode failed (its env, or a
    reward function)."""

    total: float = 0.0
    terms: dict[str, float] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class Shaping:
    """The knobs of reward shaping (``reward.*``, ``env.on_error``, ``algo.overlong_cache``)."""

    env_weight: float = 1.0
    score_failures: bool = False  # env.on_error=score: keep failed episodes at error_reward
    error_reward: float = 0.0
    max_len: int = 0  # rollout.max_new_tokens, the overlong penalty's limit
    overlong_cache: int = 0


@dataclass(frozen=True)
class ScoredBatch:
    """A token batch with its final per-turn rewards."""

    tokens: TokenBatch
    turn_rewards: Tensor  # (B, K)
    metrics: dict[str, float]


def score_episodes(trajectories: Sequence[Trajectory],
                   rewards: CombinedReward | None) -> list[EpisodeScore]:
    """Each trajectory's reward terms; a failed episode is not scored (it keeps its
    error), and a reward function that raises fails its episode only."""
    scores = []
    for traj in trajectories:
        if traj.error is not None or rewards is None or not traj.turn_rewards:
            scores.append(EpisodeScore(error=traj.error))
            continue
        try:
            total, parts = rewards.score(traj)
        except Exception as error:  # a reward function failed: this episode only
            message = (f"reward function raised {type(error).__name__}: {error} "
                       f"(env {traj.env_id}, seed {traj.seed})")
            log.warning("episode failed: %s", message)
            scores.append(EpisodeScore(error=message))
            continue
        scores.append(EpisodeScore(total=total, terms=parts))
    return scores


def outcome_rewards(trajectories: Sequence[Trajectory], scores: Sequence[EpisodeScore],
                    shaping: Shaping) -> ShapedRewards:
    """The shaped rewards of finished episodes before the length and KL penalties: what the
    collector keeps or drops episodes by."""
    turns = max((t.num_turns for t in trajectories), default=0)
    env_rewards = torch.zeros(len(trajectories), max(turns, 1))
    turn_mask = torch.zeros_like(env_rewards)
    for row, traj in enumerate(trajectories):
        env_rewards[row, : traj.num_turns] = torch.tensor(traj.turn_rewards, dtype=torch.float)
        turn_mask[row, : traj.num_turns] = 1.0
    return shape_rewards(
        RewardInputs(env_rewards=env_rewards, turn_mask=turn_mask,
                     term_totals=torch.tensor([s.total for s in scores]),
                     failed=torch.tensor([s.error is not None for s in scores]),
                     sampled=torch.tensor([t.num_sampled_tokens > 0 for t in trajectories])),
        env_weight=shaping.env_weight, score_failures=shaping.score_failures,
        error_reward=shaping.error_reward)


def score(tokens: TokenBatch, scores: Sequence[EpisodeScore], shaping: Shaping, *,
          kl_penalty: Tensor | None = None) -> ScoredBatch:
    """All reward shaping of a laid-out batch: ``shape_rewards`` over the env's rewards,
    the episodes' reward terms and failures, each turn's length and ``kl_penalty``
    (B, K) (KL in the reward; None otherwise)."""
    k = tokens.turn_mask.shape[1]
    shaped = shape_rewards(
        RewardInputs(env_rewards=tokens.env_rewards, turn_mask=tokens.turn_mask,
                     term_totals=torch.tensor([s.total for s in scores]),
                     failed=torch.tensor([s.error is not None for s in scores]),
                     sampled=tokens.loss_mask.sum(-1) > 0,
                     turn_lengths=turn_lengths(tokens.loss_mask, tokens.turn_index, k),
                     kl_penalty=kl_penalty),
        env_weight=shaping.env_weight, score_failures=shaping.score_failures,
        error_reward=shaping.error_reward, max_len=shaping.max_len,
        overlong_cache=shaping.overlong_cache)
    return ScoredBatch(tokens, shaped.turn_rewards, shaped.metrics)


def reward_term_metrics(scores: Sequence[EpisodeScore]) -> dict[str, float]:
    """``reward/<label>``: each term's mean over the scored episodes."""
    sums: dict[str, list[float]] = {}
    for s in scores:
        for label, value in s.terms.items():
            sums.setdefault(f"reward/{label}", []).append(value)
    return {key: sum(values) / len(values) for key, values in sums.items()}
