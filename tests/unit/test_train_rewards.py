"""The loop's config-derived pieces: reward.terms on the last turn, the configured env spec."""

from __future__ import annotations

import pytest

from turnrl.cli import main
from turnrl.config import Config, ConfigError, load_config
from turnrl.rewards import combine
from turnrl.train.scoring import Shaping, outcome_rewards, reward_term_metrics, score_episodes
from turnrl.train.setup import build_rewards
from turnrl.types import EpisodeCounts, Trajectory


def episode(reply: str, *, turn_rewards: list[float], tool_calls: int = 0) -> Trajectory:
    return Trajectory(env_id="x-v0", seed=0, group_id=0,
                      messages=[{"role": "user", "content": "2+2?"},
                                {"role": "assistant", "content": reply}],
                      turn_rewards=list(turn_rewards),
                      counts=EpisodeCounts(tool_calls=tool_calls), info={"answer": "4"})


def test_terms_land_on_the_last_turn_and_env_rewards_are_weighted() -> None:
    rewards = combine([{"name": "exact_match", "weight": 2.0},
                       {"name": "tool_cost", "kwargs": {"cost": 0.25}}])
    right = episode("4", turn_rewards=[0.5, 1.0], tool_calls=2)
    wrong = episode("5", turn_rewards=[0.0, 0.0], tool_calls=0)
    scores = score_episodes([right, wrong], rewards)
    shaped = outcome_rewards([right, wrong], scores, Shaping(env_weight=0.5))
    metrics = reward_term_metrics(scores)
    # right: env [0.5, 1.0] x 0.5 = [0.25, 0.5]; + 2·1 (exact match) − 0.25·2 (two calls)
    assert shaped.turn_rewards[0].tolist() == pytest.approx([0.25, 0.5 + 2.0 - 0.5])
    assert shaped.turn_rewards[1].tolist() == pytest.approx([0.0, 0.0])
    assert shaped.outcomes.tolist() == pytest.approx([0.25 + 2.0, 0.0])
    assert scores[0].total == pytest.approx(2.0 - 0.5)
    # the trajectories keep the env's rewards
    assert right.turn_rewards == [0.5, 1.0] and wrong.turn_rewards == [0.0, 0.0]
    # unweighted means over the episodes
    assert metrics == pytest.approx({"reward/exact_match": 0.5, "reward/tool_cost": -0.25})


def test_no_terms_only_scales_the_env_rewards() -> None:
    ep = episode("4", turn_rewards=[1.0])
    scores = score_episodes([ep], None)
    shaped = outcome_rewards([ep], scores, Shaping(env_weight=1.0))
    assert shaped.turn_rewards.tolist() == [[1.0]] and reward_term_metrics(scores) == {}
    assert ep.turn_rewards == [1.0]
    assert build_rewards(Config()) is None


def test_bad_reward_terms_are_config_errors(tmp_path, capsys) -> None:
    with pytest.raises(ConfigError, match="exact_match"):
        build_rewards(load_config(None, ["reward.terms=[{name: exact_mach}]"]))
    with pytest.raises(ConfigError, match="no_such_module"):
        build_rewards(load_config(None, ["reward.terms=[no_such_module:fn]"]))
    assert main(["train", "reward.terms=[{name: f1, wieght: 2}]"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "wieght" in err and "reward.terms" in err


def test_the_trainer_reads_the_spec_of_the_configured_env(tmp_path) -> None:
    from turnrl.config.checks import validate
    from turnrl.train.setup import build_learner, open_run

    cfg = load_config(None, [f"run.out_dir={tmp_path}", "env.id=frozenlake-v0",
                             "env.kwargs={max_turns: 16, min_size: 6, max_size: 6}",
                             "rollout.max_new_tokens=8", "train.steps=0"])
    checked = validate(cfg)
    assert checked.env_spec.max_turns == 16  # not the registered default of 10
    run = open_run(checked)
    try:
        learner = build_learner(run, source=None, reference=None)
        assert learner.norm_len == 16 * 8  # dr_grpo's constant: turns x tokens
    finally:
        run.logger.close()
