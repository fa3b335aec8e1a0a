"""tictactoe-v0 and the multi-agent contract: turn order, per-agent rewards and outcomes, the
minimax oracle, invalid replies, and check_multi_env catching broken envs."""

from __future__ import annotations

import random

import pytest

from turnrl.envs import EnvCheckError, make
from turnrl.envs.multi import (
    MultiStepResult,
    check_multi_env,
    oracle_policy,
    play_episode,
    random_policy,
)
from turnrl.envs.multi.tictactoe import TicTacToe, best_moves, minimax, render, winner


def moves(*squares: int):
    """A policy for both agents that plays ``squares`` in order."""
    queue = list(squares)
    return lambda env, agent: str(queue.pop(0))


def test_turns_alternate_and_a_row_wins_for_x():
    env = make("tictactoe-v0")
    env.reset(seed=0)
    order = []
    for square in (1, 4, 2, 5):
        order.append(env.agent_selection)
        result = env.step(str(square))
        assert result.rewards == {"x": 0.0, "o": 0.0} and env.agents == ["x", "o"]
    assert order == ["x", "o", "x", "o"]
    result = env.step("3")
    assert result.rewards == {"x": 1.0, "o": -1.0}
    assert result.terminations == {"x": True, "o": True} and env.agents == []
    assert result.infos["x"]["outcome"] == "win" and result.infos["o"]["outcome"] == "loss"
    last = env.observe("o")[-2]["content"]
    assert last.startswith("X played 3.\nX|X|X\nO|O|6\n7|8|9")
    assert env.observe("x")[-1]["content"] == "You won."


def test_each_agent_sees_only_its_own_replies_and_the_board():
    env = make("tictactoe-v0")
    env.reset(seed=1)
    env.step("5")
    env.step("1")
    x, o = env.observe("x"), env.observe("o")
    assert [m["content"] for m in x if m["role"] == "assistant"] == ["5"]
    assert [m["content"] for m in o if m["role"] == "assistant"] == ["1"]
    assert x[-1]["content"] == "O played 1.\nO|2|3\n4|X|6\n7|8|9\nYour move."


def test_invalid_replies_keep_the_turn_then_forfeit():
    env = make("tictactoe-v0", max_invalid=2)
    env.reset(seed=0)
    env.step("5")
    result = env.step("5")  # taken
    assert result.infos["o"]["invalid_action"] and env.agent_selection == "o"
    assert "square 5 is taken" in env.observe("o")[-1]["content"]
    result = env.step("the middle")
    assert result.rewards == {"x": 1.0, "o": -1.0} and env.agents == []
    assert result.infos["o"] == {"outcome": "loss", "invalid_action": True}


def test_out_of_turns_truncates_without_rewards():
    env = TicTacToe(max_invalid=9, max_turns=3)
    env.reset(seed=0)
    env.step("1")
    env.step("x")
    result = env.step("2")
    assert result.truncations == {"x": True, "o": True} and not any(result.terminations.values())
    assert result.rewards == {"x": 0.0, "o": 0.0} and env.agents == []


def test_minimax_values_and_the_oracle_never_loses():
    assert minimax("." * 9, "x") == 0  # perfect play draws
    assert minimax("xx.oo....", "x") == 1 and best_moves("xx.oo....", "x") == [2]
    assert best_moves("xx..o....", "o") == [2] and minimax("xx..o....", "o") == 0  # block
    assert winner("xxxoo....") == "x" and winner("x.o.o.o.x") == "o" and winner("." * 9) is None
    assert render("x...o....") == "X|2|3\n4|O|6\n7|8|9"
    env = make("tictactoe-v0")
    outcomes = {"x": [], "o": []}
    for seed in range(60):
        for oracle in ("x", "o"):
            other = "o" if oracle == "x" else "x"
            episode = play_episode(env, {oracle: oracle_policy,
                                         other: random_policy(random.Random(seed))}, seed=seed)
            outcomes[oracle].append(episode.outcomes[oracle])
            assert episode.returns[oracle] == -episode.returns[other]  # zero-sum
    assert "loss" not in outcomes["x"] + outcomes["o"]
    assert outcomes["x"].count("win") > 45  # random play loses most games to the oracle
    both = play_episode(env, {"x": oracle_policy, "o": oracle_policy}, seed=3)
    assert both.outcomes == {"x": "draw", "o": "draw"} and both.steps == 9


def test_the_oracle_varies_over_seeds_and_replays_exactly():
    env = make("tictactoe-v0")
    first = {play_episode(env, {"x": oracle_policy, "o": oracle_policy}, seed=s)
             .conversations["x"][1]["content"] for s in range(20)}
    assert len(first) > 1
    again = [play_episode(env, {"x": oracle_policy, "o": oracle_policy}, seed=7).conversations
             for _ in range(2)]
    assert again[0] == again[1]


def test_play_episode_names_a_missing_policy():
    with pytest.raises(KeyError, match=r"no policy for agent\(s\) \['o'\]"):
        play_episode(make("tictactoe-v0"), {"x": oracle_policy}, seed=0)


# ----------------------------------------------------------------------------- the checker
class Broken(TicTacToe):
    """tictactoe-v0 with one fault switched on."""

    def __init__(self, fault: str) -> None:
        super().__init__()
        self.fault = fault

    def step(self, action: str) -> MultiStepResult:
        result = super().step(action)
        if self.fault == "rewrites" and self.table.conversations["x"]:
            self.table.conversations["x"][0] = {"role": "user", "content": "changed"}
        if self.fault == "missing_agent":
            return MultiStepResult({"x": 0.0}, result.terminations, result.truncations)
        if self.fault == "reward":
            return MultiStepResult({"x": 5.0, "o": 0.0}, result.terminations,
                                   result.truncations)
        if self.fault == "outcome":
            return MultiStepResult(result.rewards, result.terminations, result.truncations,
                                   {"x": {"outcome": "won"}})
        return result

    def observe(self, agent: str):
        messages = super().observe(agent)
        if self.fault == "no_reply":
            return [m for m in messages if m["role"] != "assistant"]
        return messages


@pytest.mark.parametrize("fault, message", [
    ("rewrites", "changed a message it had shown"),
    ("missing_agent", r"step\(\).rewards has keys \['x'\]"),
    ("reward", "reward 5.0 is not a finite number in spec.reward_range"),
    ("outcome", "outcome 'won' is not one of"),
    ("no_reply", "is not in its conversation as an assistant message"),
])
def test_check_multi_env_names_what_is_broken(fault, message):
    with pytest.raises(EnvCheckError, match=message):
        check_multi_env(Broken(fault), seeds=range(2))


def test_check_multi_env_refuses_an_env_of_one_agent():
    with pytest.raises(EnvCheckError, match=r"spec\.agents is empty"):
        check_multi_env(make("guess-v0"))


def test_play_terminal_lets_a_person_play_one_agent():
    from turnrl.envs.multi import play_terminal

    shown: list[str] = []
    replies = iter(["5", "1", "9", "3", "7", "2", "4", "6", "8"])
    env = make("tictactoe-v0")
    episode = play_terminal(env, seed=0, human="o", opponent="oracle",
                            read=lambda prompt: next(r for r in replies
                                                     if str(int(r) - 1) in
                                                     [str(i) for i in env.empty()]),
                            show=shown.append)
    assert episode.outcomes["o"] in ("loss", "draw")  # the oracle never loses
    assert any(line.startswith("[o | user] X played") for line in shown)
    assert not any(line.startswith("[o | assistant]") for line in shown)  # typed, not echoed
    assert shown[-1].startswith("-- x: ")
    stopped = play_terminal(make("tictactoe-v0"), seed=0, human="x", read=lambda _: "",
                            show=shown.append)
    assert stopped.returns == {} and shown[-1] == "-- stopped"
    with pytest.raises(ValueError, match="--opponent 'minimax': choose one of random, oracle"):
        play_terminal(make("tictactoe-v0"), seed=0, opponent="minimax")
