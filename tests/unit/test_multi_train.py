"""A run's multi-agent pieces: multi.* checked against the env, SFT demonstrations of the
roles main plays, evaluation seatings and outcome rates."""

from __future__ import annotations

import functools

import pytest

from turnrl import envs
from turnrl.config import ConfigError, load_config
from turnrl.config.checks import validate
from turnrl.train import multi
from turnrl.types import Trajectory


def check(*overrides: str) -> None:
    validate(load_config(None, ["env.id=tictactoe-v0", *overrides]))


@pytest.mark.parametrize("override, message", [
    ("multi.agents={z: oracle}", r"multi.agents.z: tictactoe-v0 has no agent 'z'; its agents "
                                 r"are x, o"),
    ("multi.agents={o: minimax}", r"'minimax' is not a player; choose one of main, oracle"),
    ("multi.agents={x: oracle, o: random}", r"no agent of tictactoe-v0 is played by main"),
    ("rollout.max_turns=3", r"rollout.max_turns: multi-agent envs .* a cap on turns"),
    ("multi.agents={o: second}", r"'second' is not a player; .* \(a separate policy is "
                                 r"named in multi.policies first, a frozen model in "
                                 r"multi.frozen_models\)"),
    ("multi.policies=[second]", r"multi.policies: no agent of multi.agents is played by "
                                r"\['second'\].*e.g. multi.agents.o=second"),
    ("multi.policies=[oracle]", r"'oracle' cannot name a policy"),
    ("multi.eval_opponents=[minimax]", r"'minimax' is not an opponent; choose from self, "
                                       r"random, oracle, frozen"),
    ("multi.frozen_models={champ: /no/such/dir}", r"multi.frozen_models.champ: '/no/such/dir' "
                                                  r"is not a model dir"),
    ("multi.frozen_models={main: /tmp}", r"'main' cannot name a frozen model"),
    ("multi.policies=[a, a]", r"names a policy twice"),
    ("multi.seatings=[{}, {q: oracle}]", r"multi.seatings\[1\].q: tictactoe-v0 has no agent "
                                         r"'q'"),
    ("multi.seatings=[{x: oracle, o: random}]", r"multi.seatings\[0\]: .* seats no agent of "
                                                r"tictactoe-v0 with main"),
    ("multi.seatings=[{o: minimax}]", r"multi.seatings\[0\].o: 'minimax' is not a player"),
    ("multi.seatings=[{o: second}]", r"'second' is not a player"),
])
def test_multi_settings_are_checked_against_the_env(override, message):
    with pytest.raises(ConfigError, match=message):
        check(override)


def test_separate_policies_refuse_what_they_do_not_run_with_yet():
    with pytest.raises(ConfigError, match=r"alarms.on_alarm: separate policies "
                       r"\(multi.policies\) do not run with rollbacks yet"):
        check("multi.policies=[second]", "multi.agents={o: second}", "alarms.on_alarm=rollback")
    check("multi.policies=[second]", "multi.agents={o: second}")  # and a good one passes


def test_separate_policies_on_an_env_of_one_agent_is_an_error():
    with pytest.raises(ConfigError, match="'guess-v0' is an env of one agent, played by main"):
        validate(load_config(None, ["env.id=guess-v0", "multi.policies=[a]"]))


def test_multi_agents_on_an_env_of_one_agent_is_an_error():
    with pytest.raises(ConfigError, match="'guess-v0' is an env of one agent"):
        validate(load_config(None, ["env.id=guess-v0", "multi.agents={x: oracle}"]))
    check("multi.agents={o: random}")  # and a good one passes


def test_demonstrations_are_the_conversations_of_the_roles_main_plays():
    make = functools.partial(envs.make, "tictactoe-v0")
    both = multi.demonstrations(make, range(4), {"x": "main", "o": "main"},
                                random_action_prob=0.0, train_random_actions=True, seed=0)
    assert len(both) == 8
    assert both[0][0]["content"].startswith("Tic-tac-toe. You are X")
    assert both[1][0]["content"].startswith("Tic-tac-toe. You are O")
    only_o = multi.demonstrations(make, range(4), {"x": "oracle", "o": "main"},
                                  random_action_prob=0.0, train_random_actions=True, seed=0)
    assert only_o == both[1::2]
    noisy = multi.demonstrations(make, range(20), {"x": "main", "o": "main"},
                                 random_action_prob=0.5, train_random_actions=False, seed=0)
    untrained = [m for c in noisy for m in c if m.get("weight") == 0]
    assert untrained and all(m["role"] == "assistant" for m in untrained)
    trained = [m for c in noisy for m in c if m["role"] == "assistant" and "weight" not in m]
    assert len(trained) > len(untrained)


def test_evaluation_seats_main_in_every_trained_seat():
    both = {"x": "main", "o": "main"}
    assert multi.opponent_seats("self", ["x", "o"], both) == [{"x": "main", "o": "main"}]
    assert multi.opponent_seats("oracle", ["x", "o"], both) == [
        {"x": "main", "o": "oracle"}, {"x": "oracle", "o": "main"}]
    assert multi.opponent_seats("random", ["x", "o"], {"o": "main"}) == [
        {"x": "random", "o": "main"}]


def test_evaluation_seats_each_separate_policy_in_its_own_seat():
    own = {"x": "main", "o": "second"}
    assert multi.opponent_seats("self", ["x", "o"], own) == [own]
    assert multi.opponent_seats("random", ["x", "o"], own) == [
        {"x": "main", "o": "random"}, {"x": "random", "o": "second"}]
    cfg = load_config(None, ["env.id=tictactoe-v0", "multi.policies=[second]",
                             "multi.agents={o: second}"])
    assert multi.trained_seats(cfg, ["x", "o"]) == own


def test_outcome_rates():
    def played(outcome):
        return Trajectory(env_id="tictactoe-v0", seed=0, group_id=0, messages=[],
                          info={"outcome": outcome})
    rates = multi.outcome_rates([played("win"), played("draw"), played("loss"),
                                 played("loss")])
    assert rates == {"success": 0.25, "win": 0.25, "draw": 0.25, "loss": 0.5}
    assert multi.outcome_rates([played("success"), played("failure")])["success"] == 0.5


def test_a_league_seats_each_group_in_turn():
    cfg = load_config(None, ["env.id=tictactoe-v0",
                             "multi.seatings=[{}, {o: oracle}, {x: pool}]"])
    assert [multi.seating_of(cfg, ["x", "o"], g) for g in range(4)] == [
        {"x": "main", "o": "main"}, {"x": "main", "o": "oracle"},
        {"x": "pool", "o": "main"}, {"x": "main", "o": "main"}]
    assert multi.uses_players(cfg)  # the pool of one seating needs the run's players
    plain = load_config(None, ["env.id=tictactoe-v0", "multi.agents={o: random}"])
    assert multi.seating_of(plain, ["x", "o"], 5) == {"x": "main", "o": "random"}
    with pytest.raises(ConfigError, match=r"multi.seatings: seatings do not run with separate "
                                          r"policies"):
        check("multi.policies=[second]", "multi.agents={o: second}", "multi.seatings=[{}]")
