"""Evaluation statistics against hand-derived reference values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from turnrl.eval.metrics import bootstrap_ci, pass_at_k, summarize_episodes, wilson_interval

# ---------------------------------------------------------------- pass@k


def test_pass_at_k_reference_values() -> None:
    # 1 − C(3,1)/C(5,1) = 1 − 3/5 = 0.4: one draw from 5 with 2 successes.
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    # 1 − C(3,2)/C(5,2) = 1 − 3/10 = 0.7
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # 1 − C(7,5)/C(10,5) = 1 − 21/252 = 11/12
    assert pass_at_k(10, 3, 5) == pytest.approx(11 / 12)
    # n − c < k: every draw of k contains a success
    assert pass_at_k(5, 4, 2) == 1.0


@pytest.mark.parametrize(("n", "k"), [(1, 1), (5, 1), (5, 3), (20, 20)])
def test_pass_at_k_edges(n: int, k: int) -> None:
    assert pass_at_k(n, 0, k) == 0.0
    assert pass_at_k(n, n, k) == 1.0


def test_pass_at_k_matches_the_binomial_formula() -> None:
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)


def test_pass_at_1_is_the_success_rate() -> None:
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)


def test_pass_at_k_is_stable_for_large_n() -> None:
    # C(1000, 500) overflows floats; the product form does not.
    value = pass_at_k(1000, 1, 500)
    assert value == pytest.approx(0.5)  # 1 − C(999,500)/C(1000,500) = 1 − 500/1000


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)])
def test_pass_at_k_rejects_bad_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# ---------------------------------------------------------------- Wilson


def test_wilson_all_failures_and_all_successes() -> None:
    # p̂ = 0: center = half width = (z²/2n)/(1 + z²/n), so the interval is
    # [0, z²/(n + z²)] = [0, 3.8416/13.8416] = [0, 0.2775402]
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(1.96**2 / (10 + 1.96**2))
    assert high == pytest.approx(0.2775402)
    # n/n mirrors 0/n
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(1 - 0.2775402)
    assert high == 1.0


def test_wilson_half() -> None:
    # 5/10: center 0.5, half width 1.96·sqrt(0.025 + 3.8416/400)/1.38416 = 0.2634104
    low, high = wilson_interval(5, 10)
    assert (low, high) == pytest.approx((0.2365896, 0.7634104), abs=1e-6)


def test_wilson_wider_z_wider_interval_and_empty_n() -> None:
    narrow = wilson_interval(3, 10, z=1.0)
    wide = wilson_interval(3, 10, z=2.576)
    assert wide[0] < narrow[0] < 0.3 < narrow[1] < wide[1]
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


# ---------------------------------------------------------------- bootstrap


def test_bootstrap_is_reproducible_and_contains_the_mean() -> None:
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75]
    first = bootstrap_ci(values, seed=3)
    assert bootstrap_ci(values, seed=3) == first
    assert bootstrap_ci(values, seed=4) != first
    low, high = first
    assert low < np.mean(values) < high
    assert low >= 0.0 and high <= 1.0


def test_bootstrap_two_values_has_the_extreme_quantiles() -> None:
    # Means of 2 resampled values from {0, 1} are 0, 0.5 or 1, each end with chance 1/4,
    # so the 2.5% and 97.5% quantiles are exactly 0 and 1.
    assert bootstrap_ci([0.0, 1.0]) == (0.0, 1.0)


def test_bootstrap_degenerate_input() -> None:
    assert bootstrap_ci([0.7]) == (0.7, 0.7)
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_bootstrap_other_statistics() -> None:
    values = np.arange(20, dtype=float)
    vectorised = bootstrap_ci(values, stat=np.mean)
    looped = bootstrap_ci(values, stat=lambda row: float(np.mean(row)))  # no axis argument
    assert looped == pytest.approx(vectorised)
    low, high = bootstrap_ci(values, stat=np.median, confidence=0.5)
    assert low <= 9.5 <= high
    wider = bootstrap_ci(values, confidence=0.99)
    assert wider[0] <= vectorised[0] and vectorised[1] <= wider[1]


# ---------------------------------------------------------------- summarize


def _record(task: str, success: bool, reward: float, turns: int, tokens: int) -> dict:
    return {"task": task, "success": success, "reward": reward, "turns": turns, "tokens": tokens}


RECORDS = [
    _record("a", True, 1.0, 2, 10),
    _record("a", False, 0.0, 4, 20),
    _record("a", True, 1.0, 3, 30),
    _record("b", False, 0.0, 5, 40),
    _record("b", False, 0.0, 5, 40),
    _record("b", False, 0.5, 5, 40),
]


def test_summarize_hand_made_set() -> None:
    summary = summarize_episodes(RECORDS, pass_k=[1, 2, 3])
    # per-task success: a = 2/3, b = 0  -> mean 1/3
    assert summary["success"] == pytest.approx(1 / 3)
    # bootstrap over {2/3, 0}: each extreme mean has chance 1/4 -> [0, 2/3]
    assert summary["success_lo"] == pytest.approx(0.0)
    assert summary["success_hi"] == pytest.approx(2 / 3)
    # per-task reward: a = 2/3, b = 1/6 -> 5/12
    assert summary["reward"] == pytest.approx(5 / 12)
    assert (summary["reward_lo"], summary["reward_hi"]) == pytest.approx((1 / 6, 2 / 3))
    # per-episode means: turns 24/6 = 4, tokens 180/6 = 30
    assert summary["turns"] == pytest.approx(4.0)
    assert summary["tokens"] == pytest.approx(30.0)
    assert summary["episodes"] == 6 and summary["tasks"] == 2
    # pass@1: a = 1 − C(1,1)/C(3,1) = 2/3, b = 0 -> 1/3 (equals the success rate)
    assert summary["pass@1"] == pytest.approx(1 / 3)
    # pass@2: a = 1 (n − c = 1 < 2), b = 0 -> 1/2; same for pass@3
    assert summary["pass@2"] == pytest.approx(0.5)
    assert summary["pass@3"] == pytest.approx(0.5)
    assert (summary["pass@2_lo"], summary["pass@2_hi"]) == pytest.approx((0.0, 1.0))


def test_summarize_single_samples_use_wilson() -> None:
    records = [_record(str(i), i == 0, float(i == 0), 1, 5) for i in range(4)]
    summary = summarize_episodes(records, pass_k=[1])
    assert summary["success"] == pytest.approx(0.25)
    assert (summary["success_lo"], summary["success_hi"]) == wilson_interval(1, 4)
    assert summary["pass@1"] == pytest.approx(0.25)


def test_summarize_rejects_k_above_the_sample_count() -> None:
    with pytest.raises(ValueError, match="pass@4"):
        summarize_episodes(RECORDS, pass_k=[4])


def test_summarize_rejects_empty_and_malformed_records() -> None:
    with pytest.raises(ValueError, match="no episodes"):
        summarize_episodes([])
    with pytest.raises(ValueError, match="record 0 lacks"):
        summarize_episodes([{"task": 0, "success": True}])


def test_t_interval_reference_values() -> None:
    from turnrl.eval.metrics import t_interval

    # [0.2, 0.4, 0.6]: mean 0.4, s = 0.2, n = 3, t_{0.975, 2} = 4.303 → 4.303·0.2/√3
    mean, half = t_interval([0.2, 0.4, 0.6])
    assert mean == pytest.approx(0.4) and half == pytest.approx(4.303 * 0.2 / 3**0.5)
    assert t_interval([0.5, 0.5])[1] == 0.0
    mean, half = t_interval([0.7])
    assert mean == 0.7 and math.isnan(half)
    # beyond the table (n − 1 > 10) the normal quantile
    assert t_interval([0.0, 1.0] * 6)[1] == pytest.approx(1.96 * np.std([0, 1] * 6, ddof=1)
                                                          / 12**0.5)
    with pytest.raises(ValueError, match="at least one"):
        t_interval([])


def test_pass_at_1_of_one_sample_per_task_has_the_success_interval():
    """pass@1 is then the success rate itself: one number, one interval (Wilson), not a
    bootstrap that collapses to [0, 0] when nothing succeeded."""
    records = [{"task": t, "success": False, "reward": 0.0, "turns": 1, "tokens": 2}
               for t in range(16)]
    summary = summarize_episodes(records, pass_k=[1])
    assert summary["pass@1"] == summary["success"] == 0.0
    assert (summary["pass@1_lo"], summary["pass@1_hi"]) == (
        summary["success_lo"], summary["success_hi"]) == pytest.approx((0.0, 0.1936), abs=1e-4)
