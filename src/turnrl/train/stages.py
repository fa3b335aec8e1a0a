"""The stages of one RL step between the ledger and the learner, each a new value:

    TokenBatch ──learner.scoring_passes──► Passes (critic values, reference and learner
                                           log-probs: forward passes without gradient)
    Passes ──kl_step──► KLStep (the KL to the reference, placed in the reward or the loss)
    ScoredBatch + Passes ──advantage_inputs──► AdvantageInputs ──ADVANTAGES[...]──► outputs
    everything ──train_batch──► TrainBatch (behaviour correction, loss filters)

:func:`prepare` runs them all, from the episodes to the learner's batch (the RL loop, for its
model and for each separate policy of ``multi.policies``).

Algorithm choices are registry lookups (``KL_PLACEMENTS``, ``CORRECTIONS``, ``FILTERS``);
no stage branches on a name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from turnrl.algos import ADVANTAGES, KL_ESTIMATORS
from turnrl.algos.correction import AdaptiveKLController
from turnrl.algos.functional import masked_mean, state_values
from turnrl.algos.presets import AlgoPreset
from turnrl.algos.registry import (
    CORRECTIONS,
    FILTERS,
    KL_PLACEMENTS,
    needs_learner_logprobs,
    resamples,
)
from turnrl.train.layout import layout
from turnrl.train.learner import Learner
from turnrl.train.scoring import EpisodeScore, ScoredBatch, Shaping, score
from turnrl.types import AdvantageInputs, AdvantageOutputs, TokenBatch, TrainBatch, Trajectory

MISMATCH_EPISODES = 16  # the engine–learner mismatch is measured on this many episodes


@dataclass(frozen=True)
class Passes:
    """What the forward passes before the update give: the critic's outputs (B, T) (V
    after ``tokens[: t + 1]``), the frozen reference's log-probs and the learner's own
    log-probs of the sampled tokens (B, T), each None when the algorithm does not read it;
    and the engine–learner mismatch metrics (:func:`mismatch_metrics`)."""

    values: Tensor | None = None
    ref_logprobs: Tensor | None = None
    learner_logprobs: Tensor | None = None
    mismatch: dict[str, float] = field(default_factory=dict)


def scoring_passes(learner: Learner, tokens: TokenBatch, algo: AlgoPreset, *,
                   measure_mismatch: bool = False) -> Passes:
    """The no-gradient forward passes this step needs (critic, reference, behaviour). With
    ``measure_mismatch`` (an engine with weights of its own) the engine–learner mismatch is
    measured: on the learner's log-probs of the whole batch when the behaviour correction
    computes them anyway, else on ``MISMATCH_EPISODES`` episodes spread over the batch (a
    pass over all of them would cost a third of the update)."""
    learner_logprobs = (learner.policy_logprobs(tokens)
                        if needs_learner_logprobs(algo.is_correction) else None)
    if learner_logprobs is not None:
        mismatch = mismatch_metrics(tokens, learner_logprobs)
    elif measure_mismatch:
        rows = torch.linspace(0, tokens.size - 1, min(MISMATCH_EPISODES, tokens.size))
        sample = tokens.select(rows.long().unique())
        mismatch = mismatch_metrics(sample, learner.policy_logprobs(sample))
    else:
        mismatch = {}
    return Passes(
        values=learner.critic_values(tokens) if learner.critic is not None else None,
        ref_logprobs=(learner.reference_logprobs(tokens) if learner.reference is not None
                      else None),
        learner_logprobs=learner_logprobs, mismatch=mismatch)


def mismatch_metrics(tokens: TokenBatch, learner_logprobs: Tensor) -> dict[str, float]:
    """How far the engine's sampling log-probs are from the learner's recomputation of the
    same tokens: ``rollout/logprob_abs_diff`` (mean of ``|log π_engine − log π_learner|``
    over the sampled tokens) and ``rollout/logprob_abs_diff_max``; empty when nothing was
    sampled."""
    mask = tokens.loss_mask.bool()
    if not bool(mask.any()):
        return {}
    diff = (tokens.logprobs - learner_logprobs).abs()[mask]
    return {"rollout/logprob_abs_diff": float(diff.mean()),
            "rollout/logprob_abs_diff_max": float(diff.max())}


@dataclass(frozen=True)
class KLStep:
    """The KL to the reference this step: a per-turn reward penalty (B, K) or None, the
    loss coefficient, and the coefficient for the next step (adapted with ``kl_target``)."""

    reward_penalty: Tensor | None
    loss_coef: float
    next_coef: float
    metrics: dict[str, float]


def kl_step(tokens: TokenBatch, passes: Passes, algo: AlgoPreset, coef: float,
            controller: AdaptiveKLController | None) -> KLStep:
    """Measure KL(behaviour ‖ reference) on the sampled tokens, place ``coef · KL`` where
    ``algo.kl_mode`` says (``KL_PLACEMENTS``), and adapt the coefficient towards
    ``algo.kl_target``. The loss term uses the adapted coefficient, the reward penalty the
    one it was measured with."""
    if passes.ref_logprobs is None:
        return KLStep(None, 0.0, coef, {})
    kl = KL_ESTIMATORS[algo.kl_estimator](tokens.logprobs, passes.ref_logprobs)
    measured = float(masked_mean(kl, tokens.loss_mask))
    metrics = {"rollout/kl_ref": measured, "loss/kl_coef": coef}
    place = KL_PLACEMENTS[algo.kl_mode]
    k = tokens.turn_mask.shape[1]
    penalty, _ = place(kl, tokens.loss_mask, tokens.turn_index, k, coef=coef)
    next_coef = controller.update(measured, tokens.size) if controller is not None else coef
    _, loss_coef = place(kl, tokens.loss_mask, tokens.turn_index, k, coef=next_coef)
    return KLStep(penalty, loss_coef, next_coef, metrics)


def turn_start_values(values: Tensor, tokens: TokenBatch) -> Tensor:
    """Turn-level values (B, K) read off a token-level critic: the state at the start of
    turn k is the one its first sampled token was sampled in (``state_values`` at that
    position). The slot after a truncated episode's last turn gets the value at its last
    real position (the bootstrap value of ``turn_gae``); everything else is 0."""
    size, turns = tokens.turn_mask.shape
    v_state = state_values(values)
    sampled = tokens.loss_mask > 0
    out = torch.zeros(size, turns, dtype=values.dtype)
    for k in range(turns):
        in_turn = sampled & (tokens.turn_index == k)
        first = in_turn.float().argmax(-1)
        at = v_state.gather(1, first[:, None])[:, 0]
        out[:, k] = torch.where(in_turn.any(-1), at, torch.zeros_like(at))
    num_turns = tokens.turn_mask.sum(-1).long()
    last_real = (tokens.attention_mask.sum(-1).long() - 1).clamp(min=0)
    boot = values.gather(1, last_real[:, None])[:, 0]
    rows = torch.nonzero((num_turns < turns) & ~tokens.terminated)[:, 0]
    out[rows, num_turns[rows]] = boot[rows]
    return out


def advantage_inputs(scored: ScoredBatch, passes: Passes, algo: AlgoPreset) -> AdvantageInputs:
    """What the estimator reads. Without ``algo.bootstrap_truncated`` every episode counts
    as terminated, so critic estimators end truncated ones with value 0."""
    tokens = scored.tokens
    terminated = (tokens.terminated if algo.bootstrap_truncated
                  else torch.ones_like(tokens.terminated))
    values = passes.values
    return AdvantageInputs(
        token_mask=tokens.loss_mask, turn_index=tokens.turn_index,
        turn_rewards=scored.turn_rewards, turn_mask=tokens.turn_mask,
        group_ids=tokens.group_ids, terminated=terminated,
        attention_mask=tokens.attention_mask, values=values,
        turn_values=turn_start_values(values, tokens) if values is not None else None,
        state_keys=tokens.state_keys)


def loss_filter_mask(tokens: TokenBatch, outcomes: Tensor, algo: AlgoPreset
                     ) -> tuple[Tensor, dict[str, float]]:
    """(B,) float: 1 on the episodes every loss filter of ``algo.filters`` keeps
    (resampling filters already acted at collection)."""
    keep = torch.ones(tokens.size, dtype=torch.bool)
    metrics: dict[str, float] = {}
    for name in algo.filters:
        if not resamples(name):
            kept = FILTERS[name](outcomes, tokens.group_ids, tokens.terminated)
            metrics[f"rollout/masked_{name}"] = float((~kept).float().mean())
            keep &= kept
    return keep.float(), metrics


def train_batch(scored: ScoredBatch, passes: Passes, advantages: AdvantageOutputs,
                kl: KLStep, algo: AlgoPreset, outcomes: Tensor
                ) -> tuple[TrainBatch, dict[str, float]]:
    """The learner's batch: the ratio's old log-probs and loss weights from the behaviour
    correction (``CORRECTIONS[algo.is_correction]``), the loss mask after the loss filters,
    the critic's state values before the update."""
    tokens = scored.tokens
    old_logprobs, weights, metrics = CORRECTIONS[algo.is_correction](
        tokens.logprobs, passes.learner_logprobs, tokens.loss_mask,
        threshold=algo.is_threshold)
    keep, filter_metrics = loss_filter_mask(tokens, outcomes, algo)
    batch = TrainBatch(
        input_ids=tokens.input_ids, attention_mask=tokens.attention_mask,
        loss_mask=tokens.loss_mask * keep[:, None], old_logprobs=old_logprobs,
        advantages=advantages.advantages, returns=advantages.returns,
        ref_logprobs=passes.ref_logprobs,
        old_values=state_values(passes.values) if passes.values is not None else None,
        is_weights=weights, critic_prefix_ids=tokens.critic_prefix_ids,
        critic_prefix_mask=tokens.critic_prefix_mask, kl_coef=kl.loss_coef)
    return batch, {**metrics, **filter_metrics, **passes.mismatch}


@dataclass(frozen=True)
class Prepared:
    """One step's episodes made into the learner's batch, with every stage's value."""

    tokens: TokenBatch
    passes: Passes
    kl: KLStep
    scored: ScoredBatch
    advantage: AdvantageOutputs
    batch: TrainBatch
    batch_metrics: dict[str, float]

    @property
    def metrics(self) -> dict[str, float]:
        """The stages' metrics (KL, rewards, the batch, the advantages)."""
        return {**self.kl.metrics, **self.scored.metrics, **self.batch_metrics,
                **self.advantage.metrics}


def prepare(learner: Learner, episodes: Sequence[Trajectory], scores: Sequence[EpisodeScore],
            outcomes: Tensor, algo: AlgoPreset, *, pad_token_id: int, shape: Shaping,
            kl_coef: float, controller: AdaptiveKLController | None, measure_mismatch: bool,
            critic_prefixes: list[list[int]] | None = None) -> Prepared:
    """The stages from scored episodes to ``learner``'s batch, in order: lay out their
    tokens, the no-gradient passes, the KL to the reference, all reward shaping, the
    advantages (``ADVANTAGES[algo.advantage]``), the batch."""
    tokens = layout(list(episodes), pad_token_id,
                    bootstrap_truncated=algo.bootstrap_truncated and learner.critic is not None,
                    critic_prefixes=critic_prefixes)
    passes = scoring_passes(learner, tokens, algo, measure_mismatch=measure_mismatch)
    kl = kl_step(tokens, passes, algo, kl_coef, controller)
    scored = score(tokens, list(scores), shape, kl_penalty=kl.reward_penalty)
    advantage = ADVANTAGES[algo.advantage](advantage_inputs(scored, passes, algo),
                                           **algo.adv_kwargs)
    batch, batch_metrics = train_batch(scored, passes, advantage, kl, algo, outcomes)
    return Prepared(tokens, passes, kl, scored, advantage, batch, batch_metrics)
