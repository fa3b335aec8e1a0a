"""Fault isolation in rollouts: a raising, hanging or garbage-returning env ends its own
episode only, marked with a message that names the env, the seed and how to replay it."""

from __future__ import annotations

import math
import time

import pytest
from test_rollout_runner import PARAMS, ScriptedEngine, solve_last_question

from turnrl import envs
from turnrl.envs.builtin.arithmetic import Arithmetic
from turnrl.rollout.runner import Runner
from turnrl.train.collect import Collector
from turnrl.train.scoring import Shaping, outcome_rewards, score_episodes
from turnrl.types import StepResult


class Faulty(Arithmetic):
    """``arithmetic-v0`` whose episodes with ``seed % 4 == 1`` misbehave in ``mode``."""

    def __init__(self, mode: str) -> None:
        super().__init__(min_value=0, max_value=9)
        self.mode = mode

    def reset(self, *, seed=None, options=None):
        self.faulty = seed % 4 == 1
        if self.faulty and self.mode == "reset":
            raise ConnectionError("retriever unreachable")
        if self.faulty and self.mode == "reset_garbage":
            return "not a tuple"
        if self.faulty and self.mode == "reset_messages":
            return [{"content": "no role"}], {}
        return super().reset(seed=seed, options=options)

    def step(self, action: str):
        if self.faulty:
            if self.mode == "raise":
                raise ValueError("tool crashed")
            if self.mode == "hang":
                time.sleep(30)
            if self.mode == "tuple":
                return [], 1.0, True, False, {}
            if self.mode == "nan":
                return StepResult([{"role": "user", "content": "?"}], math.nan, True, False, {})
            if self.mode == "observation":
                return StepResult("plain text", 1.0, True, False, {})
            if self.mode == "numpy":
                import numpy as np

                result = super().step(action)
                return StepResult(result.observation, np.float32(result.reward), True, False,
                                  result.info)
        return super().step(action)


def run(tokenizer, mode: str, seeds=range(8), **runner_kwargs):
    engine = ScriptedEngine(tokenizer, solve_last_question)
    runner = Runner(engine, tokenizer, PARAMS, **runner_kwargs)
    return runner.collect(lambda: Faulty(mode), list(seeds), 1), engine


@pytest.mark.parametrize(("mode", "expected"), [
    ("raise", "Faulty.step raised ValueError: tool crashed"),
    ("tuple", "env.step must return turnrl.types.StepResult, got tuple"),
    ("nan", "StepResult.reward must be a finite number, got nan"),
    ("observation", "StepResult.observation must be a list of"),
])
def test_a_failing_step_ends_only_its_episode(tokenizer, mode, expected) -> None:
    trajectories, engine = run(tokenizer, mode)
    failed = [t for t in trajectories if t.error is not None]
    assert [t.seed for t in failed] == [1, 5]
    for t in failed:
        message = t.error
        assert expected in message
        assert f"env arithmetic-v0, seed {t.seed}, env.step at turn 0" in message
        assert f"turnrl play arithmetic-v0 --seed {t.seed}" in message
        assert t.truncated and not t.terminated and not t.success
        assert t.turn_rewards == [0.0] and t.num_sampled_tokens > 0  # the turn was played
        assert "error" not in t.info and t.to_dict()["error"] == message
    for t in trajectories:
        if t.error is None:
            assert t.success and t.turn_rewards == [1.0]
            assert "error" not in t.to_dict()
    assert len(engine.ended) == 8  # every session was closed


def test_a_hanging_step_times_out_without_stalling_the_rest(tokenizer) -> None:
    start = time.perf_counter()
    trajectories, _ = run(tokenizer, "hang", step_timeout_s=0.3)
    assert time.perf_counter() - start < 10  # not 2 x 30 s
    failed = [t for t in trajectories if t.error is not None]
    assert [t.seed for t in failed] == [1, 5]
    assert "did not return within 0.3 s (env.step_timeout_s)" in failed[0].error
    assert sum(t.success for t in trajectories) == 6


@pytest.mark.parametrize(("mode", "expected"), [
    ("reset", "Faulty.reset raised ConnectionError: retriever unreachable"),
    ("reset_garbage", "env.reset must return (messages, info: dict)"),
    ("reset_messages", "{'role', 'content': str}"),
])
def test_a_failing_reset_gives_an_empty_marked_episode(tokenizer, mode, expected) -> None:
    trajectories, _ = run(tokenizer, mode, seeds=range(4))
    failed = trajectories[1]
    assert failed.error is not None
    assert expected in failed.error and "outside env.step" in failed.error
    assert failed.token_ids == [] and failed.num_turns == 0 and failed.truncated
    assert all(t.success for i, t in enumerate(trajectories) if i != 1)


def test_engine_errors_are_not_swallowed(tokenizer) -> None:
    class Broken(ScriptedEngine):
        async def generate(self, prompt_ids, params, *, session=None):
            raise RuntimeError("CUDA out of memory")

    runner = Runner(Broken(tokenizer, str), tokenizer, PARAMS)
    with pytest.raises(RuntimeError, match="out of memory"):
        runner.collect(lambda: envs.make("arithmetic-v0"), [0, 1], 1)


def collect_once(trajectories, on_error: str, error_reward: float = -1.0):
    """One collection of ``trajectories`` (single-episode groups) with ``env.on_error``."""
    collector = Collector(lambda first, n: list(trajectories), rewards=None,
                          shaping=Shaping(score_failures=on_error == "score",
                                          error_reward=error_reward),
                          filters=(), n_groups=len(trajectories), group_size=1, max_tries=1,
                          max_failed_batches=3, env_id="arithmetic-v0")
    return collector.collect()


def test_failed_episodes_are_excluded_or_scored(tokenizer) -> None:
    trajectories, _ = run(tokenizer, "raise")
    collected = collect_once(trajectories, "exclude")
    kept = collected.trajectories
    assert collected.metrics["rollout/env_errors"] == 2.0 and len(kept) == 6
    assert all(t.error is None for t in kept)
    assert [t.seed for t in kept] == [0, 2, 3, 4, 6, 7]  # in the batch's order
    assert collected.outcomes.tolist() == [1.0] * 6
    trajectories, _ = run(tokenizer, "raise")
    collected = collect_once(trajectories, "score")
    kept = collected.trajectories
    assert collected.metrics["rollout/env_errors"] == 2.0 and len(kept) == 8
    failed_rows = [i for i, t in enumerate(kept) if t.error is not None]
    assert [kept[i].seed for i in failed_rows] == [1, 5]
    assert [collected.outcomes[i].item() for i in failed_rows] == [-1.0, -1.0]
    # the error reward sits on the last turn; the trajectory's env rewards are left as played
    shaped = outcome_rewards(kept, collected.scores, Shaping(score_failures=True,
                                                             error_reward=-1.0))
    assert [shaped.turn_rewards[i].tolist() for i in failed_rows] == [[-1.0], [-1.0]]
    assert [kept[i].turn_rewards for i in failed_rows] == [[0.0], [0.0]]
    # a failure before the first turn has nothing to train on: excluded even when scoring
    trajectories, _ = run(tokenizer, "reset", seeds=range(4))
    collected = collect_once(trajectories, "score")
    assert collected.metrics["rollout/env_errors"] == 1.0 and len(collected.trajectories) == 3


def test_a_raising_reward_function_fails_its_episode_only(tokenizer) -> None:
    trajectories, _ = run(tokenizer, "none", seeds=range(3))

    class Picky:
        def score(self, trajectory):
            if trajectory.seed == 2:
                raise KeyError("answer")
            return 0.5, {"picky": 0.5}

    scores = score_episodes(trajectories, Picky())
    assert [(s.total, s.terms, s.error) for s in scores[:2]] == [(0.5, {"picky": 0.5}, None)] * 2
    shaped = outcome_rewards(trajectories, scores, Shaping(env_weight=1.0))
    assert shaped.outcomes[:2].tolist() == [1.5, 1.5]
    assert shaped.keep.tolist() == [True, True, False]  # env.on_error=exclude drops it
    assert scores[2].error is not None and "reward function raised KeyError" in scores[2].error
    assert "seed 2" in scores[2].error
    assert trajectories[2].error is None  # the trajectory itself is not rewritten


def test_oracle_demonstrations_skip_episodes_whose_env_fails() -> None:
    from turnrl.train.sft import DatasetError, oracle_demonstrations

    class FaultyOracle(Faulty):
        spec = Arithmetic().spec  # has an oracle

    conversations = oracle_demonstrations(lambda: FaultyOracle("raise"), range(8),
                                          random_action_prob=0.0)
    assert len(conversations) == 6  # seeds 1 and 5 failed
    with pytest.raises(DatasetError, match="every oracle demonstration failed; the last: "
                                           "ValueError: tool crashed"):
        oracle_demonstrations(lambda: FaultyOracle("raise"), [1, 5], random_action_prob=0.0)


def test_numpy_rewards_are_numbers(tokenizer) -> None:
    trajectories, _ = run(tokenizer, "numpy")
    assert all(t.error is None for t in trajectories)
    assert [t.total_reward for t in trajectories] == [1.0] * 8


def test_sampling_seeds_make_samples_independent_of_thread_timing(tokenizer, load_sft) -> None:
    """With ``sampling_seed``, each request's seed comes from (task, member, turn): running the
    env steps in threads (any order of arrival at the engine) samples the same tokens."""
    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.hf import HFEngine

    model = load_sft().eval()

    def collect(**kwargs):
        engine = HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                          pad_token_id=tokenizer.pad_token_id, seed=123)
        runner = Runner(engine, tokenizer, SamplingParams(max_new_tokens=6), sampling_seed=7,
                        **kwargs)
        make = lambda: envs.make("frozenlake-v0", min_size=3, max_size=3, max_turns=4)  # noqa: E731
        return [t.token_ids for t in runner.collect(make, [0, 1, 2], 3)]

    inline = collect()
    assert collect(offload_env_steps=True) == inline
    assert collect(step_timeout_s=30) == inline
    assert len({tuple(t) for t in inline}) > 3  # members of a group sample differently
