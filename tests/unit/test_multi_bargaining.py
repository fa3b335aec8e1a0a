"""bargaining-v0: the contract, private values, the oracle's deals, rewards, invalid replies,
truncation, determinism and kwargs."""

from __future__ import annotations

import random
import statistics
from typing import Any

import pytest

from turnrl.envs.multi import check_multi_env, oracle_policy, play_episode, random_policy
from turnrl.envs.multi.bargaining import SPEC, Bargaining, points, rest

SEEDS = range(200)


def oracle_play(env: Bargaining, seed: int):
    return play_episode(env, {"alice": oracle_policy, "bob": oracle_policy}, seed=seed)


def random_play(env: Bargaining, seed: int):
    rng = random.Random(seed)
    return play_episode(env, {"alice": random_policy(rng), "bob": random_policy(rng)}, seed=seed)


def render(values: tuple[int, int, int]) -> str:
    return f"book {values[0]}, hat {values[1]}, ball {values[2]}"


def test_spec_and_contract() -> None:
    assert (SPEC.id, SPEC.agents, SPEC.has_oracle, SPEC.max_turns) == \
        ("bargaining-v0", ("alice", "bob"), True, 6)
    env = Bargaining(max_turns=4)
    assert (env.spec.max_turns, env.spec.kwargs) == (4, {"max_turns": 4})
    check_multi_env(Bargaining(), seeds=range(6))
    check_multi_env(env, seeds=(7, 8))


def test_pool_and_values() -> None:
    env = Bargaining()
    firsts = set()
    for seed in SEEDS:
        info = env.reset(seed=seed)
        firsts.add(info["first"])
        assert info["seed"] == seed and list(info["pool"].values()) == list(env.pool)
        assert all(1 <= n <= 3 for n in env.pool) and sum(env.pool) >= 4
        alice, bob = env.values["alice"], env.values["bob"]
        assert points(alice, env.pool) == points(bob, env.pool) == 10
        # each values some type more than the other does; no type is worthless to both
        assert any(a > b for a, b in zip(alice, bob, strict=True))
        assert any(b > a for a, b in zip(alice, bob, strict=True))
        assert all(a or b for a, b in zip(alice, bob, strict=True))
        assert "values" not in info
        for agent in ("alice", "bob"):
            assert render(env.values[agent]) in env.observe(agent)[1]["content"]
    assert firsts == {"alice", "bob"}


def test_values_never_reach_the_other_agent() -> None:
    env = Bargaining()
    for seed in range(60):
        for episode in (oracle_play(env, seed), random_play(env, seed)):
            for agent, other in (("alice", "bob"), ("bob", "alice")):
                for message in episode.conversations[agent]:
                    assert render(env.values[other]) not in message["content"]


def test_a_conversation_does_not_depend_on_the_other_agents_values() -> None:
    """Two games alike but for Alice's values give Bob the same conversation."""
    env = Bargaining()
    seen: dict[tuple, tuple[int, tuple]] = {}
    pair = None
    for seed in range(2000):
        info = env.reset(seed=seed)
        key = (env.pool, env.values["bob"], info["first"])
        if key in seen and seen[key][1] != env.values["alice"]:
            pair = (seen[key][0], seed)
            break
        seen.setdefault(key, (seed, env.values["alice"]))
    assert pair is not None
    replies = ["propose 1 0 0", "propose 0 1 0", "nonsense", "propose 1 1 0", "accept"]
    conversations = []
    for seed in pair:
        env.reset(seed=seed)
        for reply in replies:
            env.step(reply)
        conversations.append(env.observe("bob"))
    assert conversations[0] == conversations[1]


def test_oracle_makes_deals_worth_more_than_random_play() -> None:
    env = Bargaining()
    oracle = [oracle_play(env, seed) for seed in SEEDS]
    randoms = [random_play(env, seed) for seed in SEEDS]
    deal_rate = statistics.mean(e.outcomes["alice"] == "success" for e in oracle)
    assert deal_rate >= 0.9
    assert all(e.invalid_actions == {"alice": 0, "bob": 0} for e in oracle + randoms)
    oracle_joint = statistics.mean(sum(e.returns.values()) for e in oracle)
    random_joint = statistics.mean(sum(e.returns.values()) for e in randoms)
    assert oracle_joint > random_joint + 0.3


def test_deal_rewards_are_each_agents_value_over_ten() -> None:
    env = Bargaining()
    for seed in range(20):
        info = env.reset(seed=seed)
        proposer = info["first"]
        acceptor = "bob" if proposer == "alice" else "alice"
        result = env.step("propose 1 1 0")
        assert not result.done(proposer) and env.agent_selection == acceptor
        result = env.step("Accept")
        deal = {proposer: (1, 1, 0), acceptor: rest(env.pool, (1, 1, 0))}
        for agent in ("alice", "bob"):
            value = points(env.values[agent], deal[agent])
            assert result.rewards[agent] == pytest.approx(value / 10)
            assert result.terminations[agent] and not result.truncations[agent]
            assert result.infos[agent] == {"invalid_action": False, "outcome": "success",
                                           "deal": deal, "value": value}
            assert f"({value} points)" in env.observe(agent)[-1]["content"]
        assert env.agents == [] and env.oracle_action() is None


def test_oracle_episode_returns_match_the_deal() -> None:
    env = Bargaining()
    for seed in range(30):
        env.reset(seed=seed)
        while env.agents:
            result = env.step(env.oracle_action() or "")
        for agent in ("alice", "bob"):
            info = result.infos[agent]
            assert result.rewards[agent] == pytest.approx(info["value"] / 10)
            if info["outcome"] == "success":
                assert info["value"] == points(env.values[agent], info["deal"][agent])


@pytest.mark.parametrize(("reply", "why"), [
    ("hello", "reply propose B H L"), ("propose 1 2", "reply propose B H L"),
    ("propose 4 0 0", "at most"), ("accept", "no proposal"), ("", "reply propose B H L")])
def test_invalid_reply_is_flagged_and_loses_the_turn(reply: str, why: str) -> None:
    env = Bargaining()
    first = env.reset(seed=3)["first"]
    other = "bob" if first == "alice" else "alice"
    result = env.step(reply)
    assert result.infos[first]["invalid_action"] and not result.infos[other]["invalid_action"]
    assert env.agent_selection == other and env.agents == ["alice", "bob"]
    assert why in env.observe(first)[-1]["content"]
    assert env.observe(first)[-2] == {"role": "assistant", "content": reply}
    assert "invalid" in env.observe(other)[-1]["content"]
    assert not any(result.done(a) for a in ("alice", "bob"))


def test_accepting_ones_own_proposal_is_invalid() -> None:
    env = Bargaining()
    first = env.reset(seed=0)["first"]
    env.step("propose 1 0 0")
    env.step("gibberish")  # the other loses its turn; the first's proposal still stands
    result = env.step("accept")
    assert result.infos[first]["invalid_action"] and env.agents == ["alice", "bob"]


def test_out_of_turns_truncates_and_walk_terminates_with_zero() -> None:
    env = Bargaining(max_turns=5)
    env.reset(seed=1)
    replies = ["propose 1 0 0", "bad", "propose 0 1 0", "propose 1 1 0", "propose 1 0 1"]
    for i, reply in enumerate(replies):
        assert env.agents, f"ended early at step {i}"
        result = env.step(reply)
    assert env.agents == []
    for agent in ("alice", "bob"):
        assert result.truncations[agent] and not result.terminations[agent]
        assert result.rewards[agent] == 0.0
        assert result.infos[agent]["outcome"] == "failure"
        assert result.infos[agent]["deal"] is None and result.infos[agent]["value"] == 0
        assert "Out of turns" in env.observe(agent)[-1]["content"]
    with pytest.raises(RuntimeError, match="over"):
        env.step("accept")
    env.reset(seed=1)
    env.step("propose 1 0 0")
    result = env.step("walk")
    assert all(result.terminations[a] and result.rewards[a] == 0.0 for a in ("alice", "bob"))
    assert result.infos["alice"]["outcome"] == "failure" and env.agents == []


def test_same_seed_same_conversations() -> None:
    one, two = Bargaining(), Bargaining()
    for seed in range(10):
        assert oracle_play(one, seed).conversations == oracle_play(two, seed).conversations
        assert random_play(one, seed).conversations == random_play(two, seed).conversations
    assert oracle_play(one, 0).conversations != oracle_play(one, 1).conversations


def test_messages_are_short() -> None:
    env = Bargaining()
    for seed in range(50):
        for episode in (oracle_play(env, seed), random_play(env, seed)):
            for conversation in episode.conversations.values():
                assert max(len(m["content"]) for m in conversation) < 300
                assert sum(len(m["content"]) for m in conversation) < 2048


@pytest.mark.parametrize("max_turns", [1, 21, 0, True, "6", 2.5])
def test_kwargs_validation(max_turns: Any) -> None:
    with pytest.raises(ValueError, match="max_turns"):
        Bargaining(max_turns=max_turns)
    with pytest.raises(ValueError, match="option"):
        Bargaining().reset(seed=0, options={"pool": (1, 1, 2)})
