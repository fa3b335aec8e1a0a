"""MultiRunner: multi-agent episodes with a policy per agent, one ledger per model-played
agent. Each trained agent's trajectory holds exactly the tokens it sampled (the other agent's
replies are only text in its prompt), its rewards, its outcome and a group id per role."""

from __future__ import annotations

import functools

import pytest
import torch

from turnrl import envs
from turnrl.models.policy import token_logprobs
from turnrl.rollout.engine import SamplingParams
from turnrl.rollout.hf import HFEngine
from turnrl.rollout.multi import MultiRunner

SEEDS = [3, 4]
GROUP_SIZE = 2
# many invalid replies allowed: both agents of the SFT'd tiny model get to reply
PATIENT = functools.partial(envs.make, "tictactoe-v0", max_invalid=6, max_turns=40)


@pytest.fixture(scope="module")
def engine(load_sft, tokenizer) -> HFEngine:
    return HFEngine(load_sft().eval(), eos_token_id=tokenizer.eos_token_id,
                    pad_token_id=tokenizer.pad_token_id, seed=0)


def runner(engine, tokenizer, seats, trained=("policy",), **kwargs) -> MultiRunner:
    return MultiRunner({"policy": engine}, tokenizer, SamplingParams(max_new_tokens=4),
                       seats=seats, trained=trained, sampling_seed=0, **kwargs)


def sampled_turns(trajectory, tokenizer) -> list[str]:
    turns: dict[int, list[int]] = {}
    for token, mask, turn in zip(trajectory.token_ids, trajectory.loss_mask,
                                 trajectory.turn_index, strict=True):
        if mask:
            turns.setdefault(turn, []).append(token)
    return [tokenizer.decode(ids, skip_special_tokens=True) for _, ids in sorted(turns.items())]


def test_self_play_gives_each_agent_its_own_ledger(engine, tokenizer):
    episodes = runner(engine, tokenizer, {"x": "policy", "o": "policy"}).collect(
        PATIENT, SEEDS, GROUP_SIZE, first_group_id=5)
    games: list[list] = []  # episode by episode: x (it always moves first), then o if it replied
    for trajectory in episodes:
        if trajectory.agent == "x":
            games.append([trajectory])
        else:
            assert trajectory.agent == "o" and len(games[-1]) == 1
            games[-1].append(trajectory)
    assert len(games) == len(SEEDS) * GROUP_SIZE
    assert sum(len(g) == 2 for g in games) >= 3  # o replied in most games
    # role-conditioned groups: task group g, agent k -> 2g + k
    assert [[t.group_id for t in g] for g in games[:1]] in ([[10, 11]], [[10]])
    assert {t.group_id for t in games[-1]} <= {12, 13}
    for x, o in (g for g in games if len(g) == 2):
        assert x.total_reward == -o.total_reward  # zero-sum, each agent's own return
        assert {x.info["outcome"], o.info["outcome"]} in ({"win", "loss"}, {"draw"})
        for trajectory in (x, o):
            # the transcript ends as the game did, with what the agent was told last
            assert trajectory.messages[-1]["content"] in ("You won.", "You lost.", "Draw.")
            replies = [m["content"] for m in trajectory.messages if m["role"] == "assistant"]
            assert sampled_turns(trajectory, tokenizer) == replies  # its own samples only
            assert len(trajectory.turn_rewards) == len(replies) > 0
        # what x replied reaches o only as the env words it, never as o's own tokens
        o_replies = {m["content"] for m in o.messages if m["role"] == "assistant"}
        assert o_replies.isdisjoint(
            {m["content"] for m in x.messages if m["role"] == "assistant"}) or all(
            m["role"] != "assistant" or m["content"] in o_replies for m in o.messages)


def test_the_learner_recomputes_every_sampled_log_prob(engine, tokenizer, load_sft):
    episodes = runner(engine, tokenizer, {"x": "policy", "o": "policy"}).collect(
        PATIENT, SEEDS, 1)
    model = load_sft().eval()
    for trajectory in episodes:
        ids = torch.tensor([trajectory.token_ids])
        with torch.no_grad():
            learner, _ = token_logprobs(model, ids, torch.ones_like(ids))
        mask = torch.tensor(trajectory.loss_mask, dtype=torch.bool)
        behaviour = torch.tensor(trajectory.logprobs)
        assert mask.sum() > 0
        assert torch.allclose(learner[0][mask], behaviour[mask], atol=1e-4)
        assert (behaviour[~mask] == 0).all()


def test_against_a_script_only_the_model_agent_is_returned(engine, tokenizer):
    make = functools.partial(envs.make, "tictactoe-v0")
    episodes = runner(engine, tokenizer, {"x": "oracle", "o": "policy"}).collect(
        make, SEEDS, GROUP_SIZE)
    assert {t.agent for t in episodes} == {"o"} and len(episodes) == len(SEEDS) * GROUP_SIZE
    assert all(t.group_id % 2 == 1 for t in episodes)
    for trajectory in episodes:  # the oracle never loses: o draws at best
        assert trajectory.total_reward <= 0 and not trajectory.success
        assert trajectory.terminated and trajectory.error is None


def test_a_frozen_model_plays_but_is_not_returned(engine, tokenizer):
    both = MultiRunner({"policy": engine, "frozen": engine}, tokenizer,
                       SamplingParams(max_new_tokens=4), seats={"x": "frozen", "o": "policy"},
                       trained=["policy"], sampling_seed=0, role_groups=False)
    episodes = both.collect(PATIENT, [0], 2, first_group_id=7)
    assert [t.agent for t in episodes] == ["o", "o"] and {t.group_id for t in episodes} == {7}


def test_unknown_players_and_agents_are_named(engine, tokenizer):
    with pytest.raises(ValueError, match=r"seats played by \['minimax'\]"):
        runner(engine, tokenizer, {"x": "minimax", "o": "policy"})
    episodes = runner(engine, tokenizer, {"x": "policy"})
    with pytest.raises(ValueError, match=r"no seat for agent\(s\) \['o'\]"):
        episodes.collect(functools.partial(envs.make, "tictactoe-v0"), [0], 1)


@pytest.mark.parametrize("keys", ["turn", "state"])
def test_step_keys_name_the_agent_and_its_turn_or_position(engine, tokenizer, keys):
    from turnrl.rollout.runner import stable_hash

    episodes = runner(engine, tokenizer, {"x": "policy", "o": "oracle"},
                      step_keys=keys).collect(PATIENT, [0, 1], 2)
    for trajectory in episodes:
        assert len(trajectory.state_keys) == trajectory.num_turns
    if keys == "turn":  # AT-GRPO: x's turn k has one key in every episode
        assert all(t.state_keys == [stable_hash(("x", k)) for k in range(t.num_turns)]
                   for t in episodes)
    else:  # x's first position is the empty board in every episode
        assert {t.state_keys[0] for t in episodes} == {stable_hash(("x", "." * 9))}
    none = runner(engine, tokenizer, {"x": "policy", "o": "oracle"}).collect(PATIENT, [0], 1)
    assert none[0].state_keys is None


def test_role_conditioned_groups_give_grpo_a_baseline_per_role():
    """SPIRAL's role-conditioned advantage is GRPO over groups of one role: when x wins three
    games of four, x's wins are expected and o's one win is not."""
    import math

    from algo_inputs import make_inputs

    from turnrl.algos.advantages import grpo

    returns = [1, 1, 1, -1, -1, -1, -1, 1]  # x's four games, then o's four (zero-sum)
    common = {"token_mask": [[0, 1]] * 8, "turn_index": [[-1, 0]] * 8,
              "turn_rewards": [[r] for r in returns], "turn_mask": [[1]] * 8}
    by_role = grpo(make_inputs(**common, group_ids=[0] * 4 + [1] * 4)).advantages[:, 1]
    by_task = grpo(make_inputs(**common, group_ids=[0] * 8)).advantages[:, 1]
    # one role: mean ±0.5, unbiased std sqrt((3 * 0.25 + 2.25) / 3) = 1
    std = math.sqrt((3 * 0.5 ** 2 + 1.5 ** 2) / 3)
    expected = torch.tensor([0.5, 0.5, 0.5, -1.5, -0.5, -0.5, -0.5, 1.5],
                            dtype=by_role.dtype) / (std + 1e-6)
    torch.testing.assert_close(by_role, expected)
    # both roles in one group: mean 0, so every win gets the same advantage whoever won
    assert by_task[0] == by_task[7] and by_role[7] == 3 * by_role[0]
