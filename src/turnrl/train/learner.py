"""The learner: the forward passes that score a batch, and the policy-gradient updates
(and critic regression) on a :class:`~turnrl.types.TrainBatch`.

One :meth:`Learner.update` is ``epochs`` passes over the batch in shuffled mini-batches;
each mini-batch is one optimizer step, accumulated over micro-batches whose losses are
normalised by the *mini-batch's* token and sequence counts, so the gradient does not depend
on the micro-batch size. With several learners the gradients are summed through a
:class:`GradientSync` (``turnrl.distributed`` provides the torch.distributed one); the
learner itself knows nothing of processes.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol, TypeVar

import torch
from torch import Tensor, nn

from turnrl.algos import AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES
from turnrl.algos.functional import state_values
from turnrl.algos.losses import value_loss
from turnrl.algos.presets import AlgoPreset
from turnrl.config import CriticConfig, TrainConfig
from turnrl.models.policy import ValueModel
from turnrl.train.microbatch import PassPlan, forward, longest
from turnrl.types import TokenBatch, TrainBatch

log = logging.getLogger("turnrl")

P = TypeVar("P")


class GradientSync(Protocol):
    """How the learners of one update share work: each runs its share of the forward passes
    (``None``: a filler pass that only joins the collectives), then the gradients and metric
    sums are summed over the learners before clipping."""

    def shard(self, passes: Sequence[P]) -> list[P | None]: ...
    def all_reduce_grads(self, params: Iterable[nn.Parameter]) -> None: ...
    def sum_metrics(self, sums: dict[str, float]) -> dict[str, float]: ...
    def clip_grad_norm(self, params: Iterable[nn.Parameter], max_norm: float) -> float: ...


class LocalSync:
    """One learner: every pass is its own, nothing to sum."""

    def shard(self, passes: Sequence[P]) -> list[P | None]:
        return list(passes)

    def all_reduce_grads(self, params: Iterable[nn.Parameter]) -> None:
        return None

    def sum_metrics(self, sums: dict[str, float]) -> dict[str, float]:
        return sums

    def clip_grad_norm(self, params: Iterable[nn.Parameter], max_norm: float) -> float:
        return float(torch.nn.utils.clip_grad_norm_(
            [p for p in params if p.grad is not None], max_norm))


def adamw(groups: list[dict]) -> torch.optim.AdamW:
    """AdamW over parameter ``groups``, fused (one kernel over every tensor: on 2 CPU cores a
    step of the tiny model took 2.0 ms unfused, 0.55 ms fused) where all of them are
    floating-point tensors on the CPU or a CUDA device, the for-loop implementation elsewhere.
    """
    params = [p for group in groups for p in group["params"]]
    fused = bool(params) and all(p.is_floating_point() and p.device.type in ("cpu", "cuda")
                                 for p in params)
    return torch.optim.AdamW(groups, fused=fused or None)


class Learner:
    """Owns the trainable policy (and optional critic / frozen reference) and their optimizers."""

    def __init__(self, policy: nn.Module, algo: AlgoPreset, train: TrainConfig, *,
                 critic_cfg: CriticConfig | None = None, critic: ValueModel | None = None,
                 reference: nn.Module | None = None, norm_len: float | None = None,
                 temperature: float = 1.0, seed: int = 0,
                 sync: GradientSync | None = None) -> None:
        critic_cfg = critic_cfg or CriticConfig()
        self.settings = {"train": train, "critic_cfg": critic_cfg, "norm_len": norm_len,
                         "temperature": temperature}  # what a replica is built with
        self.policy = policy
        self.sync: GradientSync = sync or LocalSync()
        self.algo = algo
        self.train = train
        self.vf_coef = critic_cfg.vf_coef
        self.norm_len = norm_len
        assert train.micro_batch_size is not None, "a validated TrainConfig sets it"
        self.plan = PassPlan(max_rows=train.micro_batch_size, max_tokens=train.micro_batch_tokens,
                             pack=train.packing, share_prefix=train.share_prefix,
                             temperature=temperature)
        self.critic = critic
        self.reference = reference
        groups: list[dict] = [{"params": [p for p in policy.parameters() if p.requires_grad],
                               "lr": train.lr, "weight_decay": train.weight_decay}]
        self.shared_critic = critic is not None and critic.shared
        if self.shared_critic:  # a value head on the policy: one optimizer, a joint loss
            assert critic is not None
            groups.append({"params": list(critic.head.parameters()), "lr": critic_cfg.lr,
                           "weight_decay": 0.0})
        self.optimizer = adamw(groups)
        self.critic_optimizer = (
            adamw([{"params": list(critic.parameters()), "lr": critic_cfg.lr}])
            if critic is not None and not self.shared_critic else None
        )
        self.generator = torch.Generator().manual_seed(seed)
        self.aggregate = AGGREGATIONS[algo.loss_agg]
        self.policy_loss = POLICY_LOSSES[algo.policy_loss]
        self.kl = KL_ESTIMATORS[algo.kl_estimator]

    @property
    def device(self) -> torch.device:
        """Where the policy's parameters are (batches are laid out on the CPU and moved)."""
        return next(self.policy.parameters()).device

    # ------------------------------------------------------------------ scoring passes
    @torch.no_grad()
    def critic_values(self, batch: TokenBatch) -> Tensor:
        """Critic outputs (B, T): V(state after tokens[: t + 1])."""
        assert self.critic is not None
        return self._chunked(lambda b, _: self._critic_forward(b), batch, packed=False)

    def _critic_forward(self, batch: TokenBatch | TrainBatch, *,
                        detach_body: bool = False) -> Tensor:
        assert self.critic is not None
        return self.critic(batch.input_ids, batch.attention_mask,
                           prefix_ids=batch.critic_prefix_ids,
                           prefix_mask=batch.critic_prefix_mask, detach_body=detach_body)

    @torch.no_grad()
    def policy_logprobs(self, batch: TokenBatch) -> Tensor:
        """Log-probs (B, T) of the current policy (the learner's view of the old policy)."""
        return self._chunked(lambda b, width: self._forward(self.policy, b, width)[0], batch)

    @torch.no_grad()
    def policy_token_stats(self, batch: TokenBatch) -> tuple[Tensor, Tensor]:
        """Log-probs and entropies (B, T) of the current policy (the samples a step keeps,
        ``turnrl.train.samples``): ``H_t = −Σ_v π(v | x_<t) log π(v | x_<t)``."""
        logprobs, entropies = torch.zeros_like(batch.logprobs), torch.zeros_like(batch.logprobs)
        width = longest(batch, torch.arange(batch.size))
        for rows in self.plan.passes(batch, torch.arange(batch.size), packed=True):
            sub = batch.select(rows).to(self.device)
            sub_logprobs, sub_entropies, _ = self._forward(self.policy, sub, width,
                                                           with_entropy=True)
            assert sub_entropies is not None
            logprobs[rows, : sub.input_ids.shape[1]] = sub_logprobs.float().to(logprobs.device)
            entropies[rows, : sub.input_ids.shape[1]] = sub_entropies.float().to(
                entropies.device)
        return logprobs, entropies

    @torch.no_grad()
    def reference_logprobs(self, batch: TokenBatch) -> Tensor:
        """Log-probs (B, T) of the frozen reference policy."""
        assert self.reference is not None
        reference = self.reference
        return self._chunked(lambda b, width: self._forward(reference, b, width)[0], batch)

    def _forward(self, model: nn.Module, micro: TokenBatch | TrainBatch, width: int, *,
                 with_entropy: bool = False, with_hidden: bool = False
                 ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        return forward(model, micro, width, self.plan, with_entropy=with_entropy,
                       with_hidden=with_hidden)

    def _chunked(self, fn: Callable[[TokenBatch, int], Tensor], batch: TokenBatch, *,
                 packed: bool = True) -> Tensor:
        out = torch.zeros_like(batch.logprobs)
        width = longest(batch, torch.arange(batch.size))
        for rows in self.plan.passes(batch, torch.arange(batch.size), packed=packed):
            sub = batch.select(rows).to(self.device)
            out[rows, : sub.input_ids.shape[1]] = fn(sub, width).float().to(out.device)
        return out

    # ------------------------------------------------------------------ update
    def update(self, batch: TrainBatch, *, train_policy: bool = True) -> dict[str, float]:
        """``epochs`` × shuffled mini-batches of policy (and critic) steps; returns metrics.

        ``train_policy=False`` (critic warm-up) steps the critic alone; a shared critic then
        trains only its head, so the policy's weights do not move.
        """
        if not train_policy and self.critic is None:
            raise ValueError("train_policy=False (critic warm-up) needs a critic")
        sums: dict[str, float] = defaultdict(float)
        steps = sampled_steps = 0  # sampled: mini-batches with a token to train on
        for _ in range(self.train.epochs):
            order = torch.randperm(batch.size, generator=self.generator)
            for rows in order.split(self.train.mini_batch_size):
                if train_policy:
                    step_metrics = self._policy_step(batch, rows)
                    if bool(batch.loss_mask[rows].any()):
                        sampled_steps += 1
                    else:  # e.g. every episode ran out of context: no entropy to average
                        step_metrics.pop("loss/entropy", None)
                    for key, value in step_metrics.items():
                        sums[key] += value
                if self.critic is not None and not (self.shared_critic and train_policy):
                    for key, value in self._critic_step(batch, rows).items():
                        sums[key] += value
                steps += 1
        metrics = {key: value if key.endswith("skipped_steps") else value / steps  # counts
                   for key, value in sums.items()}
        if "loss/entropy" in sums:
            metrics["loss/entropy"] = sums["loss/entropy"] / sampled_steps
        metrics["loss/optimizer_steps"] = float(steps)
        return metrics

    def _my_passes(self, batch: TrainBatch, passes: list[Tensor]
                   ) -> Iterator[tuple[TrainBatch, bool]]:
        """This learner's share of a step's passes (all of them on one process), each as a
        micro-batch on the policy's device and whether it is a filler (a pass run for the
        collectives only: its loss must count 0)."""
        for rows in self.sync.shard(passes):
            yield batch.select(passes[0] if rows is None else rows).to(self.device), rows is None

    def _normalisers(self, batch: TrainBatch, rows: Tensor) -> dict[str, float | None]:
        mask = batch.loss_mask[rows]
        return {
            "total_tokens": float(mask.sum().clamp(min=1.0)),
            "total_seqs": float(max(int((mask.sum(-1) > 0).sum()), 1)),
            "norm_len": self.norm_len,
        }

    def _pass_loss(self, micro: TrainBatch, width: int, norms: dict[str, float | None]
                   ) -> tuple[Tensor, dict[str, float], dict[str, float]]:
        """One micro-batch's policy loss (+ KL term, + value loss of a shared critic): the
        loss, its summed metrics and its per-pass (``_mean/``) metrics."""
        logprobs, entropy, hidden = self._forward(self.policy, micro, width, with_entropy=True,
                                                  with_hidden=self.shared_critic)
        assert entropy is not None
        per_token, loss_metrics = self.policy_loss(
            logprobs, micro.old_logprobs, micro.advantages, micro.loss_mask,
            **self.algo.loss_kwargs)
        if micro.is_weights is not None:  # behaviour-policy correction
            per_token = per_token * micro.is_weights
        pg_loss = self.aggregate(per_token, micro.loss_mask, **norms)
        if not self.algo.entropy_coef:  # a metric only: no backward pass through it
            entropy = entropy.detach()
        ent = self.aggregate(entropy, micro.loss_mask, **norms)
        loss = pg_loss - self.algo.entropy_coef * ent
        sums: dict[str, float] = {}
        means = dict(loss_metrics)
        if micro.kl_coef:
            assert micro.ref_logprobs is not None, "a KL loss term needs reference log-probs"
            kl = self.aggregate(self.kl(logprobs, micro.ref_logprobs), micro.loss_mask, **norms)
            loss = loss + micro.kl_coef * kl
            sums["loss/kl"] = kl.item()
        if self.shared_critic:  # joint loss: policy + vf_coef · value
            assert self.critic is not None and hidden is not None
            vf, vf_metrics = self._value_loss(self.critic.values_from_hidden(hidden), micro,
                                              norms)
            loss = loss + self.vf_coef * vf
            sums["loss/value"] = vf.item()
            means.update(vf_metrics)
        sums.update({"loss/policy": pg_loss.item(), "loss/entropy": ent.item(),
                     "loss/total": loss.item()})
        return loss, sums, means

    def _policy_step(self, batch: TrainBatch, rows: Tensor) -> dict[str, float]:
        self.policy.train()
        norms = self._normalisers(batch, rows)
        width = longest(batch, rows)
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = defaultdict(float)
        passes = self.plan.passes(batch, rows)
        n_micro = len(passes)  # over all learners: the _mean/ metrics are means over passes
        for micro, filler in self._my_passes(batch, passes):
            loss, pass_sums, pass_means = self._pass_loss(micro, width, norms)
            if filler:
                (loss * 0.0).backward()
                continue
            loss.backward()
            for key, value in pass_sums.items():
                sums[key] += value
            for key, value in pass_means.items():
                sums[f"_mean/{key}"] += value
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        self.sync.all_reduce_grads(params)  # the mini-batch's gradient: a sum over learners
        sums = self.sync.sum_metrics(dict(sums))
        grad_norm = self.sync.clip_grad_norm(params, self.train.max_grad_norm)
        if grad_norm == 0.0:
            # no learning signal (e.g. every group's rewards equal: all advantages 0). AdamW
            # would still move the weights along its momentum, for tens of steps after the
            # last real gradient: skip the step, so a mini-batch without signal changes nothing
            sums["loss/no_signal_skipped_steps"] = 1.0
        elif math.isfinite(grad_norm):
            self.optimizer.step()
        else:  # a NaN/inf loss or gradient: keep the weights (and optimizer state) as they are
            sums["loss/skipped_steps"] = 1.0
            log.warning("policy update skipped: gradient norm %s (non-finite loss or "
                        "gradient)", grad_norm)
        metrics = {k: v for k, v in sums.items() if not k.startswith("_mean/")}
        metrics.update({k[len("_mean/"):]: v / n_micro for k, v in sums.items()
                        if k.startswith("_mean/")})
        metrics["loss/grad_norm"] = grad_norm
        return metrics

    def _value_loss(self, raw_values: Tensor, micro: TrainBatch,
                    norms: dict[str, float | None]) -> tuple[Tensor, dict[str, float]]:
        """Token-mean value loss of critic outputs (B, T) against ``micro.returns``."""
        clip = self.algo.value_clip
        per_token, metrics = value_loss(
            state_values(raw_values), micro.returns, micro.loss_mask,
            old_values=micro.old_values if clip else None, clip=clip)
        loss = AGGREGATIONS["token_mean"](per_token, micro.loss_mask,
                                          total_tokens=norms["total_tokens"])
        return loss, metrics

    def _critic_step(self, batch: TrainBatch, rows: Tensor) -> dict[str, float]:
        """One critic optimizer step; a shared critic (during warm-up) trains its head only."""
        assert self.critic is not None
        optimizer = self.optimizer if self.shared_critic else self.critic_optimizer
        assert optimizer is not None
        self.critic.train()
        norms = self._normalisers(batch, rows)
        optimizer.zero_grad(set_to_none=True)
        total = clipfrac = 0.0
        passes = self.plan.passes(batch, rows, packed=False)
        n_micro = len(passes)
        for micro, filler in self._my_passes(batch, passes):
            loss, vf_metrics = self._value_loss(
                self._critic_forward(micro, detach_body=self.shared_critic), micro, norms)
            if filler:
                (loss * 0.0).backward()
                continue
            loss.backward()
            total += loss.item()
            clipfrac += vf_metrics.get("loss/vf_clipfrac", 0.0) / n_micro
        self.sync.all_reduce_grads(self.critic.head.parameters() if self.shared_critic
                                   else self.critic.parameters())
        reduced = self.sync.sum_metrics({"total": total, "clipfrac": clipfrac})
        total, clipfrac = reduced["total"], reduced["clipfrac"]
        grad_norm = self.sync.clip_grad_norm(list(self.critic.parameters()),
                                             self.train.max_grad_norm)
        skipped = not math.isfinite(grad_norm)
        if skipped:
            log.warning("critic update skipped: gradient norm %s", grad_norm)
        else:
            optimizer.step()
        metrics = {"loss/value": total, "loss/value_grad_norm": grad_norm,
                   "loss/value_skipped_steps": float(skipped)}
        if self.algo.value_clip:
            metrics["loss/vf_clipfrac"] = clipfrac
        return metrics
