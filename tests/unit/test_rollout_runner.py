"""The runner with scripted engines (no model): grouping, rewards, sessions, env stepping."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

from turnrl import envs
from turnrl.envs.protocol import EnvSpec
from turnrl.models.chat import encode
from turnrl.rollout.engine import Completion, Engine, SamplingParams
from turnrl.rollout.runner import Runner
from turnrl.types import StepResult

PARAMS = SamplingParams(max_new_tokens=8)


@dataclass
class ScriptedEngine:
    """Answers every prompt with ``reply(decoded prompt)`` + EOS; records sessions."""

    tokenizer: object
    reply: object
    sessions: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)

    async def generate(self, prompt_ids, params, *, session=None) -> Completion:
        self.sessions.append(session)
        text = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        ids = [*encode(self.tokenizer, self.reply(text)), self.tokenizer.eos_token_id]
        return Completion(ids, [-0.1] * len(ids), "stop")

    def load_weights(self, model) -> None:
        pass

    def end_session(self, session: str) -> None:
        self.ended.append(session)


def solve_last_question(text: str) -> str:
    a, op, b = re.findall(r"(\d+)([+*-])(\d+)=", text)[-1]
    return str(eval(f"{a}{op}{b}"))  # digits and one operator


def test_scripted_engine_is_an_engine(tokenizer) -> None:
    assert isinstance(ScriptedEngine(tokenizer, str), Engine)


def test_collect_groups_episodes_by_seed(tokenizer) -> None:
    engine = ScriptedEngine(tokenizer, solve_last_question)
    runner = Runner(engine, tokenizer, PARAMS)
    trajectories = runner.collect(lambda: envs.make("arithmetic-v0"), [5, 6], 3,
                                  first_group_id=10)
    assert [t.seed for t in trajectories] == [5, 5, 5, 6, 6, 6]
    assert [t.group_id for t in trajectories] == [10, 10, 10, 11, 11, 11]
    for t in trajectories:
        assert t.success and t.terminated and not t.truncated and t.error is None
        assert t.turn_rewards == [1.0] and t.messages[-1]["content"] == "Correct."
        assert t.logprobs.count(-0.1) == t.num_sampled_tokens
    # one session per episode, each ended once
    assert len(set(engine.sessions)) == 6 and sorted(engine.ended) == sorted(set(engine.sessions))


def test_turn_rewards_and_truncation_at_max_turns(tokenizer) -> None:
    engine = ScriptedEngine(tokenizer, lambda text: "up")  # bumps into the top edge forever
    runner = Runner(engine, tokenizer, PARAMS)
    (t,) = runner.collect(lambda: envs.make("frozenlake-v0", max_turns=8), [0], 1)
    assert t.num_turns == 8 and t.turn_rewards == [0.0] * 8
    assert t.truncated and not t.terminated and not t.success
    assert t.counts is not None
    assert t.counts.invalid_actions == 0 and t.counts.length_finishes == 0
    assert [m["role"] for m in t.messages].count("assistant") == 8
    assert t.messages[-1]["role"] == "user"  # the final observation is in the transcript


def test_a_turn_cap_below_the_envs_truncates_and_one_above_it_changes_nothing(tokenizer):
    engine = ScriptedEngine(tokenizer, lambda text: "up")
    capped = Runner(engine, tokenizer, PARAMS, max_turns=3)
    (t,) = capped.collect(lambda: envs.make("frozenlake-v0", max_turns=8), [0], 1)
    assert t.num_turns == 3 and t.truncated and not t.terminated
    above = Runner(engine, tokenizer, PARAMS, max_turns=50)
    (t,) = above.collect(lambda: envs.make("frozenlake-v0", max_turns=8), [0], 1)
    assert t.num_turns == 8 and t.truncated
    # an episode that ends on its own before the cap is not truncated
    solver = ScriptedEngine(tokenizer, solve_last_question)
    (t,) = Runner(solver, tokenizer, PARAMS, max_turns=1).collect(
        lambda: envs.make("arithmetic-v0"), [5], 1)
    assert t.terminated and not t.truncated and t.success


def test_invalid_actions_are_counted(tokenizer) -> None:
    runner = Runner(ScriptedEngine(tokenizer, lambda text: "fly"), tokenizer, PARAMS)
    (t,) = runner.collect(lambda: envs.make("frozenlake-v0"), [0], 1)
    assert t.counts is not None and t.counts.invalid_actions == t.num_turns == 10


class _RendezvousEnv:
    """Two episodes whose ``step`` each wait for the other one's ``step`` to start."""

    spec = EnvSpec(id="rendezvous-v0", entry_point="x:y", max_turns=1)
    barrier = threading.Barrier(2, timeout=0.5)

    def reset(self, *, seed=None, options=None):
        return [{"role": "user", "content": "go"}], {}

    def step(self, action: str) -> StepResult:
        try:
            self.barrier.wait()
            met = True
        except threading.BrokenBarrierError:
            met = False
        return StepResult([{"role": "user", "content": "ok"}], float(met), True, False,
                          {"success": met})

    def close(self) -> None:
        pass


def test_env_steps_of_concurrent_episodes_can_overlap(tokenizer) -> None:
    _RendezvousEnv.barrier.reset()
    runner = Runner(ScriptedEngine(tokenizer, lambda text: "x"), tokenizer, PARAMS,
                    offload_env_steps=True)
    trajectories = runner.collect(_RendezvousEnv, [0], 2)
    assert all(t.success for t in trajectories)


class _SlowRendezvousEnv(_RendezvousEnv):
    """The same env, declaring ``slow_steps``: the runner offloads it without being asked."""

    spec = EnvSpec(id="slow-rendezvous-v0", entry_point="x:y", max_turns=1, slow_steps=True)


def test_envs_declaring_slow_steps_run_off_the_event_loop(tokenizer) -> None:
    runner = Runner(ScriptedEngine(tokenizer, lambda text: "x"), tokenizer, PARAMS)
    _RendezvousEnv.barrier.reset()
    assert not any(t.success for t in runner.collect(_RendezvousEnv, [0], 2))
    _RendezvousEnv.barrier.reset()  # a fast env runs inline: the two steps could not meet
    assert all(t.success for t in runner.collect(_SlowRendezvousEnv, [0], 2))


def test_state_keys_are_recorded_per_turn_and_laid_out(tokenizer) -> None:
    from turnrl.train.layout import layout

    # "up" from the start cell bumps the wall: the state (and its key) does not change
    replies = iter(["up", "down", "up", "down"] * 4)
    runner = Runner(ScriptedEngine(tokenizer, lambda text: next(replies)), tokenizer, PARAMS)
    small_lake = lambda: envs.make("frozenlake-v0", max_size=4, max_turns=6)  # noqa: E731
    first, second = runner.collect(small_lake, [3], 2)
    for traj in (first, second):
        keys = traj.state_keys
        assert keys is not None and "state_keys" not in traj.info
        assert len(keys) == traj.num_turns
        assert all(isinstance(k, int) and k >= 0 for k in keys)
    # key i is the state before action i: "up" bumped (same state), then "down" moved
    assert first.num_turns >= 3
    assert first.state_keys[0] == first.state_keys[1]
    assert first.state_keys[1] != first.state_keys[2]
    batch = layout([first, second], tokenizer.pad_token_id)
    keys = batch.state_keys
    assert keys is not None and keys.shape == batch.turn_mask.shape
    assert keys[0, : first.num_turns].tolist() == first.state_keys
    assert bool((keys[batch.turn_mask == 0] == -1).all())


def test_envs_without_state_keys_leave_them_out(tokenizer) -> None:
    from turnrl.train.layout import layout

    runner = Runner(ScriptedEngine(tokenizer, solve_last_question), tokenizer, PARAMS)
    trajectories = runner.collect(lambda: envs.make("arithmetic-v0"), [1], 2)
    assert trajectories[0].state_keys is None and "state_keys" not in trajectories[0].info
    assert "state_keys" not in trajectories[0].to_dict()
    assert layout(trajectories, tokenizer.pad_token_id).state_keys is None
