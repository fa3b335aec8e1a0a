"""Collapse alarms: each rule fires on a constructed metric stream, after `patience` steps."""

from __future__ import annotations

import pytest

from turnrl.rollout.stats import repeated_outputs
from turnrl.train.alarms import AlarmMonitor, default_rules
from turnrl.types import Trajectory


def fired_at(metric: str, values: list[float], *, patience: int = 2, **thresholds) -> list[int]:
    """Steps (1-based) at which some alarm fires for a stream of one metric's values."""
    monitor = AlarmMonitor(default_rules(**thresholds), patience=patience)
    return [step for step, value in enumerate(values, start=1)
            if monitor.check({metric: value})[0]]


@pytest.mark.parametrize(("metric", "values", "expected"), [
    ("loss/entropy", [0.5, 0.005, 0.004, 0.3, 0.001], [3]),  # two in a row, then recovers
    ("reward/frac_zero_std_groups", [0.5, 1.0, 1.0, 1.0], [3, 4]),
    ("rollout/kl_ref", [0.1, 2.0, 3.0], [3]),
    ("rollout/repeated_outputs", [0.2, 1.0, 1.0], [3]),
    # relative to the first step: 20 tokens, then 3 < 0.2 x 20 twice
    ("rollout/sampled_tokens", [20.0, 18.0, 3.0, 2.0], [4]),
])
def test_each_rule_fires_after_patience_steps(metric, values, expected) -> None:
    assert fired_at(metric, values) == expected


def test_grad_norm_spike_is_relative_to_the_recent_median() -> None:
    stream = [1.0, 1.2, 0.9, 1.1, 30.0, 1.0, 0.8]
    assert fired_at("loss/grad_norm", stream, patience=1) == [5]
    # the same 30 in a noisier history (median 8) is no spike; a 100 is
    assert fired_at("loss/grad_norm", [8, 6, 9, 8, 30, 100], patience=1) == [6]
    # too little history: silent
    assert fired_at("loss/grad_norm", [1.0, 50.0], patience=1) == []


def test_a_solved_tasks_tiny_gradients_are_no_spike_below_the_clipping_norm() -> None:
    # every group's rewards equal: gradients near 0, so 0.02 is 20x the median (the soak run
    # raised this false alarm); below max_grad_norm the step is no larger than a clipped one
    quiet = [0.001, 0.0008, 0.0012, 0.001, 0.02, 0.0067]
    assert fired_at("loss/grad_norm", quiet, patience=1) == [5]  # without a floor
    assert fired_at("loss/grad_norm", quiet, patience=1, max_grad_norm=1.0) == []
    assert fired_at("loss/grad_norm", [*quiet, 3.0], patience=1, max_grad_norm=1.0) == [7]


def test_missing_metrics_leave_rules_silent_and_flags_name_every_watched_metric() -> None:
    monitor = AlarmMonitor(default_rules(), patience=1)
    fired, flags = monitor.check({"loss/entropy": 0.001, "reward/mean": 0.3})
    assert fired == ["alarm/entropy_collapse"]
    assert flags == {"alarm/entropy_collapse": 1.0}  # no KL, no grad norm: no flags
    fired, flags = monitor.check({"loss/entropy": 0.2})
    assert fired == [] and flags == {"alarm/entropy_collapse": 0.0}


def test_thresholds_come_from_config_values() -> None:
    assert fired_at("loss/entropy", [0.3, 0.3], min_entropy=0.5) == [2]
    assert fired_at("loss/entropy", [0.3, 0.3], min_entropy=0.1) == []


def traj(group: int, sampled: list[int]) -> Trajectory:
    ids = [1, 2, *sampled]
    mask = [0, 0] + [1] * len(sampled)
    return Trajectory(env_id="t", seed=group, group_id=group, messages=[], token_ids=ids,
                      loss_mask=mask, logprobs=[0.0] * len(ids), turn_index=[0] * len(ids),
                      turn_rewards=[0.0], terminated=True, truncated=False, info={})


def test_repeated_outputs_counts_episodes_that_repeat_one_of_their_group() -> None:
    batch = [traj(0, [5, 6]), traj(0, [5, 6]), traj(0, [7]), traj(1, [5, 6]), traj(1, [8])]
    assert repeated_outputs(batch) == pytest.approx(2 / 5)  # the same reply in group 1: no
    assert repeated_outputs([traj(0, [1]), traj(0, [1]), traj(0, [1])]) == 1.0


def test_non_finite_values_leave_rules_as_they_were() -> None:
    assert fired_at("loss/entropy", [0.001, float("nan"), 0.001]) == [3]
    assert fired_at("loss/grad_norm", [1.0, 1.1, 0.9, float("nan"), 30.0], patience=1) == [5]


def test_only_actionable_alarms_stop_or_roll_back() -> None:
    from turnrl.train.alarms import ACTIONABLE

    assert set(ACTIONABLE) == {f"alarm/{rule.name}" for rule in default_rules()}
    assert not ACTIONABLE["alarm/reward_std_zero"] and not ACTIONABLE["alarm/repeated_outputs"]
    assert ACTIONABLE["alarm/entropy_collapse"]


def test_groups_of_one_report_no_reward_spread() -> None:
    from turnrl.rollout.stats import rollout_metrics

    metrics = rollout_metrics([traj(0, [1]), traj(1, [2])])
    assert "reward/frac_zero_std_groups" not in metrics and "reward/group_std" not in metrics
