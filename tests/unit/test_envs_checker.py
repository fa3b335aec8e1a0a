"""check_env: every registered env passes it, and it catches broken envs with clear messages."""

from __future__ import annotations

import random

import numpy as np
import pytest

from turnrl.envs import EnvCheckError, EnvSpec, check_env, make, registered_ids
from turnrl.envs.multi import check_multi_env
from turnrl.types import StepResult

# seeds per env whose every episode runs its sandbox several times (swe-local-v0: pytest)
SLOW_SANDBOX_ENVS = {"swe-v0": 3, "swe-local-v0": 1}


@pytest.mark.parametrize("env_id", registered_ids())
def test_every_registered_env_passes_check_env(env_id, tmp_path):
    env = make(env_id) if env_id != "textworld-v0" else None
    if env is not None and env.spec.agents:  # several agents: their own contract
        with pytest.raises(EnvCheckError, match=r"multi-agent env .*check_multi_env"):
            check_env(env)
        check_multi_env(env, seeds=range(10))
        return
    if env_id == "textworld-v0":  # compiles a game per seed: fewer seeds, a private cache
        pytest.importorskip("textworld")
        check_env(make(env_id, cache_dir=str(tmp_path)), seeds=range(3), max_steps=6)
        return
    if env_id in SLOW_SANDBOX_ENVS:  # every episode grades in a sandbox: fewer seeds
        check_env(make(env_id), seeds=range(SLOW_SANDBOX_ENVS[env_id]))
        return
    check_env(make(env_id), seeds=range(10))


@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("arithmetic-v0", {"ops": "+-*", "min_value": -5, "max_value": 5}),
        ("frozenlake-v0", {"random_positions": True, "hole_prob": 0.3}),
        ("frozenlake-v0", {"min_size": 2, "max_size": 8, "max_turns": 30}),
    ],
)
def test_builtin_variants_pass_check_env(env_id, kwargs):
    check_env(make(env_id, **kwargs))


def test_max_steps_caps_probe_episodes():
    check_env(make("frozenlake-v0"), max_steps=3)


# -- a small correct env, then broken variants of it ----------------------------------------


class Parity:
    """Say whether n is even or odd; three tries."""

    def __init__(self) -> None:
        self.spec = EnvSpec(
            id="parity-v0",
            entry_point=Parity,
            max_turns=3,
            reward_range=(0.0, 1.0),
            has_oracle=True,
            has_state_key=True,
        )
        self._rng = random.Random()
        self._n = 0
        self._turn = 0

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = random.Random(seed)
        self._n, self._turn = self.draw(), 0
        return [{"role": "user", "content": f"{self._n}: even or odd?"}], {}

    def draw(self):
        return self._rng.randint(0, 99)

    def answer(self):
        return "even" if self._n % 2 == 0 else "odd"

    def step(self, action):
        self._turn += 1
        success = action.strip() == self.answer()
        truncated = not success and self._turn >= self.spec.max_turns
        text = "Right." if success else "No. Reply even or odd."
        return StepResult([{"role": "user", "content": text}], self.reward(success), success,
                          truncated, {"success": success})  # fmt: skip

    def reward(self, success):
        return 1.0 if success else 0.0

    def oracle_action(self):
        return self.answer()

    def state_key(self):
        return (self._n, self._turn)

    def close(self):
        pass


def test_reference_env_passes():
    check_env(Parity())


def test_numpy_rewards_are_accepted():
    class NumpyReward(Parity):
        def reward(self, success):
            return np.float32(1.0) if success else np.int64(0)

    check_env(NumpyReward())


def broken(method_name, replacement, base=Parity):
    """``base`` with one method replaced."""
    return type(f"Broken{base.__name__}", (base,), {method_name: replacement})()


def expect_failure(env, *patterns):
    with pytest.raises(EnvCheckError) as caught:
        check_env(env)
    message = str(caught.value)
    assert "parity-v0" in message, message
    for pattern in patterns:
        assert pattern in message, message
    return message


def test_catches_reward_out_of_range():
    env = broken("reward", lambda self, success: 2.0 if success else 0.0)
    expect_failure(env, "seed=0", "reward 2.0 is outside spec.reward_range=(0.0, 1.0)")


def test_catches_bool_reward():
    env = broken("reward", lambda self, success: success)
    expect_failure(env, "seed=0", "reward must be a real number, got bool")


def test_catches_nan_reward():
    env = broken("reward", lambda self, success: float("nan"))
    expect_failure(env, "outside spec.reward_range")


def test_catches_global_rng():
    random.seed(0)  # the global RNG's first two draws differ, so seed 0 already fails
    env = broken("draw", lambda self: random.randint(0, 99))
    expect_failure(env, "seed=0", "same seed differ at reset", "random.Random(seed)")


def test_catches_unseeded_state_carried_between_episodes():
    def reset(self, *, seed=None, options=None):  # ignores the seed: a stream across resets
        self._n, self._turn = self._rng.randint(0, 99), 0
        return [{"role": "user", "content": f"{self._n}: even or odd?"}], {}

    expect_failure(broken("reset", reset), "same seed differ")


def test_catches_raising_on_garbage():
    def step(self, action):
        if action.strip() not in ("even", "odd"):
            raise ValueError("bad action")
        return Parity.step(self, action)

    expect_failure(
        broken("step", step),
        "seed=0",
        "step('%%%garbage%%%') at turn 1 raised ValueError: bad action",
        "invalid action must return an observation",
    )


def test_catches_missing_truncation():
    def step(self, action):
        result = Parity.step(self, action)
        result.truncated = False
        return result

    expect_failure(broken("step", step), "neither terminated nor truncated within spec.max_turns=3")


def test_catches_non_bool_flags():
    def step(self, action):
        result = Parity.step(self, action)
        result.terminated = int(result.terminated)
        return result

    expect_failure(broken("step", step), "terminated must be a bool, got int")


def test_catches_bad_messages():
    def reset(self, *, seed=None, options=None):
        Parity.reset(self, seed=seed)
        return [{"role": "narrator", "content": "hi"}], {}

    expect_failure(broken("reset", reset), "reset() messages[0] has role 'narrator'")

    def reset_tuple_content(self, *, seed=None, options=None):
        return [{"role": "user", "content": ("hi",)}], {}

    expect_failure(broken("reset", reset_tuple_content), "content must be a str")

    def step_no_observation(self, action):
        result = Parity.step(self, action)
        result.observation = []
        return result

    expect_failure(broken("step", step_no_observation), "returned no observation")


def test_catches_non_step_result():
    expect_failure(broken("step", lambda self, action: ([], 0.0, True, False, {})), "StepResult")


def test_catches_oracle_returning_none():
    expect_failure(broken("oracle_action", lambda self: None), "oracle_action() returned None")


def test_catches_oracle_that_does_not_finish():
    expect_failure(
        broken("oracle_action", lambda self: "maybe"), "oracle_action() did not finish the task"
    )


def test_catches_unhashable_state_key():
    expect_failure(broken("state_key", lambda self: [self._n]), "unhashable list")


def test_catches_unstable_state_key():
    counter = iter(range(10**6))
    expect_failure(broken("state_key", lambda self: next(counter)), "state_key() differs")


def test_catches_declared_but_missing_capability():
    env = Parity()
    env.spec = EnvSpec(id="parity-v0", entry_point=Parity, max_turns=3, has_privileged_info=True)
    expect_failure(env, "has_privileged_info is True but the env has no privileged_info()")


def test_catches_missing_spec():
    class NoSpec:
        def reset(self, *, seed=None, options=None):
            return [{"role": "user", "content": "hi"}], {}

    with pytest.raises(EnvCheckError, match=r"NoSpec: env.spec must be an EnvSpec"):
        check_env(NoSpec())


def test_error_is_an_assertion_error():
    assert issubclass(EnvCheckError, AssertionError)


# -- capabilities: the spec declares exactly what the env implements --------------------------


def test_catches_implemented_but_undeclared_capability():
    env = Parity()  # implements oracle_action() and state_key()
    env.spec = EnvSpec(id="parity-v0", entry_point=Parity, max_turns=3, has_oracle=True)
    expect_failure(
        env,
        "the env implements state_key() but spec.has_state_key is False, so nothing calls it",
        "set has_state_key=True in its EnvSpec",
    )


def test_declared_but_missing_is_reported_before_undeclared():
    env = Parity()  # also implements oracle_action() without declaring it here
    env.spec = EnvSpec(id="parity-v0", entry_point=Parity, max_turns=3, has_state_key=True,
                       has_privileged_info=True)
    expect_failure(env, "spec.has_privileged_info is True but the env has no privileged_info()")


class ToolParity(Parity):
    """Parity with a (decorative) tool."""

    def __init__(self) -> None:
        super().__init__()
        self.spec = EnvSpec(id="parity-v0", entry_point=ToolParity, max_turns=3,
                            has_oracle=True, has_state_key=True, tools=["answer"])

    def tool_schemas(self):
        return [{"type": "function", "function": {"name": "answer", "parameters": {}}}]


def test_env_with_declared_tools_passes():
    env = ToolParity()
    assert env.spec.capabilities == ("oracle_action", "state_key", "tool_schemas")
    check_env(env)


def test_catches_tools_implemented_but_not_declared():
    env = ToolParity()
    env.spec = Parity().spec  # tools=[]
    expect_failure(env, "the env implements tool_schemas() but spec.tools is empty",
                   "set tools=[...] (the tool names) in its EnvSpec")


def test_catches_tools_declared_but_missing():
    env = Parity()
    env.spec = ToolParity().spec
    expect_failure(env, "spec.tools is ['answer'] but the env has no tool_schemas() method")


def test_catches_bad_tool_schemas():
    expect_failure(broken("tool_schemas", lambda self: {"name": "answer"}, base=ToolParity),
                   "tool_schemas() must return a list of JSON schema dicts")
    expect_failure(broken("tool_schemas", lambda self: 1 / 0, base=ToolParity),
                   "tool_schemas() raised ZeroDivisionError")
