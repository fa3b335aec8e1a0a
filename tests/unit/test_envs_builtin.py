"""The built-in envs: arithmetic-v0 and frozenlake-v0."""

from __future__ import annotations

import random
import re

import pytest
from env_episodes import play, play_oracle

from turnrl.envs import make
from turnrl.envs.builtin.arithmetic import Arithmetic
from turnrl.envs.builtin.frozenlake import (
    GOAL_TEXT,
    HOLE_TEXT,
    INSTRUCTION,
    INVALID,
    FrozenLake,
    parse_map,
    shortest_distances,
)

SEEDS = range(200)



# -- arithmetic-v0 --------------------------------------------------------------------------


def test_arithmetic_prompt_format_and_operand_range():
    env = make("arithmetic-v0", min_value=3, max_value=7)
    seen = set()
    for seed in range(100):
        messages, info = env.reset(seed=seed)
        assert info == {}
        assert len(messages) == 1 and messages[0]["role"] == "user"
        match = re.fullmatch(r"(\d+)\+(\d+)=", messages[0]["content"])
        assert match, messages
        a, b = int(match[1]), int(match[2])
        assert 3 <= a <= 7 and 3 <= b <= 7
        seen.update((a, b))
    assert seen == set(range(3, 8))


def test_arithmetic_default_prompt_is_compact():
    messages, _ = make("arithmetic-v0").reset(seed=0)
    assert re.fullmatch(r"\d{1,2}\+\d{1,2}=", messages[0]["content"])


def test_arithmetic_ops_all_appear():
    env = Arithmetic(ops="+-*")
    ops = {re.search(r"\d([+\-*])", env.reset(seed=s)[0][0]["content"])[1] for s in range(60)}
    assert ops == {"+", "-", "*"}


@pytest.mark.parametrize("reply", ["{answer}", " {answer}\n", "+{answer}"])
def test_arithmetic_correct_reply(reply):
    env = make("arithmetic-v0")
    env.reset(seed=1)
    answer = env.oracle_action()
    result = env.step(reply.format(answer=answer))
    assert result.reward == 1.0 and result.terminated and not result.truncated
    assert result.info == {"success": True}
    assert result.observation == [{"role": "user", "content": "Correct."}]
    assert env.oracle_action() is None


@pytest.mark.parametrize("reply", ["wrong", "%%%garbage%%%", "", "{answer}.0", "{answer} apples"])
def test_arithmetic_wrong_reply(reply):
    env = make("arithmetic-v0")
    messages, _ = env.reset(seed=2)
    a, b = map(int, messages[0]["content"].rstrip("=").split("+"))
    result = env.step(reply.format(answer=a + b))
    assert result.reward == 0.0 and result.terminated and not result.truncated
    assert result.info == {"success": False}
    assert result.observation[0]["content"] == f"Wrong, the answer is {a + b}."


def test_arithmetic_negative_answers():
    env = Arithmetic(ops="-")
    for seed in range(30):
        env.reset(seed=seed)
        assert env.step(env.oracle_action()).reward == 1.0


def test_arithmetic_seeding():
    env = make("arithmetic-v0")
    assert env.reset(seed=5) == env.reset(seed=5)
    assert len({env.reset(seed=s)[0][0]["content"] for s in range(20)}) > 10


def test_arithmetic_misuse_errors():
    with pytest.raises(ValueError, match="ops"):
        Arithmetic(ops="/")
    with pytest.raises(ValueError, match="min_value"):
        Arithmetic(min_value=5, max_value=1)
    env = Arithmetic()
    with pytest.raises(RuntimeError, match="reset"):
        env.step("1")


# -- oracles ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("arithmetic-v0", {}),
        ("arithmetic-v0", {"ops": "+-*"}),
        ("frozenlake-v0", {}),
        ("frozenlake-v0", {"random_positions": True}),
        ("frozenlake-v0", {"hole_prob": 0.4}),
    ],
)
def test_oracle_always_succeeds(env_id, kwargs):
    env = make(env_id, **kwargs)
    for seed in SEEDS:
        result, transcript = play_oracle(env, seed)
        assert result.terminated and result.reward == 1.0 and result.info["success"], transcript
        assert len(transcript) - 1 <= env.spec.max_turns


# -- frozenlake-v0: maps ----------------------------------------------------------------------


def grid_of(messages):
    return messages[-1]["content"].split("\n")


def test_frozenlake_reset_format():
    env = make("frozenlake-v0")
    messages, info = env.reset(seed=0)
    assert messages[0] == {"role": "system", "content": INSTRUCTION}
    assert messages[0]["content"] == "Reach G and avoid H. Reply up, down, left or right."
    assert messages[1]["role"] == "user" and len(messages) == 2
    rows = grid_of(messages)
    assert set("".join(rows)) <= set("AGH.")
    assert info["size"] == len(rows) and info["shortest_path"] >= 2 * (len(rows) - 1)


def test_frozenlake_maps_are_solvable_sized_and_cornered():
    env = make("frozenlake-v0")
    sizes = set()
    for seed in SEEDS:
        messages, info = env.reset(seed=seed)
        rows = grid_of(messages)
        size = len(rows)
        sizes.add(size)
        assert all(len(row) == size for row in rows)
        assert rows[0][0] == "A" and rows[-1][-1] == "G"
        assert "".join(rows).count("A") == 1 and "".join(rows).count("G") == 1
        map_rows, agent = parse_map(rows)
        distance = shortest_distances(map_rows).get(agent)
        assert distance is not None and distance <= env.spec.max_turns
        assert info["shortest_path"] == distance
    assert sizes == {4, 5}


def test_frozenlake_has_holes_at_roughly_hole_prob():
    env = make("frozenlake-v0")
    text = "".join("".join(grid_of(env.reset(seed=s)[0])) for s in SEEDS)
    assert 0.1 < text.count("H") / len(text) < 0.25


def test_frozenlake_size_range_and_fixed_size():
    env = make("frozenlake-v0", min_size=3, max_size=3, max_turns=6)
    assert {len(grid_of(env.reset(seed=s)[0])) for s in range(50)} == {3}
    env = make("frozenlake-v0", min_size=2, max_size=6, max_turns=12)
    assert {len(grid_of(env.reset(seed=s)[0])) for s in range(200)} == {2, 3, 4, 5, 6}


def test_frozenlake_random_positions():
    env = make("frozenlake-v0", random_positions=True)
    corners = 0
    for seed in range(100):
        rows = grid_of(env.reset(seed=seed)[0])
        text = "".join(rows)
        assert text.count("A") == 1 and text.count("G") == 1
        corners += rows[0][0] == "A" and rows[-1][-1] == "G"
    assert corners < 20


def test_frozenlake_determinism():
    env, other = make("frozenlake-v0"), make("frozenlake-v0")
    actions = ["down", "right", "jump", "up", "left", "right", "down", "down", "right", "right"]
    for seed in range(20):
        first = play(env, seed, actions)
        assert play(other, seed, actions) == first
        assert play(env, seed, actions) == first
    maps = {env.reset(seed=s)[0][1]["content"] for s in range(20)}
    assert len(maps) > 15


def test_frozenlake_unseeded_reset_continues_the_stream():
    env = make("frozenlake-v0")
    env.reset(seed=3)
    first = [env.reset()[0] for _ in range(3)]
    env.reset(seed=3)
    assert [env.reset()[0] for _ in range(3)] == first


# -- frozenlake-v0: moves -------------------------------------------------------------------


def lake(*rows, **kwargs):
    env = make("frozenlake-v0", **kwargs)
    env.reset(seed=0, options={"map": list(rows)})
    return env


def test_frozenlake_move_and_observation():
    env = lake("A..", ".H.", "..G")
    result = env.step("right")
    assert result.observation == [{"role": "user", "content": ".A.\n.H.\n..G"}]
    assert (result.reward, result.terminated, result.truncated) == (0.0, False, False)
    assert result.info == {"success": False, "invalid_action": False}


def test_frozenlake_privileged_info_is_a_shortest_plan_from_the_agent():
    env = lake("A..", ".H.", "..G")
    assert env.spec.has_privileged_info
    assert env.privileged_info() == "shortest path: down, down, right, right (4 moves)"
    env.step("down")
    assert env.privileged_info() == "shortest path: down, right, right (3 moves)"
    # the plan is what the oracle would play, and it is not in the agent's observation
    assert env.privileged_info().split(": ")[1].startswith(env.oracle_action())
    assert "shortest" not in env.render()
    assert lake("AH.", "H..", "..G").privileged_info() == "no path to G"


def test_frozenlake_wall_bump_stays_in_place():
    env = lake("A..", ".H.", "..G")
    for move in ("up", "left"):
        result = env.step(move)
        assert result.observation[0]["content"] == "A..\n.H.\n..G"
        assert not result.terminated and not result.truncated
        assert result.info["invalid_action"] is False
    env = lake("..A", "G..")  # maps may be rectangular
    assert env.step("right").observation[0]["content"] == "..A\nG.."


def test_frozenlake_goal_and_hole():
    env = lake("A.", ".G")
    env.step("right")
    result = env.step("down")
    assert result.observation == [{"role": "user", "content": GOAL_TEXT}]
    assert (result.reward, result.terminated, result.truncated) == (1.0, True, False)
    assert result.info == {"success": True, "invalid_action": False}
    assert env.oracle_action() is None
    with pytest.raises(RuntimeError, match="reset"):
        env.step("up")

    env = lake("AH", ".G")
    result = env.step("right")
    assert result.observation == [{"role": "user", "content": HOLE_TEXT}]
    assert (result.reward, result.terminated, result.truncated) == (0.0, True, False)
    assert result.info == {"success": False, "invalid_action": False}


@pytest.mark.parametrize("reply", ["jump", "%%%garbage%%%", "", "go up", "u", "up!"])
def test_frozenlake_invalid_action(reply):
    env = lake("A..", ".H.", "..G")
    result = env.step(reply)
    assert result.observation == [
        {"role": "user", "content": "Invalid action. Reply up, down, left or right.\nA..\n.H.\n..G"}
    ]
    assert result.observation[0]["content"].startswith(INVALID)
    assert (result.reward, result.terminated, result.truncated) == (0.0, False, False)
    assert result.info == {"success": False, "invalid_action": True}


def test_frozenlake_actions_are_case_and_space_insensitive():
    env = lake("A..", ".H.", "..G")
    assert env.step("  Right\n").observation[0]["content"] == ".A.\n.H.\n..G"
    assert env.step("RIGHT").info["invalid_action"] is False


def test_frozenlake_truncates_at_max_turns():
    env = make("frozenlake-v0")
    env.reset(seed=0)
    results = [env.step("up" if turn % 2 else "nope") for turn in range(10)]
    assert [r.truncated for r in results] == [False] * 9 + [True]
    assert not any(r.terminated for r in results)
    assert results[-1].reward == 0.0 and results[-1].info["success"] is False


def test_frozenlake_max_turns_kwarg():
    env = FrozenLake(max_turns=15)
    assert env.spec.max_turns == 15 and env.spec.kwargs["max_turns"] == 15
    env.reset(seed=1)
    assert [env.step("left").truncated for _ in range(15)][-2:] == [False, True]
    with pytest.raises(ValueError, match="max_turns=5 is too short"):
        FrozenLake(max_turns=5)


def test_frozenlake_state_key():
    a, b = lake("A..", "...", "..G"), lake("A..", "...", "..G")
    a.step("right")
    a.step("down")
    b.step("down")
    b.step("jump")
    b.step("right")
    assert a.state_key() == b.state_key()
    hash(a.state_key())
    b.step("right")
    assert a.state_key() != b.state_key()
    assert lake("A..", "...", "..G").state_key() != lake("A..", ".H.", "..G").state_key()


def test_frozenlake_oracle_tie_break_and_shortest_path():
    env = lake("A..", "...", "..G")
    assert env.oracle_action() == "down"  # up, down, left, right order among equal paths
    env = lake("A.H", ".H.", "..G")
    path = []
    while (move := env.oracle_action()) is not None:
        path.append(move)
        env.step(move)
    assert path == ["down", "down", "right", "right"]


def test_frozenlake_bad_options_and_maps():
    env = make("frozenlake-v0")
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(seed=0, options={"size": 3})
    for bad in (["A.", "G"], ["..", ".G"], ["AA", ".G"], ["Ax", ".G"]):
        with pytest.raises(ValueError, match="equal-length rows"):
            env.reset(options={"map": bad})
    env.reset(options={"map": "A.\n.G"})  # a newline-joined string works too
    assert env.oracle_action() == "down"


def test_frozenlake_unsolvable_custom_map_has_no_oracle():
    env = lake("AH", "HG")
    assert env.oracle_action() is None


def test_frozenlake_constructor_validation():
    with pytest.raises(ValueError, match="min_size"):
        FrozenLake(min_size=5, max_size=4)
    with pytest.raises(ValueError, match="hole_prob"):
        FrozenLake(hole_prob=1.0)
    with pytest.raises(RuntimeError, match="no map solvable"):
        FrozenLake(hole_prob=0.95).reset(seed=0)


def test_sample_action_uses_the_callers_rng():
    lake_env, sum_env = make("frozenlake-v0"), make("arithmetic-v0")
    lake_env.reset(seed=0)
    sum_env.reset(seed=0)
    moves = {lake_env.sample_action(random.Random(s)) for s in range(50)}
    assert moves == {"up", "down", "left", "right"}
    answer = int(sum_env.oracle_action())
    replies = {int(sum_env.sample_action(random.Random(s))) for s in range(100)}
    assert replies <= set(range(answer - 5, answer + 6)) and answer in replies
    assert lake_env.sample_action(random.Random(1)) == lake_env.sample_action(random.Random(1))


def test_frozenlake_progress_reward_is_potential_based_shaping():
    env = FrozenLake(progress_reward=0.1)
    env.reset(options={"map": ["A..", ".H.", "..G"]})
    assert env.step("left").reward == 0.0  # bumped the edge: no progress
    assert env.step("right").reward == pytest.approx(0.1)  # 4 -> 3 moves to G
    assert env.step("left").reward == pytest.approx(-0.1)  # back: 3 -> 4
    assert env.step("jump").reward == 0.0  # invalid
    rewards = [env.step(move).reward for move in ("right", "right", "down", "down")]
    assert rewards == pytest.approx([0.1, 0.1, 0.1, 1.1])  # the goal: 1 + the last step
    env.reset(options={"map": ["A..", "H..", "..G"]})
    result = env.step("down")
    assert result.terminated and result.reward == 0.0 and not result.info["success"]
    assert env.spec.reward_range == (-0.1, 1.1)
    sparse = FrozenLake()
    sparse.reset(options={"map": ["A..", ".H.", "..G"]})
    assert sparse.step("right").reward == 0.0


@pytest.mark.parametrize("bad", [-0.1, 1.5, True])
def test_frozenlake_progress_reward_bounds(bad):
    with pytest.raises(ValueError, match="progress_reward must be in"):
        FrozenLake(progress_reward=bad)
