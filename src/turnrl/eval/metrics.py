"""Evaluation statistics: success rate, pass@k and confidence intervals (pure numpy).

Tasks, not episodes, are the unit of evaluation: a task (one held-out seed) may be sampled
several times, and every statistic weighs each task equally, so its interval is over tasks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["bootstrap_ci", "pass_at_k", "summarize_episodes", "wilson_interval"]

_RECORD_KEYS = ("task", "success", "reward", "turns", "tokens")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` succeeded.

    pass@k = 1 − C(n−c, k) / C(n, k), the chance that at least one of k samples drawn
    without replacement from the n succeeds (Chen et al. 2021, "Evaluating Large Language
    Models Trained on Code", eq. 1). Computed as in the paper's numerically stable form
    1 − ∏_{i=n−c+1}^{n} (1 − k/i), which avoids huge binomial coefficients.
    """
    if n < 1:
        raise ValueError(f"pass_at_k: need n >= 1 samples, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:  # every draw of k samples contains a success
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (Wilson 1927).

    With p̂ = s/n:  (p̂ + z²/2n ± z·sqrt(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n).
    Unlike the normal interval it stays inside [0, 1] and is not empty at 0/n or n/n.
    n = 0 gives the uninformative (0, 1).
    """
    if not 0 <= successes <= n:
        raise ValueError(f"wilson_interval: need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return 0.0, 1.0
    p_hat = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    center = (p_hat + z2 / (2 * n)) / denominator
    half_width = z * math.sqrt(p_hat * (1 - p_hat) / n + z2 / (4 * n * n)) / denominator
    return max(0.0, center - half_width), min(1.0, center + half_width)


# two-sided 95% quantiles of Student's t with df = 1..10 degrees of freedom
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def t_interval(values: Sequence[float]) -> tuple[float, float]:
    """Mean and 95% half-width of the mean over independent runs (e.g. training seeds).

    half-width = t_{0.975, n−1} · s / √n, s the sample std (Bessel); t from a table for
    n − 1 <= 10, else 1.96. One value gives a NaN half-width (no spread to measure).
    """
    if not values:
        raise ValueError("t_interval: need at least one value")
    n = len(values)
    mean = float(np.mean(values))
    if n < 2:
        return mean, math.nan
    quantile = _T95[n - 2] if n - 1 <= len(_T95) else 1.96
    return mean, quantile * float(np.std(values, ddof=1)) / math.sqrt(n)


def _resampled_stats(
    values: np.ndarray, stat: Callable[..., Any], indices: np.ndarray
) -> np.ndarray:
    samples = values[indices]  # (n_resamples, n)
    try:
        stats = np.asarray(stat(samples, axis=1), dtype=float)
        if stats.shape == (len(indices),):
            return stats
    except TypeError:  # a statistic without an axis argument
        pass
    return np.array([float(stat(row)) for row in samples])


def bootstrap_ci(
    values_per_task: Sequence[float] | npt.NDArray[np.floating[Any]],
    *,
    stat: Callable[..., Any] = np.mean,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` over tasks (Efron & Tibshirani 1993).

    Resamples the per-task values with replacement ``n_resamples`` times and returns the
    (1−confidence)/2 and (1+confidence)/2 quantiles of the statistic. The same seed gives
    the same interval. A single value, or all values equal, gives (v, v).
    """
    values = np.asarray(values_per_task, dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ValueError("bootstrap_ci: need a non-empty 1-D sequence of per-task values")
    if not 0 < confidence < 1:
        raise ValueError(f"bootstrap_ci: confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"bootstrap_ci: n_resamples must be >= 1, got {n_resamples}")
    if values.size == 1 or np.all(values == values[0]):
        point = float(stat(values))
        return point, point
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, values.size, size=(n_resamples, values.size))
    stats = _resampled_stats(values, stat, indices)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _group_by_task(records: Sequence[dict]) -> dict[Hashable, list[dict]]:
    groups: dict[Hashable, list[dict]] = {}
    for index, record in enumerate(records):
        missing = [key for key in _RECORD_KEYS if key not in record]
        if missing:
            raise ValueError(
                f"summarize_episodes: record {index} lacks {missing}; each record needs "
                f"{list(_RECORD_KEYS)}"
            )
        groups.setdefault(record["task"], []).append(record)
    return groups


def summarize_episodes(
    records: Sequence[dict],
    *,
    pass_k: Sequence[int] = (),
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, float]:
    """Success, reward, turns, tokens and pass@k of evaluation episodes, with 95% intervals.

    Each record is ``{"task": hashable, "success": bool, "reward": float, "turns": int,
    "tokens": int}``; records with the same ``task`` are samples of one task.

    Returns (un-prefixed; the caller adds ``eval/``):
      ``success``       mean over tasks of the task's success rate; ``success_lo/hi`` is the
                        Wilson interval when every task has one sample, else a bootstrap
                        interval over per-task success rates
      ``reward``        mean over tasks of the task's mean reward, ``reward_lo/hi`` bootstrap
      ``turns``         mean over tasks of the task's mean turns, ``turns_lo/hi`` bootstrap
      ``tokens``        mean sampled tokens per episode
      ``episodes``, ``tasks``  counts
      ``pass@k``        for each k in ``pass_k``: mean over tasks of the unbiased per-task
                        pass@k (:func:`pass_at_k`), with ``pass@k_lo/hi`` bootstrap (pass@1
                        with one sample per task is the success rate, and has its Wilson
                        interval); a k larger than some task's sample count raises ValueError
                        naming k
    """
    if not records:
        raise ValueError("summarize_episodes: no episodes to summarize")
    groups = _group_by_task(records)
    counts = np.array([len(group) for group in groups.values()])
    successes = np.array([sum(bool(r["success"]) for r in group) for group in groups.values()])
    task_success = successes / counts
    task_reward = np.array([np.mean([float(r["reward"]) for r in g]) for g in groups.values()])

    summary: dict[str, float] = {"success": float(task_success.mean())}
    if np.all(counts == 1):
        low, high = wilson_interval(int(successes.sum()), int(counts.sum()))
    else:
        low, high = bootstrap_ci(task_success, n_resamples=n_resamples, seed=seed)
    summary["success_lo"], summary["success_hi"] = low, high
    summary["reward"] = float(task_reward.mean())
    summary["reward_lo"], summary["reward_hi"] = bootstrap_ci(
        task_reward, n_resamples=n_resamples, seed=seed
    )
    task_turns = np.array([np.mean([float(r["turns"]) for r in g]) for g in groups.values()])
    summary["turns"] = float(task_turns.mean())
    summary["turns_lo"], summary["turns_hi"] = bootstrap_ci(
        task_turns, n_resamples=n_resamples, seed=seed
    )
    summary["tokens"] = float(np.mean([float(r["tokens"]) for r in records]))
    summary["episodes"] = len(records)
    summary["tasks"] = len(groups)

    for k in pass_k:
        if k < 1 or k > counts.min():
            raise ValueError(
                f"summarize_episodes: pass@{k} needs 1 <= k <= samples per task, but the "
                f"smallest task has {int(counts.min())} sample(s); sample more or drop k={k}"
            )
        per_task = np.array(
            [pass_at_k(int(n), int(c), k) for n, c in zip(counts, successes, strict=True)]
        )
        summary[f"pass@{k}"] = float(per_task.mean())
        if k == 1 and np.all(counts == 1):  # it is the success rate: the same interval
            summary["pass@1_lo"], summary["pass@1_hi"] = low, high
            continue
        summary[f"pass@{k}_lo"], summary[f"pass@{k}_hi"] = bootstrap_ci(
            per_task, n_resamples=n_resamples, seed=seed
        )
    return summary
