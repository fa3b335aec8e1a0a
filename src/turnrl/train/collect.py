"""Collection: the episodes one RL step trains on, scored and filtered.

A :class:`Collector` plays ``train.n_groups`` groups of fresh tasks (in this process, on the
Ray rollout workers, or, with ``train.mode=async``, from the groups they kept sampling),
scores each episode's reward terms, leaves out failed episodes (``env.on_error``), and
applies the resampling batch filters (``algo.filters``, e.g. ``dynamic_sampling``: groups
without reward spread are dropped and more are collected, up to
``train.max_sampling_tries`` times). Task seeds and group ids come from one cursor, the
collector's only state, which checkpoints save.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import Tensor

from turnrl.agents.connection import CONNECTION, ERROR_KIND
from turnrl.agents.job import AGENT_ENV_ID
from turnrl.algos.registry import FILTERS, resamples
from turnrl.rewards import CombinedReward
from turnrl.rollout.stats import rollout_metrics
from turnrl.train.scoring import EpisodeScore, Shaping, outcome_rewards, reward_term_metrics
from turnrl.train.scoring import score_episodes as score_terms
from turnrl.types import Trajectory


class RolloutError(RuntimeError):
    """Every episode of ``env.max_failed_batches`` consecutive batches failed."""


@dataclass(frozen=True)
class Collected:
    """The episodes of one step (in group order), their reward-term scores, their outcome
    rewards (B,) and the collection's metrics; empty when every episode failed."""

    trajectories: list[Trajectory]
    scores: list[EpisodeScore]
    outcomes: Tensor
    metrics: dict[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.trajectories)


class AsyncSource(Protocol):
    """Groups that rollout workers kept sampling during the last update (Ray, async)."""

    next_index: int

    def next_batch(self, version: int, accept: Callable[[list[Trajectory]], list]
                   ) -> tuple[list, dict[str, float]]: ...


Row = tuple[Trajectory, EpisodeScore, float]  # an episode, its scores, its outcome reward


@dataclass(frozen=True)
class Chunk:
    """Episodes scored and judged together (a sync collection, or one async group):
    ``usable`` survive the failure handling, ``kept`` also every resampling filter."""

    usable: list[Row]
    kept: list[Row]
    episodes: int
    errors: list[str]
    connection_errors: int = 0  # of the errors: agent runs that lost their connection


class Collector:
    """Plays, scores and filters the episodes of each RL step.

    Args:
        play: ``play(first, n)`` → the episodes of groups ``first .. first + n − 1``.
        rewards: the weighted reward terms (None: the env's rewards only).
        shaping: reward shaping knobs (failures scored or excluded, env weight).
        filters: ``algo.filters``; the resampling ones act here.
        n_groups, group_size, max_tries: ``train.*``.
        max_failed_batches: ``env.max_failed_batches``.
        source: asynchronous groups (``train.mode=async``) instead of ``play``.
        cursor: the first task index (a resumed run's saved cursor).
    """

    def __init__(self, play: Callable[[int, int], list[Trajectory]], *,
                 rewards: CombinedReward | None, shaping: Shaping, filters: Sequence[str],
                 n_groups: int, group_size: int, max_tries: int, max_failed_batches: int,
                 env_id: str, source: AsyncSource | None = None, cursor: int = 0) -> None:
        self.play, self.rewards, self.shaping = play, rewards, shaping
        self.filters = [name for name in filters if resamples(name)]
        self.n_groups, self.group_size, self.max_tries = n_groups, group_size, max_tries
        self.max_failed_batches, self.env_id = max_failed_batches, env_id
        self.source = source
        self.cursor = cursor  # next task index: seed offset and group id
        self.failed_batches = 0  # consecutive batches in which every episode failed
        self.last_error = ""

    def judge(self, trajectories: list[Trajectory]) -> Chunk:
        """Score ``trajectories``, leave out failures, apply the resampling filters to the
        rest."""
        scores = score_terms(trajectories, self.rewards)
        shaped = outcome_rewards(trajectories, scores, self.shaping)
        rows = list(zip(trajectories, scores, shaped.outcomes.tolist(), strict=True))
        usable = [row for row, ok in zip(rows, shaped.keep.tolist(), strict=True) if ok]
        keep = torch.ones(len(usable), dtype=torch.bool)
        if usable:
            outcomes = torch.tensor([o for _, _, o in usable])
            group_ids = torch.tensor([t.group_id for t, _, _ in usable])
            terminated = torch.tensor([t.terminated for t, _, _ in usable])
            for name in self.filters:
                keep &= FILTERS[name](outcomes, group_ids, terminated)
        errors = [s.error for s in scores if s.error is not None]
        if errors:
            self.last_error = errors[-1]
        lost = sum(t.error is not None and t.info.get(ERROR_KIND) == CONNECTION
                   for t in trajectories)
        return Chunk(usable, [row for row, k in zip(usable, keep.tolist(), strict=True) if k],
                     len(trajectories), errors, lost)

    def collect(self, version: int = 0) -> Collected:
        """The next step's episodes (``version``: the learner's, for async staleness);
        empty when every episode failed, and a :class:`RolloutError` after
        ``env.max_failed_batches`` such batches in a row."""
        rows, metrics = (self._collect_async(version) if self.source is not None
                         else self._collect_sync())
        trajectories = [t for t, _, _ in rows]
        scores = [s for _, s, _ in rows]
        metrics = {**reward_term_metrics(scores), **metrics}
        if trajectories and metrics["rollout/env_error_rate"] < 1.0:
            self.failed_batches = 0
            outcomes = [o for _, _, o in rows]
            return Collected(trajectories, scores, torch.tensor(outcomes),
                             {**rollout_metrics(trajectories, outcomes), **metrics})
        self.failed_batches += 1
        if self.failed_batches >= self.max_failed_batches:
            raise RolloutError(
                f"every episode of the last {self.failed_batches} batches failed (env "
                f"{self.env_id}); the last error: {self.last_error}. Fix the env or raise "
                "env.max_failed_batches")
        return Collected([], [], torch.zeros(0), {**metrics, "loss/skipped_steps": 1.0,
                                                   "reward/mean": 0.0, "rollout/success": 0.0})

    def _collect_sync(self) -> tuple[list[Row], dict[str, float]]:
        kept: list[Row] = []
        usable: list[Row] = []  # every scored episode, before the filters
        tries = dropped = errors = episodes = lost = 0
        chunk = None
        while tries < self.max_tries:
            first = self.cursor
            self.cursor += self.n_groups
            chunk = self.judge(self.play(first, self.n_groups))
            episodes += chunk.episodes
            errors += len(chunk.errors)
            lost += chunk.connection_errors
            tries += 1
            kept += chunk.kept
            usable += chunk.usable
            dropped += len({t.group_id for t, _, _ in chunk.usable}) - len(
                {t.group_id for t, _, _ in chunk.kept})
            if not self.filters or len(kept) >= self.n_groups * self.group_size:
                break
        metrics = self._error_metrics(errors, episodes, lost)
        if self.filters:  # whole groups: the first n_groups groups that were kept
            first_groups = set(list(dict.fromkeys(t.group_id for t, _, _ in kept))[
                : self.n_groups])
            kept = [row for row in kept if row[0].group_id in first_groups]
            if not kept and chunk is not None:  # nothing passed the filters: the last batch
                kept = chunk.usable
            metrics.update({"rollout/dropped_groups": float(dropped),
                            "rollout/sampling_tries": float(tries),
                            **sampled_metrics(episodes, usable)})
        return kept, metrics

    def _error_metrics(self, errors: int, episodes: int, lost: int) -> dict[str, float]:
        """``rollout/env_errors`` and ``rollout/env_error_rate`` (the failed episodes); for an
        agent program's runs also ``rollout/agent_error_rate`` (runs that failed on their own)
        and ``rollout/agent_connection_error_rate`` (runs that lost their connection to the
        endpoint, ``lost`` of the ``errors``)."""
        total = max(episodes, 1)
        metrics = {"rollout/env_errors": float(errors), "rollout/env_error_rate": errors / total}
        if self.env_id == AGENT_ENV_ID:
            metrics["rollout/agent_error_rate"] = (errors - lost) / total
            metrics["rollout/agent_connection_error_rate"] = lost / total
        return metrics

    def _collect_async(self, version: int) -> tuple[list[Row], dict[str, float]]:
        assert self.source is not None
        counts = {"episodes": 0, "errors": 0, "dropped": 0, "lost": 0}
        usable: list[Row] = []

        def accept(group: list[Trajectory]) -> list[Row]:
            chunk = self.judge(group)
            counts["episodes"] += chunk.episodes
            counts["errors"] += len(chunk.errors)
            counts["lost"] += chunk.connection_errors
            usable.extend(chunk.usable)
            if chunk.usable and not chunk.kept:
                counts["dropped"] += 1
            return chunk.kept

        kept, metrics = self.source.next_batch(version, accept)
        self.cursor = self.source.next_index
        metrics.update(self._error_metrics(counts["errors"], counts["episodes"], counts["lost"]))
        if self.filters:
            metrics.update({"rollout/dropped_groups": float(counts["dropped"]),
                            **sampled_metrics(counts["episodes"], usable)})
        return kept, metrics


def sampled_metrics(episodes: int, usable: Sequence[Row]) -> dict[str, float]:
    """What a step with resampling filters paid for, dropped groups included:
    ``rollout/sampled_episodes`` (every episode played, failed ones too) and
    ``rollout/sampled_success`` (the success rate of the scored ones before the filters;
    ``rollout/success`` is that of the kept ones, which the filter skews: it drops the groups
    that all failed or all succeeded)."""
    success = [float(t.success) for t, _, _ in usable]
    return {"rollout/sampled_episodes": float(episodes),
            "rollout/sampled_success": sum(success) / len(success) if success else 0.0}
