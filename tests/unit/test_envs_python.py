"""python-v0: word problems, a sandboxed python tool, the answer tool, the oracle."""

from __future__ import annotations

import random
import re

import pytest

from turnrl.envs import check_env, make
from turnrl.envs.builtin.python_env import GENERATORS, PythonTool


def scripted(env: PythonTool, seed: int, actions: list[str]):
    messages, info = env.reset(seed=seed)
    results = [env.step(action) for action in actions]
    return messages, info, results


def test_check_env_and_the_spec() -> None:
    env = make("python-v0")
    assert env.spec.tools == ["python", "answer"] and env.spec.slow_steps
    check_env(env, seeds=range(3))


def test_every_generated_problem_is_solved_by_its_expression() -> None:
    # the oracle prints the expression, then answers the gold: 200 seeds per kind, in-process
    for kind, generate in GENERATORS.items():
        for seed in range(200):
            problem = generate(random.Random(seed))
            assert eval(problem.expression) == problem.answer, (kind, seed)
            assert problem.kind == kind


def test_oracle_wins_through_the_sandbox() -> None:
    env = PythonTool()
    wins = 0
    for seed in range(12):
        env.reset(seed=seed)
        result = None
        while (action := env.oracle_action()) is not None:
            result = env.step(action)
        wins += result is not None and result.info["success"]
    assert wins == 12


def test_python_tool_output_and_answer_parsing() -> None:
    env = PythonTool(tool_format="compact")
    _, info, (ran, answered) = scripted(env, 0, ["python[print(6 * 7)]", "answer[nope]"])
    assert ran.observation == [{"role": "tool", "content": "42"}]
    assert (ran.reward, ran.terminated, ran.info["tool_calls"]) == (0.0, False, 1)
    assert answered.terminated and answered.reward == 0.0 and not answered.info["success"]
    assert answered.info["final_answer"] == "nope"
    assert answered.observation[0]["content"] == f"Wrong, the answer is {info['answer']}."
    gold = int(info["answer"])
    for reply in (f"{gold:,}", f" {gold} ", f"{gold}.0"):
        env.reset(seed=0)
        assert env.step(f"answer[{reply}]").info["success"], reply


def test_hostile_code_costs_only_the_turn() -> None:
    env = PythonTool(wall_time_s=1.0)
    _, _, (loop, crash) = scripted(env, 1, ["python[while True: pass]",
                                            "python[raise ValueError('boom')]"])
    assert "TimeoutError" in loop.observation[0]["content"] and not loop.terminated
    assert "ValueError: boom" in crash.observation[0]["content"]


def test_malformed_calls_are_observations_and_turns_run_out() -> None:
    env = PythonTool(max_turns=2)
    _, _, (bad, unknown) = scripted(env, 2, ["the answer is 5", "calc[1+1]"])
    assert bad.info["invalid_action"] and bad.observation[0]["role"] == "user"
    assert "python[" in bad.observation[0]["content"]  # shows the expected format
    assert unknown.truncated and unknown.info["final_answer"] == ""
    assert unknown.info["tool_error_kind"] in ("unknown_tool", "no_call")


def test_json_tool_format_and_schemas() -> None:
    env = PythonTool(tool_format="json")
    env.reset(seed=3)
    assert [s["function"]["name"] for s in env.tool_schemas()] == ["python", "answer"]
    assert env.oracle_action().startswith('<tool_call>{"name": "python"')
    assert PythonTool(tool_format="compact").tool_schemas() == []


def test_determinism_privileged_info_and_sample_action() -> None:
    a, b = PythonTool(), PythonTool()
    assert a.reset(seed=7) == b.reset(seed=7)
    assert a.privileged_info().endswith(f"= {a.reset(seed=7)[1]['answer']}")
    rng = random.Random(0)
    for _ in range(20):
        assert a.toolbox.parse(a.sample_action(rng)).name in ("python", "answer")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"kinds": ["algebra"]}, "kinds"), ({"tool_format": "xml"}, "tool_format"),
    ({"max_turns": 1}, "max_turns"),
])
def test_bad_kwargs_are_clear(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PythonTool(**kwargs)


def test_oracle_action_is_pure_and_computes_until_python_ran() -> None:
    env = PythonTool(tool_format="compact", max_turns=4)
    env.reset(seed=5)
    compute = env.oracle_action()
    assert compute.startswith("python[print(")
    assert env.oracle_action() == compute  # asking again changes nothing
    # a demo that replaces the oracle's action: the oracle still asks for the computation
    env.step("python[raise ValueError('boom')]")  # code that fails
    assert env.oracle_action() == compute
    env.step("search[x]")  # not a python call
    assert env.oracle_action() == compute
    result = env.step(compute)
    assert result.observation[0]["role"] == "tool"
    answer = env.oracle_action()
    assert answer.startswith("answer[") and env.oracle_action() == answer
    assert env.step(answer).info["success"]
    env.reset(seed=5)  # a new episode computes again
    assert env.oracle_action() == compute


def test_oracle_answers_when_one_turn_is_left() -> None:
    env = PythonTool(tool_format="compact", max_turns=2)
    env.reset(seed=6)
    env.step("no call here")
    action = env.oracle_action()
    assert action.startswith("answer[") and env.step(action).info["success"]


def test_tool_role_user_for_templates_without_a_tool_role() -> None:
    env = PythonTool(tool_role="user")
    env.reset(seed=0)
    assert env.step("python[print(1)]").observation == [{"role": "user", "content": "1"}]
    with pytest.raises(ValueError, match="tool_role must be one of"):
        PythonTool(tool_role="function")


def test_small_product_is_opt_in_and_its_oracle_solves_it():
    from turnrl.envs.builtin.python_env import DEFAULT_KINDS

    assert "small_product" not in DEFAULT_KINDS
    assert PythonTool().kinds == DEFAULT_KINDS
    env = make("python-v0", kinds=["small_product"])
    messages, info = env.reset(seed=4)
    factors = [int(n) for n in re.findall(r"\d+", messages[-1]["content"])]
    assert len(factors) == 3 and all(2 <= f <= 9 for f in factors)
    assert info["answer"] == str(factors[0] * factors[1] * factors[2])
    env.step(env.oracle_action())
    result = env.step(env.oracle_action())
    assert result.terminated and result.info["success"]
    env.close()


def test_system_prompt_replaces_or_drops_the_system_message():
    default = make("python-v0", kinds=["small_product"], tool_format="compact")
    messages, _ = default.reset(seed=4)
    assert messages[0]["role"] == "system" and "python[<code>]" in messages[0]["content"]
    bare = make("python-v0", kinds=["small_product"], tool_format="compact", system_prompt="")
    bare_messages, _ = bare.reset(seed=4)
    assert bare_messages == messages[1:]  # the same task, no system message
    assert bare.spec.kwargs["system_prompt"] == ""
    # the tools still work, and a malformed reply still shows the format
    assert "python[" in bare.step("print(1)").observation[0]["content"]
    bare.step(bare.oracle_action())
    assert bare.step(bare.oracle_action()).info["success"]
    short = make("python-v0", system_prompt="Compute, then answer.")
    assert short.reset(seed=1)[0][0] == {"role": "system", "content": "Compute, then answer."}
    with pytest.raises(ValueError, match="system_prompt must be a string"):
        PythonTool(system_prompt=3)
    for env in (default, bare, short):
        env.close()
