"""The learner: policy-gradient updates (and critic regression) on laid-out batches.

One :meth:`Learner.update` is ``epochs`` passes over the batch in shuffled mini-batches;
each mini-batch is one optimizer step, accumulated over micro-batches whose losses are
normalised by the *mini-batch's* token and sequence counts, so the gradient does not depend
on the micro-batch size.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from turnrl.algos import AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES
from turnrl.algos.losses import value_loss
from turnrl.algos.presets import AlgoPreset
from turnrl.distributed.data_parallel import DataParallel
from turnrl.distributed.fsdp import clip_grad_norm
from turnrl.models.policy import ValueModel, logprobs_from_logits
from turnrl.train.batch import micro_batches, select
from turnrl.train.packing import packed_forward, packed_passes
from turnrl.train.prefix import shared_prefix_forward
from turnrl.types import Batch

log = logging.getLogger("turnrl")

@dataclass
class OptimConfig:
    """Optimisation knobs of the learner (a view of ``train.*``)."""

    lr: float = 5e-4
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    epochs: int = 1
    mini_batch_size: int = 64
    micro_batch_size: int = 16
    micro_batch_tokens: int | None = None  # token budget of a forward pass (rows × longest)
    critic_lr: float = 1e-3
    vf_coef: float = 0.5  # weight of the value loss in the joint loss of a shared critic
    norm_len: float | None = None  # constant of the seq_mean_token_sum_norm aggregation
    temperature: float = 1.0  # sampling temperature: log-probs are taken at the same one
    pack: bool = False  # pack each forward pass's sequences into shared rows (train.packing)
    share_prefix: bool = False  # encode a pass's common prompts once (train.share_prefix)


class Learner:
    """Owns the trainable policy (and optional critic / frozen reference) and their optimizers."""

    def __init__(self, policy: nn.Module, algo: AlgoPreset, optim: OptimConfig, *,
                 critic: ValueModel | None = None, reference: nn.Module | None = None,
                 seed: int = 0, data_parallel: DataParallel | None = None) -> None:
        self.policy = policy
        self.dp = data_parallel  # None: this process is the only learner
        self.algo = algo
        self.optim = optim
        self.critic = critic
        self.reference = reference
        groups: list[dict] = [{"params": [p for p in policy.parameters() if p.requires_grad],
                               "lr": optim.lr, "weight_decay": optim.weight_decay}]
        self.shared_critic = critic is not None and critic.shared
        if self.shared_critic:  # a value head on the policy: one optimizer, a joint loss
            assert critic is not None
            groups.append({"params": list(critic.head.parameters()), "lr": optim.critic_lr,
                           "weight_decay": 0.0})
        self.optimizer = torch.optim.AdamW(groups)
        self.critic_optimizer = (
            torch.optim.AdamW(critic.parameters(), lr=optim.critic_lr)
            if critic is not None and not self.shared_critic else None
        )
        self.generator = torch.Generator().manual_seed(seed)
        self.aggregate = AGGREGATIONS[algo.loss_agg]
        self.policy_loss = POLICY_LOSSES[algo.policy_loss]
        self.kl = (KL_ESTIMATORS[algo.kl_estimator]
                   if algo.kl_coef and algo.kl_mode == "loss" else None)
        self.kl_coef = algo.kl_coef  # adapted by the loop when algo.kl_target is set

    @property
    def device(self) -> torch.device:
        """Where the policy's parameters are (batches are laid out on the CPU and moved)."""
        return next(self.policy.parameters()).device

    # ------------------------------------------------------------------ scoring passes
    @torch.no_grad()
    def critic_values(self, batch: Batch) -> Tensor:
        """Critic outputs (B, T): V(state after tokens[: t + 1])."""
        assert self.critic is not None
        return self._chunked(lambda b, _: self._critic_forward(b), batch, packed=False)

    def _critic_forward(self, batch: Batch, *, detach_body: bool = False) -> Tensor:
        assert self.critic is not None
        return self.critic(batch.input_ids, batch.attention_mask,
                           prefix_ids=batch.critic_prefix_ids,
                           prefix_mask=batch.critic_prefix_mask, detach_body=detach_body)

    @torch.no_grad()
    def policy_logprobs(self, batch: Batch) -> Tensor:
        """Log-probs (B, T) of the current policy (the learner's view of the old policy)."""
        return self._chunked(lambda b, width: self._forward(self.policy, b, width)[0], batch)

    @torch.no_grad()
    def reference_logprobs(self, batch: Batch) -> Tensor:
        """Log-probs (B, T) of the frozen reference policy."""
        assert self.reference is not None
        reference = self.reference
        return self._chunked(lambda b, width: self._forward(reference, b, width)[0], batch)

    def _forward(self, model: nn.Module, micro: Batch, width: int, *,
                 with_entropy: bool = False, with_hidden: bool = False
                 ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Log-probs (B, T), optional entropies (B, T) and last hidden states (B, T, H) of
        ``model`` over a micro-batch: right-padded, or packed into rows ``width`` tokens wide
        (the longest trajectory of the mini-batch)."""
        if self.optim.pack:
            return packed_forward(model, micro.input_ids, micro.attention_mask,
                                  temperature=self.optim.temperature, capacity=width,
                                  with_entropy=with_entropy, with_hidden=with_hidden)
        if self.optim.share_prefix:
            shared = shared_prefix_forward(model, micro.input_ids, micro.attention_mask,
                                           micro.loss_mask, temperature=self.optim.temperature,
                                           with_entropy=with_entropy, with_hidden=with_hidden)
            if shared is not None:
                return shared
        out = model(input_ids=micro.input_ids, attention_mask=micro.attention_mask,
                    output_hidden_states=with_hidden)
        logprobs, entropy = logprobs_from_logits(out.logits, micro.input_ids,
                                                 temperature=self.optim.temperature,
                                                 with_entropy=with_entropy)
        return logprobs, entropy, out.hidden_states[-1] if with_hidden else None

    def _chunked(self, fn, batch: Batch, *, packed: bool = True) -> Tensor:
        out = torch.zeros_like(batch.old_logprobs)
        width = longest(batch, torch.arange(batch.size))
        for rows in self._micro(batch, torch.arange(batch.size), packed=packed):
            sub = select(batch, rows).to(self.device)
            out[rows, : sub.input_ids.shape[1]] = fn(sub, width).float().to(out.device)
        return out

    # ------------------------------------------------------------------ update
    def update(self, batch: Batch, *, train_policy: bool = True) -> dict[str, float]:
        """``epochs`` × shuffled mini-batches of policy (and critic) steps; returns metrics.

        ``train_policy=False`` (critic warm-up) steps the critic alone; a shared critic then
        trains only its head, so the policy's weights do not move.
        """
        if batch.adv is None:
            raise ValueError("batch.adv is not set: compute advantages before the update")
        if not train_policy and self.critic is None:
            raise ValueError("train_policy=False (critic warm-up) needs a critic")
        sums: dict[str, float] = defaultdict(float)
        steps = 0
        for _ in range(self.optim.epochs):
            order = torch.randperm(batch.size, generator=self.generator)
            for rows in order.split(self.optim.mini_batch_size):
                if train_policy:
                    for key, value in self._policy_step(batch, rows).items():
                        sums[key] += value
                if self.critic is not None and not (self.shared_critic and train_policy):
                    for key, value in self._critic_step(batch, rows).items():
                        sums[key] += value
                steps += 1
        metrics = {key: value if key.endswith("skipped_steps") else value / steps  # counts
                   for key, value in sums.items()}
        metrics["loss/optimizer_steps"] = float(steps)
        return metrics

    def _micro(self, batch: Batch, rows: Tensor, *, packed: bool = True) -> list[Tensor]:
        """The forward passes over ``rows``: length-sorted (for the policy with packing:
        packed; with a shared prefix: sorted by prompt, then length) and bounded by a row count
        and a token budget. The critic's passes stay padded and length-sorted
        (``packed=False``)."""
        if self.optim.pack and packed:
            return packed_passes(batch, rows, max_rows=self.optim.micro_batch_size,
                                 max_tokens=self.optim.micro_batch_tokens)
        return micro_batches(batch, rows, max_rows=self.optim.micro_batch_size,
                             max_tokens=self.optim.micro_batch_tokens,
                             by_prompt=self.optim.share_prefix and packed)

    def _my_passes(self, batch: Batch, passes: list[Tensor]) -> Iterator[tuple[Batch, bool]]:
        """This learner's share of a step's passes (all of them on one process), each as a
        micro-batch on the policy's device and whether it is an FSDP filler (a pass run for
        the collectives only: its loss must count 0)."""
        for rows in self.dp.shard(passes) if self.dp is not None else passes:
            yield select(batch, passes[0] if rows is None else rows).to(self.device), rows is None

    def _normalisers(self, batch: Batch, rows: Tensor) -> dict[str, float | None]:
        mask = batch.loss_mask[rows]
        return {
            "total_tokens": float(mask.sum().clamp(min=1.0)),
            "total_seqs": float(max(int((mask.sum(-1) > 0).sum()), 1)),
            "norm_len": self.optim.norm_len,
        }

    def _policy_step(self, batch: Batch, rows: Tensor) -> dict[str, float]:
        self.policy.train()
        norms = self._normalisers(batch, rows)
        width = longest(batch, rows)
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = defaultdict(float)
        passes = self._micro(batch, rows)
        n_micro = len(passes)  # over all learners: the _mean/ metrics are means over passes
        for micro, filler in self._my_passes(batch, passes):
            logprobs, entropy, hidden = self._forward(self.policy, micro, width,
                                                      with_entropy=True,
                                                      with_hidden=self.shared_critic)
            assert entropy is not None and micro.adv is not None
            per_token, loss_metrics = self.policy_loss(
                logprobs, micro.old_logprobs, micro.adv, micro.loss_mask, **self.algo.loss_kwargs)
            if micro.is_weights is not None:  # behaviour-policy correction
                per_token = per_token * micro.is_weights
            pg_loss = self.aggregate(per_token, micro.loss_mask, **norms)
            ent = self.aggregate(entropy, micro.loss_mask, **norms)
            loss = pg_loss - self.algo.entropy_coef * ent
            pass_sums: dict[str, float] = {}
            if self.kl is not None:
                assert micro.ref_logprobs is not None, "kl_coef > 0 needs reference log-probs"
                kl = self.aggregate(self.kl(logprobs, micro.ref_logprobs), micro.loss_mask,
                                    **norms)
                loss = loss + self.kl_coef * kl
                pass_sums["loss/kl"] = kl.item()
            if self.shared_critic:  # joint loss: policy + vf_coef · value
                assert self.critic is not None and hidden is not None
                vf, vf_metrics = self._value_loss(
                    self.critic.values_from_hidden(hidden), micro, norms)
                loss = loss + self.optim.vf_coef * vf
                pass_sums["loss/value"] = vf.item()
                pass_sums.update({f"_mean/{key}": value for key, value in vf_metrics.items()})
            if filler:
                (loss * 0.0).backward()
                continue
            loss.backward()
            pass_sums.update({"loss/policy": pg_loss.item(), "loss/entropy": ent.item(),
                              "loss/total": loss.item()})
            pass_sums.update({f"_mean/{key}": value for key, value in loss_metrics.items()})
            for key, value in pass_sums.items():
                sums[key] += value
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        if self.dp is not None:  # the mini-batch's gradient: the sum over the learners
            self.dp.all_reduce_grads(params)
            sums = self.dp.sum_metrics(sums)
        grad_norm = clip_grad_norm(params, self.optim.max_grad_norm)
        if grad_norm == 0.0:
            # no learning signal (e.g. every group's rewards equal: all advantages 0). AdamW
            # would still move the weights along its momentum, for tens of steps after the
            # last real gradient: skip the step, so a mini-batch without signal changes nothing
            sums["loss/no_signal_skipped_steps"] = 1.0
        elif math.isfinite(grad_norm):
            self.optimizer.step()
        else:  # a NaN/inf loss or gradient: keep the weights (and optimizer state) as they are
            sums["loss/skipped_steps"] = 1.0  # (sums is a plain dict after sum_metrics)
            log.warning("policy update skipped: gradient norm %s (non-finite loss or "
                        "gradient)", grad_norm)
        metrics = {k: v for k, v in sums.items() if not k.startswith("_mean/")}
        metrics.update({k[len("_mean/"):]: v / n_micro for k, v in sums.items()
                        if k.startswith("_mean/")})
        metrics["loss/grad_norm"] = grad_norm
        return metrics

    def _value_loss(self, raw_values: Tensor, micro: Batch,
                    norms: dict[str, float | None]) -> tuple[Tensor, dict[str, float]]:
        """Token-mean value loss of critic outputs (B, T) against ``micro.ret``."""
        assert micro.ret is not None
        clip = self.algo.value_clip
        per_token, metrics = value_loss(
            state_values(raw_values), micro.ret, micro.loss_mask,
            old_values=micro.old_values if clip else None, clip=clip)
        loss = AGGREGATIONS["token_mean"](per_token, micro.loss_mask,
                                          total_tokens=norms["total_tokens"])
        return loss, metrics

    def _critic_step(self, batch: Batch, rows: Tensor) -> dict[str, float]:
        """One critic optimizer step; a shared critic (during warm-up) trains its head only."""
        assert self.critic is not None
        optimizer = self.optimizer if self.shared_critic else self.critic_optimizer
        assert optimizer is not None
        self.critic.train()
        norms = self._normalisers(batch, rows)
        optimizer.zero_grad(set_to_none=True)
        total = clipfrac = 0.0
        passes = self._micro(batch, rows, packed=False)
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
        if self.dp is not None:
            self.dp.all_reduce_grads(self.critic.head.parameters() if self.shared_critic
                                     else self.critic.parameters())
            reduced = self.dp.sum_metrics({"total": total, "clipfrac": clipfrac})
            total, clipfrac = reduced["total"], reduced["clipfrac"]
        grad_norm = clip_grad_norm(list(self.critic.parameters()), self.optim.max_grad_norm)
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


def longest(batch: Batch, rows: Tensor) -> int:
    """The longest sequence (real tokens) among ``rows``."""
    return int(batch.attention_mask[rows].sum(-1).max())


def state_values(values: Tensor) -> Tensor:
    """Critic outputs (B, T) → state values: ``V_t = values[:, t − 1]`` is the value of the
    state in which token t was sampled (0 at t = 0)."""
    return nn.functional.pad(values[:, :-1], (1, 0))
