"""The pure stages of an RL step: reward shaping, the filter / correction / KL-placement
registries, the one value shift, the stage functions of ``turnrl.train.stages`` and the
collector's failure handling and resampling."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_train_batch import traj

from turnrl.algos.correction import AdaptiveKLController, kl_token_penalty
from turnrl.algos.filters import informative_groups, overlong_penalty, turn_lengths, turn_sums
from turnrl.algos.functional import masked_mean, state_values
from turnrl.algos.presets import PRESETS
from turnrl.algos.registry import CORRECTIONS, FILTERS, KL_ESTIMATORS, KL_PLACEMENTS
from turnrl.algos.shaping import RewardInputs, shape_rewards
from turnrl.train.collect import Collector, RolloutError
from turnrl.train.layout import layout
from turnrl.train.scoring import EpisodeScore, Shaping, score
from turnrl.train.stages import (
    KLStep,
    Passes,
    advantage_inputs,
    kl_step,
    loss_filter_mask,
    scoring_passes,
    train_batch,
    turn_start_values,
)
from turnrl.types import AdvantageOutputs, Trajectory

PAD = 0


def reward_inputs(**overrides) -> RewardInputs:
    """Three episodes over K = 3 turn columns: two turns, one turn, two turns (the last one
    failed). A reward outside the turn mask (9.0) must never be read."""
    base = {
        "env_rewards": torch.tensor([[0.5, 1.0, 0.0], [1.0, 0.0, 9.0], [0.2, 0.4, 0.0]]),
        "turn_mask": torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]),
        "term_totals": torch.tensor([2.0, -1.0, 3.0]),
        "failed": torch.tensor([False, False, True]),
        "sampled": torch.tensor([True, True, True]),
    }
    return RewardInputs(**{**base, **overrides})


# ---------------------------------------------------------------------- shape_rewards
def test_env_weight_scales_the_env_rewards_and_terms_land_on_the_last_turn() -> None:
    shaped = shape_rewards(reward_inputs(), env_weight=0.5)
    # row 0: [0.25, 0.5] + 2 on turn 1; row 1: 0.5 − 1 on turn 0 (its 9.0 is outside the mask)
    torch.testing.assert_close(shaped.turn_rewards[:2],
                               torch.tensor([[0.25, 2.5, 0.0], [-0.5, 0.0, 0.0]]))
    assert shaped.outcomes[:2].tolist() == pytest.approx([2.75, -0.5])
    assert shaped.keep.tolist() == [True, True, False]  # failures are excluded by default
    assert shaped.metrics == {}  # no length or KL penalty asked for


def test_failures_are_excluded_or_scored_at_the_error_reward() -> None:
    excluded = shape_rewards(reward_inputs(), score_failures=False, error_reward=-1.0)
    assert excluded.keep.tolist() == [True, True, False]
    scored = shape_rewards(reward_inputs(), score_failures=True, error_reward=-1.0)
    assert scored.keep.tolist() == [True, True, True]
    # the failed episode's rewards: error_reward on its last turn, nothing else
    assert scored.turn_rewards[2].tolist() == [0.0, -1.0, 0.0]
    assert scored.outcomes[2].item() == -1.0
    assert torch.equal(scored.turn_rewards[:2], excluded.turn_rewards[:2])
    # a failure without a sampled token has nothing to train on: out even when scoring
    silent = shape_rewards(reward_inputs(sampled=torch.tensor([True, True, False])),
                           score_failures=True, error_reward=-1.0)
    assert silent.keep.tolist() == [True, True, False]
    # an episode without turns gets nothing, not even its terms
    empty = shape_rewards(reward_inputs(turn_mask=torch.tensor([[1.0, 1.0, 0.0], [0.0] * 3,
                                                                [1.0, 1.0, 0.0]])))
    assert empty.turn_rewards[1].tolist() == [0.0, 0.0, 0.0] and empty.outcomes[1] == 0.0


def test_overlong_penalty_is_added_per_turn_after_the_outcomes() -> None:
    lengths = torch.tensor([[10.0, 13.0, 0.0], [17.0, 0.0, 0.0], [12.0, 16.0, 0.0]])
    plain = shape_rewards(reward_inputs())
    shaped = shape_rewards(reward_inputs(turn_lengths=lengths), max_len=16, overlong_cache=4)
    # L = 16, c = 4: (12 − 13)/4 = −0.25; 17 > 16: −1; 16: (12 − 16)/4 = −1
    penalty = torch.tensor([[0.0, -0.25, 0.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    assert torch.allclose(shaped.turn_rewards, plain.turn_rewards + penalty)
    assert torch.equal(penalty, overlong_penalty(lengths, reward_inputs().turn_mask,
                                                 max_len=16, cache=4))
    assert torch.equal(shaped.outcomes, plain.outcomes)  # before the length penalty
    assert shaped.metrics["reward/overlong_penalty"] == pytest.approx(-2.25 / 3)
    with pytest.raises(ValueError, match="needs turn_lengths"):
        shape_rewards(reward_inputs(), max_len=16, overlong_cache=4)


def test_kl_penalty_is_added_to_the_turn_rewards() -> None:
    kl = torch.tensor([[-0.1, -0.2, 0.0], [-0.3, 0.0, 0.0], [0.0, -0.6, 0.0]])
    plain = shape_rewards(reward_inputs())
    shaped = shape_rewards(reward_inputs(kl_penalty=kl))
    assert torch.allclose(shaped.turn_rewards, plain.turn_rewards + kl)
    assert torch.equal(shaped.outcomes, plain.outcomes)  # before the KL penalty
    assert shaped.metrics == {"reward/kl_penalty": pytest.approx(-0.4)}


@st.composite
def shaping_cases(draw: st.DrawFn):
    size, turns = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    num_turns = [draw(st.integers(0, turns)) for _ in range(size)]
    value = st.integers(-20, 20).map(lambda v: v / 4)
    x = RewardInputs(
        env_rewards=torch.tensor([[draw(value) for _ in range(turns)] for _ in range(size)],
                                 dtype=torch.float64),
        turn_mask=torch.tensor([[float(k < n) for k in range(turns)] for n in num_turns],
                               dtype=torch.float64),
        term_totals=torch.tensor([draw(value) for _ in range(size)], dtype=torch.float64),
        failed=torch.tensor([draw(st.booleans()) for _ in range(size)]),
        sampled=torch.tensor([draw(st.booleans()) for _ in range(size)]),
        turn_lengths=torch.tensor([[float(draw(st.integers(0, 20))) for _ in range(turns)]
                                   for _ in range(size)], dtype=torch.float64),
        kl_penalty=torch.tensor([[draw(value) * float(k < n) for k in range(turns)]
                                 for n in num_turns], dtype=torch.float64),
    )
    knobs = {"env_weight": draw(value), "score_failures": draw(st.booleans()),
             "error_reward": draw(value), "max_len": 16,
             "overlong_cache": draw(st.sampled_from([0, 4]))}
    return x, knobs, num_turns


@settings(max_examples=60, deadline=None)
@given(shaping_cases())
def test_outcomes_are_the_sum_of_the_outcome_rewards(case) -> None:
    x, knobs, num_turns = case
    shaped = shape_rewards(x, **knobs)
    penalty = (overlong_penalty(x.turn_lengths, x.turn_mask, max_len=16, cache=4)
               if knobs["overlong_cache"] else torch.zeros_like(x.env_rewards))
    outcome_rewards = shaped.turn_rewards - penalty - x.kl_penalty
    assert torch.allclose(outcome_rewards.sum(-1), shaped.outcomes)
    assert bool((shaped.turn_rewards[x.turn_mask == 0] == 0).all())  # only existing turns
    for b, n in enumerate(num_turns):
        failed, sampled = bool(x.failed[b]), bool(x.sampled[b])
        if n == 0:
            expected = 0.0
        elif failed and knobs["score_failures"]:
            expected = knobs["error_reward"]
        else:
            expected = (knobs["env_weight"] * float(x.env_rewards[b, :n].sum())
                        + float(x.term_totals[b]))
        assert float(shaped.outcomes[b]) == pytest.approx(expected, abs=1e-9)
        assert bool(shaped.keep[b]) == (not failed or (knobs["score_failures"] and sampled))


# ---------------------------------------------------------------------- registries
def test_filters_say_which_episodes_they_keep() -> None:
    outcomes = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.5])
    groups = torch.tensor([7, 7, 3, 3, 9])
    terminated = torch.tensor([True, False, True, False, True])
    keep = FILTERS["dynamic_sampling"](outcomes, groups, terminated)
    assert torch.equal(keep, informative_groups(outcomes, groups))  # termination plays no part
    assert keep.tolist() == [True, True, False, False, False]
    assert FILTERS["truncated"](outcomes, groups, terminated).tolist() == terminated.tolist()


def test_no_correction_keeps_the_sampling_logprobs_and_no_weights() -> None:
    sampling = torch.tensor([[0.0, -1.0, -2.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0]])
    old, weights, metrics = CORRECTIONS["none"](sampling, None, mask, threshold=2.0)
    assert old is sampling and weights is None and metrics == {}
    old, weights, _ = CORRECTIONS["none"](sampling, sampling - 1.0, mask, threshold=2.0)
    assert old is sampling and weights is None  # the learner's log-probs are not read


def test_tis_and_mask_take_the_ratio_against_the_learner_and_cap_the_weights() -> None:
    sampling = torch.tensor([[0.0, -1.0, -1.0, -1.0]])
    learner = torch.tensor([[0.0, -0.5, -2.0, -1.0 + math.log(3.0)]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0]])
    w = [math.exp(0.5), math.exp(-1.0), 3.0]  # exp(learner − sampling) on sampled tokens
    old, weights, metrics = CORRECTIONS["tis"](sampling, learner, mask, threshold=2.0)
    assert old is learner
    assert weights is not None
    assert weights[0].tolist() == pytest.approx([0.0, w[0], w[1], 2.0], rel=1e-6)
    assert metrics["loss/is_clipfrac"] == pytest.approx(1 / 3)
    old, weights, _ = CORRECTIONS["mask"](sampling, learner, mask, threshold=2.0)
    assert old is learner
    assert weights is not None
    assert weights[0].tolist() == pytest.approx([0.0, w[0], w[1], 0.0], rel=1e-6)
    for name in ("tis", "mask"):
        with pytest.raises(ValueError, match="needs the learner's log-probs"):
            CORRECTIONS[name](sampling, None, mask, threshold=2.0)


def kl_case() -> tuple[torch.Tensor, ...]:
    """Two episodes: log-probs, reference log-probs, loss mask, turn index (K = 3)."""
    logprobs = torch.tensor([[0.0, -0.5, -1.0, 0.0, -0.2, 0.0],
                             [0.0, -0.3, 0.0, 0.0, 0.0, 0.0]])
    ref = torch.tensor([[-0.7, -0.9, -0.4, -1.0, -0.6, 0.0],
                        [-0.2, -1.3, -0.8, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]])
    turn_index = torch.tensor([[-1, 0, 0, 0, 1, -1], [-1, 0, 0, -1, -1, -1]])
    return logprobs, ref, mask, turn_index


def test_kl_in_reward_is_the_turn_sums_of_minus_coef_kl() -> None:
    logprobs, ref, mask, turn_index = kl_case()
    kl = KL_ESTIMATORS["k3"](logprobs, ref)
    penalty, loss_coef = KL_PLACEMENTS["reward"](kl, mask, turn_index, 3, coef=0.5)
    assert loss_coef == 0.0 and penalty is not None
    torch.testing.assert_close(penalty, turn_sums(-0.5 * kl, mask, turn_index, 3))
    assert penalty[0, 2] == 0 and penalty[1, 1:].abs().sum() == 0  # turns without tokens
    # the same per-turn penalty as the per-token KL reward of kl_token_penalty
    per_token = kl_token_penalty(logprobs, ref, mask, estimator="k3", coef=0.5)
    torch.testing.assert_close(penalty, turn_sums(per_token, mask, turn_index, 3))


def test_kl_in_loss_gives_no_reward_penalty_and_the_coefficient() -> None:
    logprobs, ref, mask, turn_index = kl_case()
    kl = KL_ESTIMATORS["k3"](logprobs, ref)
    assert KL_PLACEMENTS["loss"](kl, mask, turn_index, 3, coef=0.5) == (None, 0.5)


# ---------------------------------------------------------------------- the value shift
def test_state_values_shift_the_critic_by_one_position() -> None:
    values = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    # V_t = values[t − 1] (the state token t was sampled in), values[0] at t = 0
    assert state_values(values).tolist() == [[1.0, 1.0, 2.0, 3.0], [5.0, 5.0, 6.0, 7.0]]
    assert state_values(values[:, :1]).tolist() == [[1.0], [5.0]]


# ---------------------------------------------------------------------- stages
def tokens_and_scores():
    """Three laid-out episodes (two groups; the last one truncated) and their scores."""
    episodes = [traj(3, [3, 1], [0.0, 1.0], group=0), traj(2, [1], [0.5], group=0),
                traj(2, [2, 2], [0.0, 0.0], group=1, terminated=False)]
    tokens = layout(episodes, PAD)
    scores = [EpisodeScore(total=1.0, terms={"t": 1.0}), EpisodeScore(total=0.0),
              EpisodeScore(error="env raised")]
    return episodes, tokens, scores


def test_score_shapes_the_laid_out_batch() -> None:
    _, tokens, scores = tokens_and_scores()
    kl = torch.tensor([[-0.1, -0.1, 0.0], [-0.2, 0.0, 0.0], [0.0, -0.3, 0.0]])
    shaping = Shaping(env_weight=2.0, score_failures=True, error_reward=-1.0, max_len=4,
                      overlong_cache=2)
    scored = score(tokens, scores, shaping, kl_penalty=kl)
    assert scored.tokens is tokens
    lengths = turn_lengths(tokens.loss_mask, tokens.turn_index, 3)
    assert lengths.tolist() == [[3.0, 1.0, 0.0], [1.0, 0.0, 0.0], [2.0, 2.0, 0.0]]
    # L = 4, c = 2: a 3-token turn costs (2 − 3)/2 = −0.5
    expected = torch.tensor([[0.0 - 0.5, 2.0 + 1.0, 0.0],   # env 2·[0, 1], term 1 on turn 1
                             [1.0, 0.0, 0.0],               # env 2·0.5
                             [0.0, -1.0, 0.0]]) + kl        # failed: error_reward
    torch.testing.assert_close(scored.turn_rewards, expected)
    assert scored.metrics["reward/overlong_penalty"] == pytest.approx(-0.5 / 3)
    assert scored.metrics["reward/kl_penalty"] == pytest.approx(-0.7 / 3)
    # the batch's env rewards stay the env's
    assert tokens.env_rewards.tolist() == [[0.0, 1.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]]


def test_kl_step_places_the_kl_and_adapts_the_coefficient() -> None:
    _, tokens, _ = tokens_and_scores()
    generator = torch.Generator().manual_seed(0)
    ref = tokens.logprobs - 0.3 * torch.rand(tokens.logprobs.shape, generator=generator)
    passes = Passes(ref_logprobs=ref)
    kl = KL_ESTIMATORS["k3"](tokens.logprobs, ref)
    measured = float(masked_mean(kl, tokens.loss_mask))
    grpo = PRESETS["grpo"]
    in_reward = kl_step(tokens, passes, dataclasses.replace(grpo, kl_mode="reward"), 0.1, None)
    assert in_reward.loss_coef == 0.0 and in_reward.next_coef == 0.1
    assert in_reward.reward_penalty is not None
    torch.testing.assert_close(in_reward.reward_penalty,
                               turn_sums(-0.1 * kl, tokens.loss_mask, tokens.turn_index, 3))
    assert in_reward.metrics == {"rollout/kl_ref": pytest.approx(measured),
                                 "loss/kl_coef": 0.1}
    in_loss = kl_step(tokens, passes, grpo, 0.1, None)
    assert in_loss.reward_penalty is None and in_loss.loss_coef == 0.1
    # adapted towards kl_target: the loss uses the new coefficient, the metric the old one
    controller = AdaptiveKLController(coef=0.1, target=measured / 2, horizon=10.0)
    adapted = kl_step(tokens, passes, grpo, 0.1, controller)
    new = 0.1 * (1 + 0.2 * tokens.size / 10.0)  # KL twice the target: error clipped at 0.2
    assert adapted.next_coef == pytest.approx(new) and adapted.loss_coef == pytest.approx(new)
    assert adapted.metrics["loss/kl_coef"] == 0.1
    controller = AdaptiveKLController(coef=0.1, target=measured / 2, horizon=10.0)
    adapted = kl_step(tokens, passes, dataclasses.replace(grpo, kl_mode="reward"), 0.1,
                      controller)
    assert adapted.reward_penalty is not None and adapted.loss_coef == 0.0
    torch.testing.assert_close(adapted.reward_penalty, in_reward.reward_penalty)
    # no reference: no KL at all, the coefficient unchanged
    assert kl_step(tokens, Passes(), grpo, 0.1, None) == KLStep(None, 0.0, 0.1, {})


def test_scoring_passes_run_only_what_the_algorithm_reads() -> None:
    _, tokens, _ = tokens_and_scores()
    calls: list[str] = []

    def pass_of(name: str):
        def run(batch):
            assert batch is tokens
            calls.append(name)
            return torch.full(batch.logprobs.shape, float(len(calls)))
        return run

    learner = SimpleNamespace(critic=None, reference=None, critic_values=pass_of("critic"),
                              reference_logprobs=pass_of("reference"),
                              policy_logprobs=pass_of("policy"))
    assert scoring_passes(learner, tokens, PRESETS["grpo"]) == Passes()  # type: ignore[arg-type]
    assert calls == []
    learner.critic, learner.reference = object(), object()
    passes = scoring_passes(learner, tokens,  # type: ignore[arg-type]
                            dataclasses.replace(PRESETS["ppo"], is_correction="tis"))
    assert sorted(calls) == ["critic", "policy", "reference"]
    assert passes.values is not None and passes.ref_logprobs is not None
    assert passes.learner_logprobs is not None


def test_advantage_inputs_read_the_scored_rewards_and_the_critic() -> None:
    _, tokens, scores = tokens_and_scores()
    scored = score(tokens, scores, Shaping(score_failures=True))
    values = torch.arange(tokens.input_ids.numel(), dtype=torch.float).view_as(tokens.logprobs)
    algo = dataclasses.replace(PRESETS["ppo"], bootstrap_truncated=True)
    inputs = advantage_inputs(scored, Passes(values=values), algo)
    assert inputs.turn_rewards is scored.turn_rewards
    assert inputs.values is values and inputs.attention_mask is tokens.attention_mask
    torch.testing.assert_close(inputs.turn_values, turn_start_values(values, tokens))
    assert inputs.terminated.tolist() == [True, True, False]
    assert inputs.state_keys is None


def test_train_batch_applies_the_correction_the_loss_filters_and_the_value_shift() -> None:
    _, tokens, scores = tokens_and_scores()
    scored = score(tokens, scores, Shaping(score_failures=True))
    values = torch.rand(tokens.logprobs.shape, generator=torch.Generator().manual_seed(1))
    ref = tokens.logprobs - 0.1
    advantages = AdvantageOutputs(torch.ones_like(tokens.loss_mask) * tokens.loss_mask,
                                  2 * tokens.loss_mask, {})
    kl = KLStep(None, 0.25, 0.25, {})
    outcomes = torch.tensor([1.0, 0.5, -1.0])
    algo = dataclasses.replace(PRESETS["ppo"], filters=("dynamic_sampling", "truncated"))
    batch, metrics = train_batch(scored, Passes(values=values, ref_logprobs=ref), advantages,
                                 kl, algo, outcomes)
    assert batch.old_logprobs is tokens.logprobs and batch.is_weights is None  # no correction
    assert batch.advantages is advantages.advantages and batch.returns is advantages.returns
    assert batch.ref_logprobs is ref and batch.kl_coef == 0.25
    torch.testing.assert_close(batch.old_values, state_values(values))
    # the truncated episode's loss is masked; dynamic sampling acted at collection already
    assert torch.equal(batch.loss_mask[:2], tokens.loss_mask[:2])
    assert batch.loss_mask[2].sum() == 0 and tokens.loss_mask[2].sum() > 0
    assert metrics == {"rollout/masked_truncated": pytest.approx(1 / 3)}
    keep, _ = loss_filter_mask(tokens, outcomes, algo)
    assert keep.tolist() == [1.0, 1.0, 0.0]
    # with a behaviour correction the ratio is taken against the learner's own log-probs
    learner = tokens.logprobs - 0.5 * tokens.loss_mask
    corrected, metrics = train_batch(
        scored, Passes(learner_logprobs=learner), advantages, KLStep(None, 0.0, 0.0, {}),
        dataclasses.replace(PRESETS["grpo"], is_correction="tis"), outcomes)
    assert corrected.old_logprobs is learner and corrected.old_values is None
    assert corrected.is_weights is not None
    sampled = tokens.loss_mask.bool()
    torch.testing.assert_close(corrected.is_weights[sampled],
                               torch.full((int(sampled.sum()),), math.exp(-0.5)))
    assert corrected.is_weights[~sampled].abs().sum() == 0
    assert "loss/is_weight_mean" in metrics and corrected.kl_coef == 0.0


def test_train_batch_carries_the_critic_prefix() -> None:
    episodes, _, scores = tokens_and_scores()
    tokens = layout(episodes, PAD, critic_prefixes=[[4], [4, 5], []])
    scored = score(tokens, scores, Shaping())
    advantages = AdvantageOutputs(tokens.loss_mask, tokens.loss_mask, {})
    batch, _ = train_batch(scored, Passes(), advantages, KLStep(None, 0.0, 0.0, {}),
                           PRESETS["grpo"], torch.zeros(3))
    assert batch.critic_prefix_ids is tokens.critic_prefix_ids
    assert batch.critic_prefix_mask.tolist() == [[0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]


# ---------------------------------------------------------------------- the collector
def episode(group: int, reward: float, *, error: str | None = None,
            sampled: bool = True) -> Trajectory:
    return Trajectory(env_id="x-v0", seed=group, group_id=group, messages=[],
                      token_ids=[1, 2] if sampled else [], loss_mask=[0, 1] if sampled else [],
                      logprobs=[0.0, -1.0] if sampled else [],
                      turn_index=[-1, 0] if sampled else [],
                      turn_rewards=[reward] if sampled else [], terminated=error is None,
                      truncated=error is not None, error=error)


def collector(rewards_by_group: dict[int, list[float]], **kwargs) -> Collector:
    """Groups of two episodes whose env rewards ``rewards_by_group`` gives."""
    def play(first: int, n: int) -> list[Trajectory]:
        return [episode(g, r) for g in range(first, first + n) for r in rewards_by_group[g]]

    knobs = {"rewards": None, "shaping": Shaping(), "filters": ("dynamic_sampling",),
             "n_groups": 2, "group_size": 2, "max_tries": 3, "max_failed_batches": 2,
             "env_id": "x-v0", **kwargs}
    return Collector(play, **knobs)


def test_dynamic_sampling_replaces_groups_without_reward_spread() -> None:
    groups = {0: [1.0, 1.0], 1: [1.0, 0.0], 2: [0.0, 1.0], 3: [0.5, 0.0]}
    c = collector(groups)
    collected = c.collect()
    # group 0 has no spread: dropped; groups 1, 2 (the first two kept) make the batch
    assert [t.group_id for t in collected.trajectories] == [1, 1, 2, 2]
    assert collected.outcomes.tolist() == [1.0, 0.0, 0.0, 1.0]
    assert collected.metrics["rollout/dropped_groups"] == 1.0
    assert collected.metrics["rollout/sampling_tries"] == 2.0
    assert c.cursor == 4
    # without the filter, the first collection is the batch
    plain = collector(groups, filters=()).collect()
    assert [t.group_id for t in plain.trajectories] == [0, 0, 1, 1]
    assert "rollout/dropped_groups" not in plain.metrics
    assert "rollout/sampled_episodes" not in plain.metrics


def test_dynamic_sampling_reports_what_it_paid_for() -> None:
    """Two tries of two groups of two: 8 episodes played, the 4 of groups 1 and 2 trained
    on. ``rollout/success`` is the kept episodes', ``rollout/sampled_success`` that of all 8
    played; they part as soon as the dropped groups were not half solved."""
    groups = {0: [1.0, 1.0], 1: [1.0, 0.0], 2: [0.0, 1.0], 3: [0.0, 0.0]}
    c = collector(groups)
    c.play = lambda first, n: [dataclasses.replace(episode(g, r), success=r == 1.0)
                               for g in range(first, first + n) for r in groups[g]]
    collected = c.collect()
    assert [t.group_id for t in collected.trajectories] == [1, 1, 2, 2]
    assert collected.metrics["rollout/episodes"] == 4.0
    assert collected.metrics["rollout/success"] == 0.5  # kept: 2 of 4
    assert collected.metrics["rollout/sampled_episodes"] == 8.0
    assert collected.metrics["rollout/sampled_success"] == 0.5  # played: 4 of 8
    # all-failed groups dropped: the kept batch looks better than what was played
    groups.update({0: [0.0, 0.0], 3: [0.0, 0.0]})
    c = collector(groups)
    c.play = lambda first, n: [dataclasses.replace(episode(g, r), success=r == 1.0)
                               for g in range(first, first + n) for r in groups[g]]
    collected = c.collect()
    assert collected.metrics["rollout/success"] == 0.5
    assert collected.metrics["rollout/sampled_success"] == 0.25  # 2 of 8


def test_async_dynamic_sampling_reports_what_it_paid_for() -> None:
    """train.mode=async: the source offers groups one by one until two are kept; the
    dropped ones (0 and 2, all failed) count in what was played."""
    groups = {0: [0.0, 0.0], 1: [1.0, 0.0], 2: [0.0, 0.0], 3: [0.0, 1.0]}

    class Source:
        next_index = 0

        def next_batch(self, version, accept):
            kept = []
            for g, rewards in groups.items():
                kept += accept([dataclasses.replace(episode(g, r), success=r == 1.0)
                                for r in rewards])
                self.next_index = g + 1
                if len({t.group_id for t, _, _ in kept}) == 2:
                    break
            return kept, {}

    c = collector(groups, source=Source())
    collected = c.collect(version=0)
    assert [t.group_id for t in collected.trajectories] == [1, 1, 3, 3]
    assert c.cursor == 4 and collected.metrics["rollout/dropped_groups"] == 2.0
    assert collected.metrics["rollout/sampled_episodes"] == 8.0
    assert collected.metrics["rollout/sampled_success"] == 0.25  # 2 of 8 played
    assert collected.metrics["rollout/success"] == 0.5  # 2 of 4 kept


def test_when_no_group_has_spread_the_last_collection_is_kept() -> None:
    c = collector({g: [1.0, 1.0] for g in range(6)}, max_tries=3)
    collected = c.collect()
    assert [t.group_id for t in collected.trajectories] == [4, 4, 5, 5]
    assert collected.metrics["rollout/dropped_groups"] == 6.0
    assert collected.metrics["rollout/sampling_tries"] == 3.0


def test_filters_compare_the_scored_outcomes() -> None:
    class Bonus:  # the first episode of each group gets +1: every group gains spread
        def score(self, trajectory):
            return (1.0 if trajectory.seed % 2 == 0 else 0.0), {}

    c = collector({0: [1.0, 1.0], 1: [1.0, 1.0]}, rewards=Bonus())
    c.play = lambda first, n: [dataclasses.replace(episode(g, 1.0), seed=2 * g + i)
                               for g in range(first, first + n) for i in range(2)]
    collected = c.collect()
    assert collected.outcomes.tolist() == [2.0, 1.0, 2.0, 1.0]
    assert collected.metrics["rollout/sampling_tries"] == 1.0


def test_batches_where_every_episode_failed_are_skipped_then_raise() -> None:
    def failing(first: int, n: int) -> list[Trajectory]:
        return [episode(g, 0.0, error=f"boom {g}") for g in range(first, first + n)]

    c = Collector(failing, rewards=None, shaping=Shaping(score_failures=True),
                  filters=(), n_groups=2, group_size=1, max_tries=1, max_failed_batches=2,
                  env_id="x-v0")
    skipped = c.collect()
    assert not skipped and skipped.trajectories == [] and skipped.outcomes.numel() == 0
    assert skipped.metrics["loss/skipped_steps"] == 1.0
    assert skipped.metrics["rollout/env_error_rate"] == 1.0
    with pytest.raises(RolloutError, match=r"last 2 batches failed.*the last error: boom 3"):
        c.collect()
