"""keypad-v0: one digit a turn, read off a key shown only in the first message."""

from __future__ import annotations

import random

import pytest

from turnrl.envs import check_env, make
from turnrl.envs.builtin.keypad import Keypad


def play(env: Keypad, seed: int, replies: list[str]) -> list:
    messages, _ = env.reset(seed=seed)
    results = []
    for reply in replies:
        results.append(env.step(reply))
        if results[-1].terminated:
            break
    return [messages, *results]


def test_the_oracle_opens_every_keypad_and_earns_one() -> None:
    env = Keypad(num_symbols=8, code_length=5)
    check_env(env)
    for seed in range(100):
        env.reset(seed=seed)
        total, result = 0.0, None
        while (action := env.oracle_action()) is not None:
            result = env.step(action)
            total += result.reward
        assert result is not None and result.info["success"] and result.terminated
        assert total == pytest.approx(1.0)


def test_the_key_is_shown_once_and_the_digit_is_the_keys() -> None:
    env = make("keypad-v0")
    messages, _ = env.reset(seed=7)
    key_line, first = messages[1]["content"].split("\n")
    key = dict(pair.split("=") for pair in key_line.removeprefix("Key: ").split(", "))
    assert len(key) == 6 and first.startswith("Symbol 1 of 4: ")
    symbol = first.rsplit(" ", 1)[1]
    result = env.step(key[symbol])
    assert result.reward == 0.25 and not result.terminated
    assert "Key" not in result.observation[0]["content"]


def test_a_wrong_or_malformed_digit_locks_it() -> None:
    env = Keypad()
    env.reset(seed=1)
    right = env.oracle_action()
    wrong = str((int(right) + 1) % 10)
    result = env.step(wrong)
    assert (result.reward, result.terminated, result.info["success"]) == (0.0, True, False)
    assert result.observation[0]["content"] == "Locked." and not result.info["invalid_action"]
    env.reset(seed=1)
    assert env.step("nine").info["invalid_action"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step("1")


def test_same_seed_same_task_and_options_are_checked() -> None:
    assert play(Keypad(), 3, ["0"] * 4)[0] == play(Keypad(), 3, ["0"] * 4)[0]
    assert Keypad().sample_action(random.Random(0)).isdigit()
    with pytest.raises(ValueError, match="num_symbols"):
        Keypad(num_symbols=1)
    with pytest.raises(ValueError, match="code_length"):
        Keypad(code_length=0)
