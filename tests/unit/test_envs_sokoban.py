"""sokoban-v0: reverse-play levels, pushes, deadlocks, the BFS oracle and the contract."""

from __future__ import annotations

import random

import pytest
from env_episodes import play, play_oracle
from hypothesis import given, settings
from hypothesis import strategies as st

from turnrl.envs import check_env
from turnrl.envs.builtin import sokoban
from turnrl.envs.builtin.sokoban import (
    DEADLOCK_TEXT,
    INSTRUCTION,
    INVALID,
    MOVE_NAMES,
    SOLVED_TEXT,
    SPEC,
    Level,
    Sokoban,
    parse_map,
    solve,
)

SEEDS = range(200)



def board(*rows, **kwargs):
    env = Sokoban(**kwargs)
    env.reset(seed=0, options={"map": list(rows)})
    return env


def grid(result_or_messages):
    if isinstance(result_or_messages, list):
        return result_or_messages[-1]["content"]
    return result_or_messages.observation[0]["content"]


def pushes(level, player, boxes, plan):
    count = 0
    for move in plan:
        player, after = level.move(player, boxes, move)
        count += after != boxes
        boxes = after
    return count, boxes


# -- the contract ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"num_boxes": 2}, {"num_boxes": 3, "max_size": 4}, {"box_reward": 0.1},
     {"min_size": 3, "max_size": 8, "wall_prob": 0.0}],
)
def test_check_env(kwargs):
    check_env(Sokoban(**kwargs), seeds=range(5))


def test_check_env_with_the_largest_shaping():
    env = board("#######", "#@$.__#", "#_$.__#", "#######", box_reward=0.5)
    assert env.step("right").reward == 0.5 and env.step("right").reward == -0.5
    check_env(Sokoban(num_boxes=2, box_reward=0.5), seeds=range(5))


def test_spec():
    assert SPEC.id == "sokoban-v0"
    assert SPEC.entry_point == "turnrl.envs.builtin.sokoban:Sokoban"
    assert SPEC.has_oracle and SPEC.has_state_key and SPEC.has_privileged_info
    env = Sokoban(num_boxes=2, max_turns=30)
    assert env.spec.max_turns == 30 and env.spec.kwargs["num_boxes"] == 2
    assert env.spec.kwargs == {
        "min_size": 4, "max_size": 5, "num_boxes": 2, "wall_prob": 0.1, "max_pulls": 4,
        "box_reward": 0.0, "max_turns": 30,
    }
    assert env.spec.reward_range == (-0.5, 1.5)  # bounds every box_reward in [0, 0.5]


# -- generation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, seeds",
    [({}, SEEDS), ({"num_boxes": 2}, SEEDS), ({"min_size": 6, "max_size": 6}, SEEDS),
     ({"num_boxes": 3, "max_size": 4}, range(60))],
)
def test_oracle_always_solves(kwargs, seeds):
    env = Sokoban(**kwargs)
    for seed in seeds:
        result, transcript = play_oracle(env, seed)
        assert result.terminated and result.reward == 1.0 and result.info["success"], transcript
        assert result.observation[0]["content"] == SOLVED_TEXT
        assert len(transcript) - 1 <= env.spec.max_turns


@pytest.mark.parametrize(
    "kwargs", [{}, {"num_boxes": 2}, {"num_boxes": 3, "max_size": 4}, {"max_pulls": 10}]
)
def test_reverse_play_levels_are_solvable_and_not_trivial(kwargs):
    env = Sokoban(**kwargs)
    for seed in range(150):
        _messages, info = env.reset(seed=seed)
        level, player, boxes = env._level, env._player, env._boxes
        plan = solve(level, player, boxes)
        assert plan is not None, seed
        # the reverse-play plan is a solution, so the shortest one is no longer
        assert 2 <= len(plan) <= info["plan_moves"] <= env.spec.max_turns
        count, final = pushes(level, player, boxes, plan)
        assert final == level.targets and count >= 2
        assert boxes != level.targets and not level.solved_by_one_push(player, boxes)
        assert not boxes & level.corners  # a generated level never starts deadlocked
        assert len(boxes) == len(level.targets) == kwargs.get("num_boxes", 1)


def test_sizes_and_rendering_format():
    env = Sokoban()
    sides = set()
    for seed in SEEDS:
        messages, info = env.reset(seed=seed)
        assert messages[0] == {"role": "system", "content": INSTRUCTION}
        assert messages[1]["role"] == "user" and len(messages) == 2
        rows = grid(messages).split("\n")
        side = len(rows)
        sides.add(side)
        assert info["size"] == side - 2 and info["num_boxes"] == 1
        assert all(len(row) == side for row in rows)
        assert rows[0] == rows[-1] == "#" * side
        assert all(row[0] == row[-1] == "#" for row in rows)
        text = "".join(rows)
        assert set(text) <= set("#_.$*@+")
        assert text.count("@") + text.count("+") == 1
        assert text.count("$") + text.count("*") == 1
        assert text.count(".") + text.count("*") + text.count("+") == 1
        assert text.count("$") == 1  # never already solved
        level, player, boxes = parse_map(rows)  # the rendering round-trips
        assert (level.rows, player, boxes) == (env._level.rows, env._player, env._boxes)
    assert sides == {6, 7}


def test_interior_walls_follow_wall_prob():
    open_room = Sokoban(wall_prob=0.0, min_size=5, max_size=5)
    for seed in range(30):
        rows = grid(open_room.reset(seed=seed)[0]).split("\n")
        assert "#" not in "".join(row[1:-1] for row in rows[1:-1])
    walled = Sokoban(wall_prob=0.3)
    inner = "".join(
        "".join(row[1:-1] for row in grid(walled.reset(seed=s)[0]).split("\n")[1:-1])
        for s in range(100)
    )
    assert 0.2 < inner.count("#") / len(inner) < 0.5


def test_determinism():
    env, other = Sokoban(num_boxes=2), Sokoban(num_boxes=2)
    actions = ["down", "right", "jump", "up", "left", "right", "down", "down", "left", "up"] * 2
    for seed in range(20):
        first = play(env, seed, actions)
        assert play(other, seed, actions) == first
        assert play(env, seed, actions) == first
    levels = {grid(env.reset(seed=s)[0]) for s in range(30)}
    assert len(levels) == 30


def test_unseeded_reset_continues_the_stream():
    env = Sokoban()
    env.reset(seed=3)
    first = [env.reset()[0] for _ in range(3)]
    env.reset(seed=3)
    assert [env.reset()[0] for _ in range(3)] == first


def test_generation_failure_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(sokoban, "MAX_LEVEL_ATTEMPTS", 0)
    with pytest.raises(RuntimeError, match=r"no level needing >= 2 pushes.*raise max_turns"):
        Sokoban().reset(seed=0)


# -- moves ----------------------------------------------------------------------------------

ROOM = ("######", "#@_$.#", "#____#", "######")


def test_walk_push_and_observation():
    env = board(*ROOM)
    result = env.step("down")
    assert grid(result) == "######\n#__$.#\n#@___#\n######"
    assert (result.reward, result.terminated, result.truncated) == (0.0, False, False)
    assert result.info == {"success": False, "invalid_action": False, "deadlock": False}
    env.step("up")
    env.step("right")
    result = env.step("right")  # pushes the box onto the target
    assert result.observation == [{"role": "user", "content": SOLVED_TEXT}]
    assert (result.reward, result.terminated, result.truncated) == (1.0, True, False)
    assert result.info == {"success": True, "invalid_action": False, "deadlock": False}
    assert env.oracle_action() is None
    with pytest.raises(RuntimeError, match="reset"):
        env.step("up")


def test_blocked_moves_stay_in_place():
    env = board("#######", "#@$$_.#", "#___._#", "#######")
    for move in ("up", "left", "right"):  # wall, wall, box into box
        result = env.step(move)
        assert grid(result) == "#######\n#@$$_.#\n#___._#\n#######"
        assert result.info["invalid_action"] is False and not result.terminated
    env = board("#####", "#_@$#", "#.__#", "#####")
    assert grid(env.step("right")) == "#####\n#_@$#\n#.__#\n#####"  # box into wall


def test_targets_render_under_the_player_and_boxes():
    env = board("######", "#@.$_#", "#_*__#", "######")
    assert grid(env.step("right")) == "######\n#_+$_#\n#_*__#\n######"
    for move in ("left", "down"):
        env.step(move)
    assert grid(env.step("right")) == "######\n#_.$_#\n#_+$_#\n######"


@pytest.mark.parametrize("reply", ["jump", "%%%garbage%%%", "", "go up", "u", "up!", "north"])
def test_invalid_action(reply):
    env = board(*ROOM)
    result = env.step(reply)
    assert result.observation == [
        {"role": "user", "content": INVALID + "\n".join(ROOM)}
    ]
    assert INVALID == "Invalid action. Reply up, down, left or right.\n"
    assert (result.reward, result.terminated, result.truncated) == (0.0, False, False)
    assert result.info == {"success": False, "invalid_action": True, "deadlock": False}


def test_actions_are_case_and_space_insensitive():
    env = board(*ROOM)
    assert grid(env.step("  Down\n")) == "######\n#__$.#\n#@___#\n######"
    assert env.step("UP").info["invalid_action"] is False


def test_deadlock_in_a_non_target_corner_terminates():
    env = board("######", "#.@$_#", "######")
    result = env.step("right")
    assert result.observation == [{"role": "user", "content": DEADLOCK_TEXT}]
    assert (result.reward, result.terminated, result.truncated) == (0.0, True, False)
    assert result.info == {"success": False, "invalid_action": False, "deadlock": True}
    assert env.oracle_action() is None


def test_a_box_against_a_wall_or_in_a_target_corner_is_no_deadlock():
    env = board("######", "#@$_.#", "#____#", "######")
    result = env.step("right")  # the box slides along the top wall, not into a corner
    assert not result.terminated and result.info["deadlock"] is False
    env = board("#####", "#@$.#", "#___#", "#####")  # target in the corner
    assert env.step("right").info == {"success": True, "invalid_action": False, "deadlock": False}


def test_unsolvable_state_has_no_oracle_but_runs_on():
    env = board("#######", "#_____#", "#__$__#", "#__@__#", "#.____#", "#######")
    assert env.oracle_action() is not None
    result = env.step("up")  # a box on the top wall can never leave it, and no target is there
    assert not result.terminated and not result.truncated
    assert env.oracle_action() is None
    assert env.privileged_info() == "no solution"


def test_truncates_at_max_turns():
    env = board(*ROOM)
    results = [env.step("left" if turn % 2 else "nope") for turn in range(20)]
    assert [r.truncated for r in results] == [False] * 19 + [True]
    assert not any(r.terminated for r in results)
    assert results[-1].reward == 0.0 and results[-1].info["success"] is False
    env = Sokoban(max_turns=7)
    env.reset(seed=1)
    assert [env.step("x").truncated for _ in range(7)][-2:] == [False, True]


# -- shaping --------------------------------------------------------------------------------


def test_box_reward_shaping():
    env = board("#######", "#@$.__#", "#_$.__#", "#######", box_reward=0.25)
    assert env.step("right").reward == 0.25  # a box onto a target
    assert env.step("right").reward == -0.25  # and off it again
    for move in ("left", "left", "down"):
        assert env.step(move).reward == 0.0
    result = env.step("right")  # the second box onto its target: not solved yet
    assert result.reward == 0.25 and not result.terminated
    assert board(*ROOM, box_reward=0.25).step("down").reward == 0.0  # walking is free
    env = board("#####", "#@$.#", "#___#", "#####", box_reward=0.25)
    assert env.step("right").reward == 1.25  # solving: the outcome plus the last box


def test_no_shaping_by_default():
    env = board("#######", "#@$.__#", "#_$.__#", "#######")
    assert env.step("right").reward == 0.0


# -- oracle, state key, privileged info ----------------------------------------------------


def test_solver_on_known_levels():
    level, player, boxes = parse_map(["#####", "#@$.#", "#####"])
    assert solve(level, player, boxes) == ["right"]
    level, player, boxes = parse_map(["######", "#@___#", "#_$__#", "#__._#", "######"])
    plan = solve(level, player, boxes)
    # the box must go one right and one down: two pushes and three steps to get behind it
    assert plan == ["down", "right", "up", "right", "down"]
    assert pushes(level, player, boxes, plan) == (2, level.targets)
    level, player, boxes = parse_map(["#####", "#.@$#", "#####"])
    assert solve(level, player, boxes) is None


def test_level_corners_and_dead_cells():
    level = Level(["######", "#__._#", "#____#", "######"])
    cell = lambda row, col: row * level.width + col  # noqa: E731
    assert level.corners == {cell(1, 1), cell(1, 4), cell(2, 1), cell(2, 4)}
    # a box on the bottom row can only slide along it, and there is no target there
    assert level.dead == level.corners | {cell(2, 2), cell(2, 3)}


def test_oracle_and_privileged_info_agree():
    env = board("######", "#@___#", "#_$__#", "#__._#", "######")
    info = env.privileged_info()
    assert info == "shortest solution: down, right, up, right, down (5 moves)"
    assert info.split(": ")[1].startswith(env.oracle_action())
    assert "shortest" not in env.render()
    env.step(env.oracle_action())
    assert env.privileged_info() == "shortest solution: right, up, right, down (4 moves)"


def test_oracle_recovers_after_detours():
    env = Sokoban(num_boxes=2)
    for seed in range(30):
        env.reset(seed=seed)
        rng = random.Random(seed)
        for _ in range(3):
            result = env.step(env.sample_action(rng))
            if result.terminated:
                break
        if result.terminated or env.oracle_action() is None:
            continue
        while not (result.terminated or result.truncated):
            result = env.step(env.oracle_action())
        assert result.terminated and result.info["success"], seed


def test_state_key():
    a, b = board(*ROOM), board(*ROOM)
    a.step("right")
    a.step("down")
    b.step("down")
    b.step("jump")
    b.step("right")
    assert a.state_key() == b.state_key()
    assert repr(a.state_key()) == repr(b.state_key())  # stable_hash uses repr
    hash(a.state_key())
    b.step("up")
    assert a.state_key() != b.state_key()
    assert board(*ROOM).state_key() != board("######", "#@_$.#", "#_#__#", "######").state_key()


def test_state_key_of_two_boxes_is_canonical():
    env = board("#######", "#@$.__#", "#_$.__#", "#######")
    key = env.state_key()
    assert list(key[2]) == sorted(key[2])


def test_sample_action_uses_the_callers_rng():
    env = Sokoban()
    env.reset(seed=0)
    assert {env.sample_action(random.Random(s)) for s in range(50)} == set(MOVE_NAMES)
    assert env.sample_action(random.Random(1)) == env.sample_action(random.Random(1))


# -- properties -----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    num_boxes=st.integers(1, 2),
    actions=st.lists(st.sampled_from([*MOVE_NAMES, "nope"]), max_size=25),
)
def test_random_play_keeps_the_invariants(seed, num_boxes, actions):
    env = Sokoban(num_boxes=num_boxes, box_reward=0.1)
    env.reset(seed=seed)
    level = env._level
    ended = False
    for turn, action in enumerate(actions, start=1):
        assert not ended
        result = env.step(action)
        low, high = env.spec.reward_range
        assert low <= result.reward <= high
        assert len(env._boxes) == num_boxes
        assert not env._boxes & level.walls and env._player not in env._boxes | level.walls
        if not (result.terminated or result.truncated):
            text = grid(result).removeprefix(INVALID)
            assert parse_map(text)[1:] == (env._player, env._boxes)
        assert result.info["success"] == (env._boxes == level.targets)
        assert result.truncated == (turn == env.spec.max_turns and not result.terminated)
        ended = result.terminated or result.truncated
        if ended:
            break


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000), num_boxes=st.integers(1, 3))
def test_any_seed_gives_a_solvable_level(seed, num_boxes):
    env = Sokoban(num_boxes=num_boxes, max_size=4 if num_boxes == 3 else 5)
    _messages, info = env.reset(seed=seed)
    plan = solve(env._level, env._player, env._boxes)
    assert plan is not None and 2 <= len(plan) <= info["plan_moves"] <= env.spec.max_turns


# -- misuse ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"min_size": 6, "max_size": 5}, "min_size <= max_size"),
        ({"min_size": 2}, "3 <= min_size"),
        ({"max_size": 9}, "max_size <= 8"),
        ({"num_boxes": 0}, "num_boxes must be 1 to 3"),
        ({"num_boxes": 4}, "num_boxes must be 1 to 3"),
        ({"wall_prob": 0.6}, "wall_prob"),
        ({"wall_prob": -0.1}, "wall_prob"),
        ({"max_pulls": 1}, "max_pulls"),
        ({"box_reward": -0.5}, "box_reward"),
        ({"box_reward": 0.6}, r"box_reward must be in \[0, 0.5\]"),
        ({"max_turns": 3}, "max_turns must be >= 4"),
    ],
)
def test_constructor_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Sokoban(**kwargs)


def test_bad_options_and_maps():
    env = Sokoban()
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(seed=0, options={"level": ROOM})
    bad_maps = [
        ["#####", "#@$.#", "####"],  # ragged
        ["_####", "#@$.#", "#####"],  # open border
        ["#####", "#_$.#", "#####"],  # no player
        ["#####", "#@$@#", "#.__#", "#####"],  # two players
        ["#####", "#@$$#", "#.__#", "#####"],  # more boxes than targets
        ["#####", "#@*_#", "#####"],  # already solved
        ["#####", "#@$x#", "#####"],  # unknown character
        [],
    ]
    for bad in bad_maps:
        with pytest.raises(ValueError, match="equal-length rows enclosed by '#'"):
            env.reset(options={"map": bad})
    env.reset(options={"map": "#####\n#@$.#\n#####"})  # a newline-joined string works too
    assert env.oracle_action() == "right"
    env.reset(options={"map": ["#####", "#@$.#", "# _ #", "#####"]})  # spaces are floor
    assert env.render() == "#####\n#@$.#\n#___#\n#####"
