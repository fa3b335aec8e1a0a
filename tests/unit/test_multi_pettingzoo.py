"""pz:<game>: PettingZoo's classic tic-tac-toe and connect four as multi-agent text envs."""

from __future__ import annotations

import random
import subprocess
import sys
import warnings

import pytest

from turnrl.envs.multi import check_multi_env, play_episode, random_policy
from turnrl.envs.multi.pettingzoo import PREFIXES, RESOLVER
from turnrl.envs.multi.pettingzoo.adapter import PettingZooEnv
from turnrl.envs.multi.pettingzoo.boards import TicTacToeBoard
from turnrl.envs.registry import UnknownEnvError

pettingzoo = pytest.importorskip("pettingzoo")

TICTACTOE, CONNECT_FOUR = "pz:tictactoe_v3", "pz:connect_four_v3"


def game(env_id: str, **kwargs) -> PettingZooEnv:
    env = RESOLVER.make(env_id, **kwargs)
    assert isinstance(env, PettingZooEnv)
    return env


def scripted(*moves: str):
    """A policy replying ``moves`` in order."""
    replies = iter(moves)
    policy = lambda env, agent: next(replies)  # noqa: E731
    return policy


def last_message(env: PettingZooEnv, agent: str) -> str:
    return env.observe(agent)[-1]["content"]


# -- ids, specs and the contract --------------------------------------------------------------


def test_prefixes_and_specs() -> None:
    assert PREFIXES == ("pz:", "pz/")
    tictactoe, connect_four = RESOLVER.spec(TICTACTOE), RESOLVER.spec("pz/connect_four-v3")
    assert tictactoe.id == "pz/tictactoe-v3" and connect_four.id == "pz/connect_four-v3"
    assert tictactoe.agents == ("player_1", "player_2")
    assert connect_four.agents == ("player_0", "player_1")
    assert (tictactoe.max_turns, connect_four.max_turns) == (9 + 4, 42 + 4)
    assert tictactoe.reward_range == (-1.0, 1.0) and not tictactoe.has_oracle
    assert tictactoe.kwargs == {"max_invalid": 2}
    env = game(tictactoe.id, max_invalid=3)  # the turnrl id rebuilds the env
    assert env.spec.max_turns == 15 and env.spec.kwargs == {"max_invalid": 3}


@pytest.mark.parametrize("env_id", [TICTACTOE, CONNECT_FOUR])
@pytest.mark.parametrize("max_invalid", [1, 2])
def test_check_multi_env_passes(env_id: str, max_invalid: int) -> None:
    check_multi_env(game(env_id, max_invalid=max_invalid), seeds=range(3))


@pytest.mark.parametrize("env_id, hint", [
    ("pz:chess_v6", "pz:tictactoe_v3 (pz/tictactoe-v3), pz:connect_four_v3"),
    ("pz:tictactoe_v2", "supports pz:tictactoe_v3 only"),
    ("pz/connect_four-v9", "supports pz:connect_four_v3 only"),
    ("pz:tictacto_v3", "did you mean 'pz:tictactoe_v3'?"),
])
def test_unsupported_games_name_the_supported_ones(env_id: str, hint: str) -> None:
    with pytest.raises(UnknownEnvError, match="Supported games") as caught:
        RESOLVER.spec(env_id)
    assert hint in str(caught.value)


def test_bad_options() -> None:
    with pytest.raises(TypeError, match="accept: max_invalid"):
        RESOLVER.make(TICTACTOE, render_mode="human")
    with pytest.raises(ValueError, match="max_invalid must be an int >= 1"):
        RESOLVER.make(TICTACTOE, max_invalid=0)


def test_the_package_imports_without_pettingzoo() -> None:
    code = """
import sys
sys.modules["pettingzoo"] = None  # any import of pettingzoo fails
from turnrl.envs.multi.pettingzoo import RESOLVER
from turnrl.envs.registry import UnknownEnvError
try:
    RESOLVER.spec("pz:tictactoe_v3")
except ImportError as error:
    assert "pip install 'turnrl[multi]'" in str(error), error
else:
    raise AssertionError("no ImportError")
try:
    RESOLVER.make("pz:chess_v6")
except UnknownEnvError as error:
    assert "pz:tictactoe_v3" in str(error), error
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    clean = "import sys, turnrl.envs.multi.pettingzoo; assert 'pettingzoo' not in sys.modules"
    subprocess.run([sys.executable, "-c", clean], check=True)


def test_a_missing_pygame_names_the_extra() -> None:
    code = """
import sys
sys.modules["pygame"] = None  # PettingZoo's classic games import pygame
from turnrl.envs.multi.pettingzoo import RESOLVER
try:
    RESOLVER.make("pz:connect_four_v3")
except ImportError as error:
    assert "'pygame'" in str(error) and "turnrl[multi]" in str(error), error
else:
    raise AssertionError("no ImportError")
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_pettingzoo_without_a_registry_builds_from_the_module(monkeypatch) -> None:
    monkeypatch.delattr(pettingzoo, "make")  # as before pettingzoo 1.27
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 1.27 deprecates the modules
        env = game(TICTACTOE)
    check_multi_env(env, seeds=[0])


# -- tic-tac-toe ------------------------------------------------------------------------------


@pytest.mark.parametrize("number", range(1, 10))
def test_tictactoe_numbers_match_the_board_and_pettingzoo(number: int) -> None:
    env = game(TICTACTOE)
    env.reset(seed=0)
    assert env.legal_moves() == list(range(1, 10))
    env.step(str(number))
    squares = env.pettingzoo_env.unwrapped.board.squares
    action = TicTacToeBoard().action(number)
    assert squares[action] == 1 and sum(squares) == 1
    # PettingZoo's layout is column-major (0 3 6 / 1 4 7 / 2 5 8): row action % 3, column
    # action // 3; the text numbers squares row by row
    row, column = divmod(number - 1, 3)
    assert (action % 3, action // 3) == (row, column)
    board = last_message(env, "player_2").split("\n\n")[1]
    cells = [line.split("|") for line in board.splitlines() if "|" in line]
    assert cells[row][column].strip() == "X"
    assert [c.strip() for line in cells for c in line].count("X") == 1
    assert env.legal_moves() == [n for n in range(1, 10) if n != number]


def test_tictactoe_row_win() -> None:
    env = game(TICTACTOE)
    # X: 1, 2, 3 (the top row); O: 4, 5
    episode = play_episode(env, {"player_1": scripted("1", "2", "3"),
                                 "player_2": scripted("4", "5")}, seed=7)
    assert episode.steps == 5 and env.agents == []
    assert episode.returns == {"player_1": 1.0, "player_2": -1.0}
    assert episode.outcomes == {"player_1": "win", "player_2": "loss"}
    final = last_message(env, "player_1")
    assert final.startswith("You played 3.") and final.endswith("Game over: you win.")
    assert " X | X | X\n---+---+---\n O | O | 6\n---+---+---\n 7 | 8 | 9" in final
    loser = last_message(env, "player_2")  # the same board from O's side
    assert loser.startswith("X played 3.") and loser.endswith("Game over: you lose.")
    assert " X | X | X\n---+---+---\n O | O | 6" in loser


def test_opening_messages() -> None:
    env = game(TICTACTOE)
    info = env.reset(seed=0)
    assert info["marks"] == {"player_1": "X", "player_2": "O"} and info["first"] == "player_1"
    first, second = env.observe("player_1"), env.observe("player_2")
    assert [m["role"] for m in first] == ["system", "user"]
    assert "as X against O" in first[0]["content"] and "Legal moves: 1, 2, 3" in first[1]["content"]
    assert [m["role"] for m in second] == ["system"] and "as O against X" in second[0]["content"]
    env.step("5")
    assert last_message(env, "player_2").startswith("X played 5.")
    assert "Your move (O). Legal moves: 1, 2, 3, 4, 6, 7, 8, 9." in last_message(env, "player_2")


# -- connect four -----------------------------------------------------------------------------


def test_connect_four_vertical_win() -> None:
    env = game(CONNECT_FOUR)
    # X drops four in column 1, O three in column 2
    episode = play_episode(env, {"player_0": scripted("1", "1", "1", "1"),
                                 "player_1": scripted("2", "2", "2")}, seed=0)
    assert episode.steps == 7
    assert episode.returns == {"player_0": 1.0, "player_1": -1.0}
    assert episode.outcomes == {"player_0": "win", "player_1": "loss"}
    board = last_message(env, "player_0").split("\n\n")[1].splitlines()
    assert board[:2] == [". . . . . . ."] * 2
    assert board[2] == "X . . . . . ."
    assert board[3:6] == ["X O . . . . ."] * 3
    assert board[6] == "1 2 3 4 5 6 7"
    squares = env.pettingzoo_env.unwrapped.board  # row-major, row 5 at the bottom
    assert [squares[7 * row] for row in range(2, 6)] == [1, 1, 1, 1]


def test_connect_four_full_column_is_invalid() -> None:
    env = game(CONNECT_FOUR, max_invalid=2)
    env.reset(seed=0)
    for _ in range(6):
        env.step("3")
    assert 3 not in env.legal_moves() and env.agent_selection == "player_0"
    result = env.step("3")
    assert result.infos["player_0"]["invalid_action"] and env.agent_selection == "player_0"
    assert "column 3 is full" in last_message(env, "player_0")


# -- invalid replies --------------------------------------------------------------------------


def test_invalid_replies_keep_the_turn_then_forfeit() -> None:
    env = game(TICTACTOE, max_invalid=2)
    env.reset(seed=0)
    result = env.step("hello")
    assert result.infos["player_1"] == {"invalid_action": True, "move": None}
    assert result.rewards == {"player_1": 0.0, "player_2": 0.0}
    assert not any(result.terminations.values()) and env.agent_selection == "player_1"
    assert "'hello' is not a square number" in last_message(env, "player_1")
    assert "1 more invalid reply and you forfeit" in last_message(env, "player_1")
    result = env.step("1")
    assert result.infos["player_1"]["invalid_action"] is False
    assert env.agent_selection == "player_2"
    env.step("1")  # taken
    assert "square 1 is taken" in last_message(env, "player_2")
    assert env.agent_selection == "player_2"
    result = env.step("10")  # player_2's second invalid reply: it forfeits
    assert result.rewards == {"player_1": 1.0, "player_2": -1.0}
    assert all(result.terminations.values()) and env.agents == []
    assert result.infos["player_2"]["outcome"] == "loss" and result.infos["player_2"]["forfeit"]
    assert result.infos["player_1"]["outcome"] == "win"
    assert "there is no square 10" in last_message(env, "player_2")
    assert last_message(env, "player_1") == "O forfeited after 2 invalid replies: you win."
    assert env.pettingzoo_env.unwrapped.board.squares == [1] + [0] * 8  # no illegal move passed
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("2")


def test_max_invalid_one_forfeits_at_once() -> None:
    env = game(CONNECT_FOUR, max_invalid=1)
    env.reset(seed=0)
    result = env.step(" 8 ")
    assert result.rewards == {"player_0": -1.0, "player_1": 1.0} and env.agents == []


# -- random play ------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", [TICTACTOE, CONNECT_FOUR])
def test_random_play_ends_and_is_zero_sum(env_id: str) -> None:
    env = game(env_id)
    outcomes = set()
    for seed in range(50):
        rng = random.Random(seed)
        episode = play_episode(env, dict.fromkeys(env.spec.agents, random_policy(rng)),
                               seed=seed)
        assert episode.steps <= env.spec.max_turns and not episode.truncated
        assert sum(episode.returns.values()) == 0.0
        assert sum(episode.invalid_actions.values()) == 0
        pair = tuple(sorted(o or "" for o in episode.outcomes.values()))
        assert pair in {("loss", "win"), ("draw", "draw")}
        outcomes.add(pair)
    assert ("loss", "win") in outcomes


def test_sample_action_is_a_legal_move() -> None:
    env = game(CONNECT_FOUR)
    env.reset(seed=0)
    for _ in range(6):
        env.step("4")
    rng = random.Random(0)
    assert {env.sample_action(rng) for _ in range(200)} == {"1", "2", "3", "5", "6", "7"}
