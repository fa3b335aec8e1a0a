"""gym:<id>: Gymnasium envs with a discrete action space, adapted to the turnrl env contract."""

from __future__ import annotations

import random
import sys

import pytest

from turnrl.envs import (
    HasOracle,
    HasStateKey,
    UnknownEnvError,
    check_env,
    make,
    registered_ids,
    spec,
)
from turnrl.envs.gym.adapter import DEFAULT_MAX_TURNS, INVALID, GymEnv
from turnrl.envs.gym.ids import turnrl_env_id
from turnrl.envs.gym.known import strip_ansi_codes

gym = pytest.importorskip("gymnasium")

# Gymnasium renames versions (1.x has Taxi-v4 and CliffWalking-v1): use what is installed.
TAXI = next(i for i in ("Taxi-v4", "Taxi-v3") if i in gym.registry)
CLIFF = next(i for i in ("CliffWalking-v1", "CliffWalking-v0") if i in gym.registry)
FROZEN_ACTIONS = "left (0), down (1), right (2), up (3)"
# The default 4x4 map, cells numbered row by row:  S F F F / F H F H / F F F H / H F F G
HOLE, GOAL = 5, 15


def lake(**kwargs) -> GymEnv:
    env = make("gym:FrozenLake-v1", is_slippery=False, **kwargs)
    assert isinstance(env, GymEnv)
    return env


# -- the contract -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env_id, kwargs, has_oracle",
    [
        ("gym:FrozenLake-v1", {}, False),  # slippery: no deterministic model
        ("gym:FrozenLake-v1", {"is_slippery": False}, True),
        ("gym:FrozenLake8x8-v1", {"is_slippery": False}, True),
        (f"gym:{TAXI}", {}, True),
        (f"gym:{CLIFF}", {}, True),
        ("gym:Blackjack-v1", {}, False),
    ],
)
def test_check_env_passes(env_id, kwargs, has_oracle):
    env = make(env_id, **kwargs)
    assert env.spec.has_oracle is has_oracle and env.spec.has_state_key
    assert isinstance(env, HasOracle) is has_oracle  # the instance has what its spec declares
    check_env(env, seeds=range(5))


def test_check_env_on_an_index_only_env_with_continuous_observations():
    env = make("gym:Acrobot-v1")  # not in ACTION_NAMES; Box observations
    assert env.action_names is None and not env.spec.has_state_key
    assert not isinstance(env, HasStateKey) and env.spec.capabilities == ()
    assert env.spec.reward_range == (-float("inf"), float("inf"))
    check_env(env, seeds=(0,), max_steps=20)


def test_spec_of_a_gym_id():
    frozen = spec("gym:FrozenLake-v1")
    assert frozen.id == "gym/frozenlake-v1" and frozen.max_turns == 100  # its TimeLimit
    assert frozen.reward_range == (0.0, 1.0) and frozen.has_state_key and not frozen.has_oracle
    assert "slippery" in frozen.description
    cliff = spec(f"gym:{CLIFF}")
    assert cliff.reward_range == (-100.0, 0.0)  # from P, widened to the invalid-action 0
    assert not any(i.startswith("gym") for i in registered_ids())


def test_turnrl_ids_round_trip():
    assert turnrl_env_id("FrozenLake-v1") == "gym/frozenlake-v1"
    assert turnrl_env_id("phys2d/CartPole-v1") == "gym/phys2d.cartpole-v1"
    env = lake(max_turns=7)
    twin = make(env.spec.id, **env.spec.kwargs)
    assert twin.gym_id == "FrozenLake-v1" and twin.spec == env.spec
    assert env.reset(seed=3) == twin.reset(seed=3)


def test_reset_messages():
    messages, info = lake().reset(seed=0)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith("Walk on a frozen lake")
    assert messages[0]["content"].endswith(
        f"Valid actions: {FROZEN_ACTIONS}. Reply with one action name or its number.")
    assert "slippery" not in messages[0]["content"]
    assert strip_ansi_codes(messages[1]["content"]) == "SFFF\nFHFH\nFFFH\nHFFG"
    assert "\x1b[41mS\x1b[0m" in messages[1]["content"]  # the agent's cell, highlighted
    assert info == {"gym_info": {"prob": 1}}


# -- actions ----------------------------------------------------------------------------------


def test_actions_by_name_number_and_case():
    env = lake()
    env.reset(seed=0)
    assert env.step("down").info["action"] == 1 and env.state_key() == 4
    assert env.step(" 1 ").info["action"] == 1 and env.state_key() == 8
    assert env.step("RIGHT").info["action"] == 2 and env.state_key() == 9
    assert env.step("Left").info["action"] == 0 and env.state_key() == 8
    assert env.step("3\n").info["action"] == 3 and env.state_key() == 4


@pytest.mark.parametrize("reply", ["jump", "4", "-1", "left right", "", "%%%garbage%%%"])
def test_invalid_action_lists_the_valid_ones(reply):
    env = lake()
    messages, _ = env.reset(seed=0)
    result = env.step(reply)
    assert result.reward == 0.0 and not result.terminated and not result.truncated
    assert result.info == {"success": False, "invalid_action": True, "action": None,
                           "gym_info": {}}
    assert result.observation[0]["content"] == (
        f"{INVALID} Valid actions: {FROZEN_ACTIONS}.\n{messages[1]['content']}")
    assert env.state_key() == 0  # the env was not stepped


def test_invalid_reward_kwarg():
    env = make(f"gym:{CLIFF}", invalid_reward=-1)
    assert env.spec.reward_range == (-100.0, -1.0) and env.spec.kwargs["invalid_reward"] == -1
    env.reset(seed=0)
    assert env.step("fly").reward == -1.0
    check_env(env, seeds=(0,))
    with pytest.raises(TypeError, match="invalid_reward must be a number"):
        make(f"gym:{CLIFF}", invalid_reward="-1")


def test_invalid_actions_use_up_turns():
    env = lake(max_turns=2)
    env.reset(seed=0)
    assert not env.step("nope").truncated
    assert env.step("nope").truncated
    with pytest.raises(RuntimeError, match="reset"):
        env.step("down")


def test_taxi_action_names():
    env = make(f"gym:{TAXI}")
    messages, _ = env.reset(seed=0)
    assert ("Valid actions: south (0), north (1), east (2), west (3), pickup (4), dropoff (5)"
            in messages[0]["content"])
    assert env.step("pickup").reward == -10.0  # no passenger here: an illegal pickup


def test_cliff_action_names_and_reward_pass_through():
    env = make(f"gym:{CLIFF}")
    env.reset(seed=0)
    assert env.state_key() == 36  # bottom left
    result = env.step("right")  # onto the cliff: -100 and back to the start
    assert result.reward == -100.0 and not result.terminated and env.state_key() == 36
    assert env.step("up").reward == -1.0 and env.state_key() == 24


def test_action_names_kwarg():
    env = lake(action_names=["West", "South", "East", "North"])
    messages, _ = env.reset(seed=0)
    assert "Valid actions: West (0), South (1), East (2), North (3)." in messages[0]["content"]
    assert env.step("east").info["action"] == 2
    assert env.step("2").info["action"] == 2
    assert env.step("right").info["invalid_action"]
    assert env.oracle_action() in {"West", "South", "East", "North"}


@pytest.mark.parametrize("names", [["a", "b"], ["a", "b", "c", "A"], ["a", "b", "c", "3"],
                                   ["a", "b", "c", ""], "abcd"])
def test_bad_action_names(names):
    with pytest.raises(ValueError, match=r"action_names must be 4 distinct non-empty strings"):
        lake(action_names=names)


def test_index_only_actions():
    env = make("gym:Acrobot-v1")
    messages, _ = env.reset(seed=0)
    assert messages[0]["content"].endswith("Valid actions: 0, 1, 2. Reply with one action number.")
    assert messages[1]["content"].startswith("[")  # the observation as plain numbers
    assert not env.step("1").info["invalid_action"]
    assert env.step("left").info["invalid_action"]


def test_sample_action_is_valid():
    env = lake()
    env.reset(seed=0)
    samples = {env.sample_action(random.Random(s)) for s in range(40)}
    assert samples == {"left", "down", "right", "up"}


# -- rewards, termination, truncation, success ------------------------------------------------


def test_hole_terminates_without_success():
    env = lake()
    env.reset(seed=0)
    env.step("down")
    result = env.step("right")
    assert env.state_key() == HOLE
    assert result.terminated and not result.truncated and result.reward == 0.0
    assert not result.info["success"]


def test_oracle_reaches_the_goal():
    env = lake()
    env.reset(seed=0)
    moves = []
    while True:
        moves.append(env.oracle_action())
        result = env.step(moves[-1])
        if result.terminated or result.truncated:
            break
    assert len(moves) == 6 and env.state_key() == GOAL  # a shortest path
    assert result.terminated and result.reward == 1.0 and result.info["success"]
    assert env.oracle_action() is None


@pytest.mark.parametrize("env_id, final_reward", [(f"gym:{TAXI}", 20.0), (f"gym:{CLIFF}", -1.0)])
def test_success_on_taxi_and_cliff(env_id, final_reward):
    """Taxi succeeds on its +20 drop-off; CliffWalking (-1 per step) on reaching the goal."""
    env = make(env_id)
    env.reset(seed=1)
    for _ in range(env.max_turns):
        result = env.step(env.oracle_action())
        if result.terminated or result.truncated:
            break
    assert result.terminated and result.reward == final_reward and result.info["success"]


def _energy_pumping(env: GymEnv) -> str:
    """Push along the speed (MountainCar's velocity, Acrobot's first joint turning back):
    a hand-written controller that reaches the goal of both well within their time limit."""
    state = env._env.unwrapped.state
    speed = state[1] if env.gym_id.startswith("MountainCar") else -state[2]
    return "2" if speed >= 0 else "0"


@pytest.mark.parametrize("env_id, goal_reward", [("gym:MountainCar-v0", -1.0),
                                                 ("gym:Acrobot-v1", 0.0)])
def test_success_on_reaching_the_goal_of_a_step_cost_env(env_id, goal_reward):
    """MountainCar and Acrobot pay -1 a step and -1/0 at the goal: success is terminating."""
    env = make(env_id)
    env.reset(seed=0)
    results = []
    while not results or not (results[-1].terminated or results[-1].truncated):
        results.append(env.step(_energy_pumping(env)))
    assert results[-1].terminated and results[-1].reward == goal_reward
    assert results[-1].info["success"] and not any(r.info["success"] for r in results[:-1])
    # running out of time is no success
    env = make(env_id, max_episode_steps=5)
    env.reset(seed=0)
    results = [env.step("1") for _ in range(5)]
    assert results[-1].truncated and not results[-1].terminated
    assert not any(r.info["success"] for r in results)


def test_cartpole_reward_range_covers_both_reward_schemes():
    assert spec("gym:CartPole-v1").reward_range == (-1.0, 1.0)
    env = make("gym:CartPole-v1", sutton_barto_reward=True)
    low, high = env.spec.reward_range
    env.reset(seed=0)
    rewards = []
    for _ in range(env.max_turns):
        result = env.step("left")  # pushing one way drops the pole within a few dozen steps
        rewards.append(result.reward)
        if result.terminated or result.truncated:
            break
    assert result.terminated and rewards[-1] == -1.0
    assert all(low <= reward <= high for reward in rewards)


def test_no_oracle_on_a_slippery_lake():
    env = make("gym:FrozenLake-v1")
    env.reset(seed=0)
    assert not hasattr(env, "oracle_action")  # undeclared, so absent
    with pytest.raises(AttributeError, match=r"no oracle_action\(\): spec.has_oracle is False"):
        env.oracle_action()
    with pytest.raises(AttributeError, match="has no attribute 'bogus'"):
        env.bogus  # noqa: B018


def test_success_fn_kwarg():
    env = lake(success_fn=lambda obs, reward, terminated, info: obs == 1)
    env.reset(seed=0)
    assert env.step("right").info["success"]
    assert not env.step("right").info["success"]


def test_gymnasium_time_limit_passes_through():
    env = lake(max_episode_steps=3, max_turns=10)
    assert env.spec.max_turns == 10
    env.reset(seed=0)
    results = [env.step("left") for _ in range(3)]
    assert [r.truncated for r in results] == [False, False, True]
    assert not results[-1].terminated


def test_max_turns_defaults_to_the_time_limit():
    assert lake(max_episode_steps=7).spec.max_turns == 7
    assert make(f"gym:{CLIFF}").spec.max_turns == DEFAULT_MAX_TURNS  # no TimeLimit


def test_adapter_max_turns_truncates():
    env = lake(max_turns=2)
    env.reset(seed=0)
    assert [env.step("left").truncated for _ in range(2)] == [False, True]


def test_same_seed_same_transcript_on_a_slippery_lake():
    def transcript(seed):
        env = make("gym:FrozenLake-v1")
        rows = [env.reset(seed=seed)[0]]
        for move in ["right", "down", "down", "right", "down", "right"] * 3:
            result = env.step(move)
            rows.append((result.observation, result.reward, result.terminated))
            if result.terminated or result.truncated:
                break
        return rows

    assert transcript(4) == transcript(4)


# -- observations -----------------------------------------------------------------------------


def test_formatter_kwarg():
    env = lake(formatter=lambda obs, info: f"You are on cell {obs}.")
    messages, _ = env.reset(seed=0)
    assert messages[1]["content"] == "You are on cell 0."
    assert env.step("right").observation[0]["content"] == "You are on cell 1."
    assert env.step("fly").observation[0]["content"].endswith("\nYou are on cell 1.")
    with pytest.raises(TypeError, match="formatter"):
        lake(formatter="not callable")
    bad = lake(formatter=lambda obs, info: obs)
    with pytest.raises(TypeError, match=r"formatter\(obs, info\) must return a str, got int"):
        bad.reset(seed=0)


def test_strip_ansi():
    env = lake(strip_ansi=True)
    messages, _ = env.reset(seed=0)
    assert messages[1]["content"] == "SFFF\nFHFH\nFFFH\nHFFG"
    assert "\x1b" not in env.step("down").observation[0]["content"]


def test_plain_text_observation_without_ansi_rendering():
    env = make("gym:Blackjack-v1")
    messages, _ = env.reset(seed=0)
    assert messages[1]["content"].startswith("(") and "\x1b" not in messages[1]["content"]
    assert "stick (0), hit (1)" in messages[0]["content"]


def test_instructions_kwarg():
    messages, _ = lake(instructions="Find the treasure.").reset(seed=0)
    assert messages[0]["content"].startswith("Find the treasure. Valid actions: left (0)")


def test_reward_range_kwarg():
    assert make("gym:Acrobot-v1", reward_range=(-1, 0)).spec.reward_range == (-1.0, 0.0)
    with pytest.raises(ValueError, match="reward_range must be"):
        make("gym:Acrobot-v1", reward_range=(1, 0))


# -- errors -----------------------------------------------------------------------------------


def test_unknown_gym_id_suggests_close_matches():
    with pytest.raises(UnknownEnvError) as caught:
        make("gym:FrozenLak-v1")
    message = str(caught.value)
    assert "unknown Gymnasium env 'FrozenLak-v1'" in message
    assert "did you mean 'gym:FrozenLake-v1'?" in message
    assert isinstance(caught.value, KeyError)
    with pytest.raises(UnknownEnvError, match="did you mean 'gym:FrozenLake-v1'"):
        spec("gym:FrozenLak-v1")
    with pytest.raises(UnknownEnvError) as caught:  # the shared "gym:" makes nothing close
        make("gym:Zzzqx-v0")
    assert "did you mean" not in str(caught.value)


def test_unknown_version_lists_the_installed_ones():
    stale = "Taxi-v3" if TAXI == "Taxi-v4" else "Taxi-v9"
    with pytest.raises(UnknownEnvError, match=rf"'{stale}'.*has gym:{TAXI}"):
        make(f"gym:{stale}")


def test_unknown_turnrl_form():
    with pytest.raises(UnknownEnvError, match=r"'gym/frozenlak-v1'.*'gym/frozenlake-v1'"):
        make("gym/frozenlak-v1")


def test_missing_module_prefix():
    with pytest.raises(ImportError, match=r"cannot import 'no_such_gym_pkg'"):
        make("gym:no_such_gym_pkg:Maze-v0")


def test_gymnasium_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # makes `import gymnasium` fail
    with pytest.raises(ImportError, match=r"needs gymnasium.*pip install 'turnrl\[gym\]'"):
        make("gym:FrozenLake-v1")
    with pytest.raises(ImportError, match=r"turnrl\[gym\]"):
        spec("gym:FrozenLake-v1")


def test_non_discrete_action_space():
    with pytest.raises(ValueError, match=r"gym:Pendulum-v1 has action space Box.*Discrete"):
        make("gym:Pendulum-v1")


def test_unknown_kwarg_names_the_adapter_options():
    with pytest.raises(TypeError) as caught:
        make("gym:FrozenLake-v1", bogus=1)
    message = str(caught.value)
    assert "bogus" in message and "formatter, action_names" in message
