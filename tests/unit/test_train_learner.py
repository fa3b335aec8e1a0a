"""Learner: micro-batch invariance of the accumulated gradient, the KL term, the critic."""

from __future__ import annotations

import copy
import dataclasses
import functools

import pytest
import torch

from turnrl import envs
from turnrl.algos.presets import PRESETS
from turnrl.config import CriticConfig, TrainConfig
from turnrl.models.policy import ValueModel
from turnrl.rollout.engine import SamplingParams
from turnrl.rollout.hf import HFEngine
from turnrl.rollout.runner import Runner
from turnrl.train.layout import layout
from turnrl.train.learner import Learner
from turnrl.types import TrainBatch

NO_CLIP = 1e9  # gradient clipping off, so captured gradients are the raw accumulated ones


def train_cfg(**overrides) -> TrainConfig:
    """``train.*`` for the learner: padded passes (no shared prefixes) unless asked, room for
    the batch sizes below, and ``micro_batch_size`` at most ``mini_batch_size``."""
    knobs = {"n_groups": 8, "group_size": 8, "share_prefix": False, **overrides}
    knobs.setdefault("micro_batch_size", min(16, knobs.get("mini_batch_size", 64)))
    return TrainConfig(**knobs)


@pytest.fixture(scope="module")
def trajectories(load_sft, tokenizer):
    """8 short FrozenLake episodes (3x3 maps, ≤ 4 turns) of uneven lengths."""
    model = load_sft().eval()
    engine = HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, seed=0)
    runner = Runner(engine, tokenizer, SamplingParams(max_new_tokens=6, temperature=1.0))
    make_env = functools.partial(envs.make, "frozenlake-v0", min_size=3, max_size=3,
                                 max_turns=4)
    trajs = runner.collect(make_env, [0, 1, 2, 3], 2)
    assert len({t.num_sampled_tokens for t in trajs}) > 2  # uneven: normalisers matter
    return trajs


def make_batch(trajectories, tokenizer, *, seed: int = 0) -> TrainBatch:
    tokens = layout(trajectories, tokenizer.pad_token_id)
    generator = torch.Generator().manual_seed(seed)
    mask = tokens.loss_mask
    adv = torch.randn(mask.shape, generator=generator) * mask
    ret = (torch.rand(tokens.size, 1, generator=generator) * 2 - 1).expand_as(mask) * mask
    # behaviour log-probs a little off the current policy: ratios ≠ 1, some tokens clipped
    old = tokens.logprobs + 0.3 * torch.randn(mask.shape, generator=generator) * mask
    return TrainBatch(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask,
                      loss_mask=mask, old_logprobs=old, advantages=adv, returns=ret)


def captured_policy_gradient(policy, batch: TrainBatch, algo, *, micro: int,
                             reference=None, tokens: int | None = None, pack: bool = False,
                             share_prefix: bool = False
                             ) -> tuple[dict[str, torch.Tensor], dict]:
    """The gradient one ``_policy_step`` over the whole batch hands to the optimizer."""
    train = train_cfg(lr=1e-3, max_grad_norm=NO_CLIP, mini_batch_size=batch.size,
                      micro_batch_size=micro, micro_batch_tokens=tokens, packing=pack,
                      share_prefix=share_prefix)
    learner = Learner(policy, algo, train, reference=reference)
    grads: dict[str, torch.Tensor] = {}

    def capture() -> None:
        grads.update({n: p.grad.clone() for n, p in policy.named_parameters()
                      if p.grad is not None})

    learner.optimizer.step = capture  # type: ignore[method-assign]
    metrics = learner._policy_step(batch, torch.arange(batch.size))
    return grads, metrics


@pytest.mark.parametrize("loss_agg", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum"])
def test_accumulated_gradient_does_not_depend_on_micro_batch_size(load_sft, tokenizer,
                                                                  trajectories,
                                                                  loss_agg: str) -> None:
    batch = make_batch(trajectories, tokenizer)
    algo = dataclasses.replace(PRESETS["grpo"], loss_agg=loss_agg, entropy_coef=0.01)
    policy = load_sft()
    full, full_metrics = captured_policy_gradient(policy, batch, algo, micro=8)
    split, split_metrics = captured_policy_gradient(policy, batch, algo, micro=2)
    # a token budget (about two rows of the longest length) cuts other, uneven passes
    budget = int(batch.attention_mask.sum(-1).max()) * 2
    by_tokens, _ = captured_policy_gradient(policy, batch, algo, micro=8, tokens=budget)
    # packed passes (sequences end to end in shared rows) give the same gradient too
    packed, packed_metrics = captured_policy_gradient(policy, batch, algo, micro=8, pack=True)
    for name in full:
        torch.testing.assert_close(by_tokens[name], full[name], rtol=1e-4, atol=1e-6, msg=name)
        torch.testing.assert_close(packed[name], full[name], rtol=1e-4, atol=1e-6, msg=name)
    assert packed_metrics["loss/entropy"] == pytest.approx(full_metrics["loss/entropy"], rel=1e-5)
    assert full.keys() == split.keys() and len(full) > 0
    assert any(g.abs().max() > 0 for g in full.values())
    for name in full:
        torch.testing.assert_close(split[name], full[name], rtol=1e-4, atol=1e-6, msg=name)
    for key in ("loss/policy", "loss/entropy", "loss/total"):
        assert split_metrics[key] == pytest.approx(full_metrics[key], rel=1e-5, abs=1e-7)
    assert split_metrics["loss/clipfrac"] > 0  # the clipped branch took part


def test_micro_batch_invariance_holds_with_a_kl_penalty(load_sft, tokenizer,
                                                        trajectories) -> None:
    batch = make_batch(trajectories, tokenizer, seed=1)
    algo = dataclasses.replace(PRESETS["grpo"], loss_agg="token_mean", kl_coef=0.5)
    reference = load_sft().eval().requires_grad_(False)
    with torch.no_grad():  # a reference that differs from the policy
        for p in reference.parameters():
            p.add_(0.05 * torch.randn_like(p))
    policy = load_sft()
    probe = Learner(policy, algo, train_cfg(micro_batch_size=3), reference=reference)
    tokens = layout(trajectories, tokenizer.pad_token_id)
    # the KL loss weight travels with the batch
    batch = dataclasses.replace(batch, ref_logprobs=probe.reference_logprobs(tokens),
                                kl_coef=algo.kl_coef)
    full, full_metrics = captured_policy_gradient(policy, batch, algo, micro=8,
                                                  reference=reference)
    split, split_metrics = captured_policy_gradient(policy, batch, algo, micro=2,
                                                    reference=reference)
    assert full_metrics["loss/kl"] > 1e-4
    assert split_metrics["loss/kl"] == pytest.approx(full_metrics["loss/kl"], rel=1e-5)
    for name in full:
        torch.testing.assert_close(split[name], full[name], rtol=1e-4, atol=1e-6, msg=name)


def test_reference_logprobs_are_the_same_in_any_chunking(load_sft, tokenizer,
                                                         trajectories) -> None:
    batch = layout(trajectories, tokenizer.pad_token_id)
    reference = load_sft().eval()
    algo = dataclasses.replace(PRESETS["grpo"], kl_coef=0.1)
    a = Learner(load_sft(), algo, train_cfg(micro_batch_size=3),
                reference=reference).reference_logprobs(batch)
    b = Learner(load_sft(), algo, train_cfg(micro_batch_size=8),
                reference=reference).reference_logprobs(batch)
    real = batch.attention_mask.bool()  # padding positions are never read (loss_mask = 0)
    torch.testing.assert_close(a[real], b[real], rtol=0, atol=1e-5)
    # and they reproduce the behaviour log-probs of the (same) sampling policy
    mask = batch.loss_mask.bool()
    assert (a[mask] - batch.logprobs[mask]).abs().max() < 1e-4


def test_kl_term_is_zero_when_the_reference_is_the_policy(load_sft, tokenizer,
                                                          trajectories) -> None:
    batch = make_batch(trajectories, tokenizer)
    policy = load_sft()
    reference = copy.deepcopy(policy).eval().requires_grad_(False)
    with_kl = dataclasses.replace(PRESETS["grpo"], kl_coef=1.0, kl_estimator="k3")
    ref_logprobs = Learner(policy, with_kl, train_cfg(), reference=reference
                           ).reference_logprobs(layout(trajectories, tokenizer.pad_token_id))
    batch = dataclasses.replace(batch, ref_logprobs=ref_logprobs, kl_coef=1.0)
    grads_kl, metrics = captured_policy_gradient(policy, batch, with_kl, micro=4,
                                                 reference=reference)
    assert metrics["loss/kl"] == pytest.approx(0.0, abs=1e-6)
    assert metrics["loss/total"] == pytest.approx(metrics["loss/policy"], abs=1e-6)
    # k3's gradient vanishes at π = π_ref: the update is the plain policy-gradient one
    plain = dataclasses.replace(batch, kl_coef=0.0)
    grads_plain, plain_metrics = captured_policy_gradient(policy, plain, PRESETS["grpo"],
                                                          micro=4)
    assert "loss/kl" not in plain_metrics  # kl_coef 0: no KL term
    for name in grads_plain:
        torch.testing.assert_close(grads_kl[name], grads_plain[name], rtol=1e-4, atol=1e-6)


def test_update_changes_parameters_and_reports_metrics(load_sft, tokenizer,
                                                       trajectories) -> None:
    batch = make_batch(trajectories, tokenizer)
    policy = load_sft()
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    train = train_cfg(lr=1e-3, epochs=2, mini_batch_size=4, micro_batch_size=2)
    metrics = Learner(policy, PRESETS["grpo"], train).update(batch)
    assert metrics["loss/optimizer_steps"] == 4.0  # 2 epochs x (8 / 4) mini-batches
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
    assert all(k.startswith("loss/") for k in metrics)
    changed = [k for k, v in policy.state_dict().items() if not torch.equal(v, before[k])]
    assert changed


def test_entropy_is_averaged_over_mini_batches_that_sampled_tokens(load_sft, tokenizer,
                                                                   trajectories) -> None:
    """A mini-batch without a sampled token (its episodes ran out of context) has no entropy:
    it must not count as 0 (that read as an entropy collapse)."""
    full = make_batch(trajectories, tokenizer)
    only = torch.zeros_like(full.loss_mask)
    only[3] = full.loss_mask[3]
    batch = dataclasses.replace(full, loss_mask=only)
    train = train_cfg(lr=1e-12, mini_batch_size=1, micro_batch_size=1)
    mixed = Learner(load_sft(), PRESETS["grpo"], train).update(batch)
    alone = Learner(load_sft(), PRESETS["grpo"], train).update(batch.select(torch.tensor([3])))
    assert mixed["loss/optimizer_steps"] == 8.0
    assert mixed["loss/entropy"] > 0.1
    assert mixed["loss/entropy"] == pytest.approx(alone["loss/entropy"], rel=1e-5)
    empty = dataclasses.replace(full, loss_mask=torch.zeros_like(full.loss_mask))
    assert "loss/entropy" not in Learner(load_sft(), PRESETS["grpo"], train).update(empty)


def test_update_without_advantages_is_an_error(load_tiny, tokenizer, trajectories) -> None:
    tokens = layout(trajectories, tokenizer.pad_token_id)
    # the learner's batch cannot be built without advantages (and returns)
    with pytest.raises(TypeError, match="advantages"):
        TrainBatch(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask,
                   loss_mask=tokens.loss_mask, old_logprobs=tokens.logprobs)  # type: ignore[call-arg]
    # and a laid-out token batch (no advantages yet) is not something update can train on
    with pytest.raises(AttributeError, match="old_logprobs"):
        Learner(load_tiny(), PRESETS["grpo"], train_cfg()).update(tokens)  # type: ignore[arg-type]


def test_critic_steps_lower_the_value_loss_and_leave_the_policy_alone(load_sft, tokenizer,
                                                                      trajectories) -> None:
    batch = make_batch(trajectories, tokenizer)
    batch = dataclasses.replace(  # learnable targets
        batch, returns=batch.loss_mask * torch.tensor([1.0, 0.5] * 4)[:, None])
    policy = load_sft()
    policy_before = {k: v.clone() for k, v in policy.state_dict().items()}
    critic = ValueModel.from_policy(policy)
    with torch.no_grad():  # a fresh critic predicts 0 everywhere (zero-initialised head)
        assert torch.all(critic(batch.input_ids, batch.attention_mask) == 0)
    learner = Learner(policy, PRESETS["ppo"], train_cfg(mini_batch_size=8, micro_batch_size=4),
                      critic_cfg=CriticConfig(lr=1e-2), critic=critic)
    rows = torch.arange(batch.size)
    losses = [learner._critic_step(batch, rows)["loss/value"] for _ in range(10)]
    # value loss ½ (V − R)², token mean: with V ≡ 0 it is ½ Σ R² / Σ mask
    assert losses[0] == pytest.approx(
        float(0.5 * (batch.returns**2).sum() / batch.loss_mask.sum()), rel=1e-5)
    assert max(losses[-3:]) < 0.5 * losses[0]
    # the critic has its own copy of the body: the policy did not move
    assert all(torch.equal(v, policy_before[k]) for k, v in policy.state_dict().items())
    values = learner.critic_values(layout(trajectories, tokenizer.pad_token_id))
    assert values.shape == batch.loss_mask.shape and torch.isfinite(values).all()


def test_shared_critic_is_a_head_on_the_policy_trained_by_a_joint_loss(load_sft, tokenizer,
                                                                      trajectories) -> None:
    batch = make_batch(trajectories, tokenizer)
    batch = dataclasses.replace(
        batch, returns=batch.loss_mask * torch.tensor([1.0, 0.5] * 4)[:, None])
    policy = load_sft()
    critic = ValueModel.from_policy(policy, shared=True)
    # the body is the policy's own: only the head is the critic's
    assert [n for n, _ in critic.named_parameters()] == ["head.weight", "head.bias"]
    assert critic.body is policy.model
    learner = Learner(policy, PRESETS["ppo"], train_cfg(mini_batch_size=8, micro_batch_size=4),
                      critic_cfg=CriticConfig(lr=1e-2), critic=critic)
    assert learner.critic_optimizer is None  # one optimizer: policy + head
    head_ids = {id(p) for p in critic.head.parameters()}
    assert head_ids <= {id(p) for g in learner.optimizer.param_groups for p in g["params"]}
    body_before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    head_before = critic.head.weight.detach().clone()
    metrics = learner.update(batch)
    # V ≡ 0 before the step: value loss ½ Σ R² / Σ mask, reported from the joint loss
    assert metrics["loss/value"] == pytest.approx(
        float(0.5 * (batch.returns**2).sum() / batch.loss_mask.sum()), rel=1e-5)
    assert not torch.equal(critic.head.weight, head_before)
    assert any(not torch.equal(v, body_before[k]) for k, v in policy.model.state_dict().items())
    # the values the joint loss read are the critic's forward values (on real tokens)
    with torch.no_grad():
        out = policy(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                     output_hidden_states=True)
        real = batch.attention_mask.bool()
        torch.testing.assert_close(critic.values_from_hidden(out.hidden_states[-1])[real],
                                   critic(batch.input_ids, batch.attention_mask)[real])


@pytest.mark.parametrize("shared", [False, True])
def test_critic_warmup_leaves_the_policy_alone(load_sft, tokenizer, trajectories,
                                               shared: bool) -> None:
    batch = make_batch(trajectories, tokenizer)
    batch = dataclasses.replace(
        batch, returns=batch.loss_mask * torch.tensor([1.0, 0.5] * 4)[:, None])
    policy = load_sft()
    policy_before = {k: v.clone() for k, v in policy.state_dict().items()}
    critic = ValueModel.from_policy(policy, shared=shared)
    learner = Learner(policy, PRESETS["ppo"], train_cfg(mini_batch_size=4, micro_batch_size=4),
                      critic_cfg=CriticConfig(lr=1e-2), critic=critic)
    losses = [learner.update(batch, train_policy=False)["loss/value"] for _ in range(8)]
    assert losses[-1] < losses[0]
    assert all(torch.equal(v, policy_before[k]) for k, v in policy.state_dict().items())
    with pytest.raises(ValueError, match="needs a critic"):
        Learner(policy, PRESETS["grpo"], train_cfg()).update(batch, train_policy=False)


def test_privileged_prefix_changes_the_values_but_not_their_alignment(load_sft, tokenizer,
                                                                     trajectories) -> None:
    policy = load_sft()
    critic = ValueModel.from_policy(policy)
    torch.nn.init.normal_(critic.head.weight, generator=torch.Generator().manual_seed(0))
    prefixes = [[5, 6, 7], [8]] * 4
    batch = layout(trajectories, tokenizer.pad_token_id, critic_prefixes=prefixes)
    # left-padded to the longest prefix
    assert batch.critic_prefix_ids.tolist()[1] == [tokenizer.pad_token_id] * 2 + [8]
    assert batch.critic_prefix_mask.tolist()[:2] == [[1.0, 1.0, 1.0], [0.0, 0.0, 1.0]]
    learner = Learner(policy, PRESETS["ppo"], train_cfg(micro_batch_size=3), critic=critic)
    with_prefix = learner.critic_values(batch)
    plain = critic(batch.input_ids, batch.attention_mask).detach()
    real = batch.attention_mask.bool()
    assert with_prefix.shape == plain.shape
    assert not torch.allclose(with_prefix[real], plain[real])
    # row 1 alone with its own unpadded prefix: the same values (padding never shifts them)
    alone = dataclasses.replace(batch.select(torch.tensor([1])),
                                critic_prefix_ids=torch.tensor([[8]]),
                                critic_prefix_mask=torch.ones(1, 1))
    width = alone.input_ids.shape[1]
    torch.testing.assert_close(learner.critic_values(alone)[0], with_prefix[1, :width],
                               atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="3 critic prefixes for a batch of 8"):
        layout(trajectories, tokenizer.pad_token_id, critic_prefixes=prefixes[:3])


def snapshot(module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in module.state_dict().items()}


def test_a_nan_in_the_loss_skips_the_update_and_keeps_the_weights(load_sft, tokenizer,
                                                                  trajectories, caplog) -> None:
    """NaN injection: one poisoned advantage makes the loss and gradient non-finite; the
    optimizer step is skipped (weights and AdamW state unchanged), counted and logged, and a
    clean batch afterwards updates normally."""
    batch = make_batch(trajectories, tokenizer)
    policy = load_sft()
    learner = Learner(policy, PRESETS["grpo"], train_cfg(mini_batch_size=4, micro_batch_size=4))
    clean = learner.update(batch)  # two optimizer steps of a healthy batch
    assert clean.get("loss/skipped_steps", 0.0) == 0.0
    before, state_before = snapshot(policy), copy.deepcopy(learner.optimizer.state_dict())
    poisoned = make_batch(trajectories, tokenizer)
    sampled = poisoned.loss_mask.nonzero()[0]
    advantages = poisoned.advantages.clone()
    advantages[sampled[0], sampled[1]] = float("nan")  # lands in one of the two mini-batches
    poisoned = dataclasses.replace(poisoned, advantages=advantages)
    metrics = learner.update(poisoned)
    assert metrics["loss/skipped_steps"] == 1.0 and metrics["loss/optimizer_steps"] == 2.0
    assert "policy update skipped" in caplog.text
    # the poisoned mini-batch moved nothing; the other one stepped as usual
    steps = [s["step"] for s in learner.optimizer.state_dict()["state"].values()]
    before_steps = [s["step"] for s in state_before["state"].values()]
    assert all(float(a) == float(b) + 1 for a, b in zip(steps, before_steps, strict=True))
    assert all(torch.isfinite(v).all() for v in policy.state_dict().values())
    assert any(not torch.equal(v, before[k]) for k, v in policy.state_dict().items())
    # one mini-batch holding the poisoned row: nothing moves at all
    learner.train = learner.train.model_copy(update={"mini_batch_size": 8})
    before, state_before = snapshot(policy), copy.deepcopy(learner.optimizer.state_dict())
    metrics = learner.update(poisoned)
    assert metrics["loss/skipped_steps"] == 1.0 and metrics["loss/optimizer_steps"] == 1.0
    assert all(torch.equal(v, before[k]) for k, v in policy.state_dict().items())
    after_state = learner.optimizer.state_dict()["state"]
    for key, value in state_before["state"].items():
        assert all(torch.equal(value[n], after_state[key][n]) for n in value)


def test_a_batch_without_signal_moves_nothing_even_with_adam_momentum(load_sft, tokenizer,
                                                                     trajectories) -> None:
    """All advantages 0 (every group's rewards equal): the gradient is exactly 0, and the
    step is skipped. Stepping AdamW anyway would move the weights along the momentum of the
    previous steps (the drift that took a Sokoban run from 6.6% to 0%, with invalid replies
    rising for 10 steps of zero gradient)."""
    batch = make_batch(trajectories, tokenizer)
    policy = load_sft()
    learner = Learner(policy, PRESETS["grpo"], train_cfg(lr=1e-3, mini_batch_size=4,
                                                         micro_batch_size=4))
    learner.update(batch)  # real gradients: AdamW has momentum now
    before, state_before = snapshot(policy), copy.deepcopy(learner.optimizer.state_dict())
    silent = make_batch(trajectories, tokenizer)
    silent = dataclasses.replace(silent, advantages=torch.zeros_like(silent.advantages))
    metrics = learner.update(silent)
    assert metrics["loss/grad_norm"] == 0.0
    assert metrics["loss/no_signal_skipped_steps"] == 2.0  # both mini-batches
    assert metrics.get("loss/skipped_steps", 0.0) == 0.0  # not a failure
    assert all(torch.equal(v, before[k]) for k, v in policy.state_dict().items())
    after_state = learner.optimizer.state_dict()["state"]
    for key, value in state_before["state"].items():
        assert all(torch.equal(value[n], after_state[key][n]) for n in value)
    # what the skip prevents: a plain AdamW step on the zero gradient still moves the weights
    for p in policy.parameters():
        p.grad = torch.zeros_like(p)
    learner.optimizer.step()
    assert any(not torch.equal(v, before[k]) for k, v in policy.state_dict().items())


def test_an_infinite_return_skips_the_critic_step(load_sft, tokenizer, trajectories) -> None:
    batch = make_batch(trajectories, tokenizer)
    returns = batch.returns.clone()
    returns[batch.loss_mask.nonzero()[0].tolist()[0]] = float("inf")
    batch = dataclasses.replace(batch, returns=returns)
    policy = load_sft()
    critic = ValueModel.from_policy(policy)
    learner = Learner(policy, PRESETS["ppo"], train_cfg(mini_batch_size=8),
                      critic_cfg=CriticConfig(lr=1e-2), critic=critic)
    before = snapshot(critic)
    metrics = learner._critic_step(batch, torch.arange(batch.size))
    assert metrics["loss/value_skipped_steps"] == 1.0
    assert all(torch.equal(v, before[k]) for k, v in critic.state_dict().items())


def test_cutting_the_final_observation_changes_no_gradient(
        trajectories, load_sft, tokenizer) -> None:
    """The tokens after an episode's last action carry no loss and, by causality, cannot move
    the log-prob of a sampled token: the learner's gradient is the same without them."""
    tails = [dataclasses.replace(t, terminated=False, truncated=True) for t in trajectories]
    assert sum(t.loss_mask[-1] == 0 for t in tails) >= 4  # most ledgers end in an observation
    layouts = [layout(tails, tokenizer.pad_token_id, bootstrap_truncated=keep)
               for keep in (True, False)]
    assert layouts[1].attention_mask.sum() < layouts[0].attention_mask.sum()

    def by_position(t) -> TrainBatch:  # the same advantage and behaviour log-prob per position
        position = torch.arange(t.loss_mask.shape[1], dtype=torch.float)
        return TrainBatch(input_ids=t.input_ids, attention_mask=t.attention_mask,
                          loss_mask=t.loss_mask,
                          old_logprobs=t.logprobs + 0.2 * torch.sin(position) * t.loss_mask,
                          advantages=torch.cos(position)[None, :] * t.loss_mask,
                          returns=torch.zeros_like(t.loss_mask))

    full, cut = (by_position(t) for t in layouts)
    grads_full, _ = captured_policy_gradient(load_sft(), full, PRESETS["grpo"], micro=4)
    grads_cut, _ = captured_policy_gradient(load_sft(), cut, PRESETS["grpo"], micro=4)
    assert grads_full.keys() == grads_cut.keys()
    for name, grad in grads_full.items():
        torch.testing.assert_close(grads_cut[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_shared_prefix_passes_give_the_padded_gradient_and_metrics(load_sft, tokenizer,
                                                                   trajectories) -> None:
    """Groups of two episodes share their first observation: with ``share_prefix`` each pass
    encodes it once, and the learner's gradient and metrics stay those of padded passes."""
    batch = make_batch(trajectories, tokenizer)
    algo = dataclasses.replace(PRESETS["grpo"], entropy_coef=0.01)
    padded, padded_metrics = captured_policy_gradient(load_sft(), batch, algo, micro=4)
    shared, shared_metrics = captured_policy_gradient(load_sft(), batch, algo, micro=4,
                                                      share_prefix=True)
    for name, grad in padded.items():
        torch.testing.assert_close(shared[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    for key in ("loss/policy", "loss/entropy"):  # sums over passes (means per pass differ)
        assert shared_metrics[key] == pytest.approx(padded_metrics[key], rel=1e-4, abs=1e-7)
