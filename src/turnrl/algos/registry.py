"""The four algorithm registries and their call signatures (one signature per registry).

A training config names an entry of each registry (``advantage``, ``policy_loss``,
``loss_agg``, ``kl_estimator``); the learner looks the function up and never branches on
the name. Register with the typed decorators below (they keep the decorated function's
own signature for type checkers), e.g.::

    @register_advantage("gae", needs_critic=True)
    def gae(inputs: AdvantageInputs, *, gamma: float = 1.0, lam: float = 0.95
            ) -> AdvantageOutputs: ...

Shapes: ``B`` trajectories, ``T`` tokens, ``K`` agent turns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from torch import Tensor

from turnrl.registry import Registry
from turnrl.types import AdvantageInputs, AdvantageOutputs

# A protocol whose variadic part is ``*args: Any, **hparams: Any`` is the typing spec's
# gradual form ``Callable[Concatenate[X, ...], R]``: the leading parameters are checked,
# the hyperparameters (keyword-only in every implementation) are the function's own.


class AdvantageFn(Protocol):
    """``fn(inputs, **hparams) -> AdvantageOutputs(advantages (B,T), returns (B,T), metrics)``."""

    def __call__(
        self, inputs: AdvantageInputs, /, *args: Any, **hparams: Any
    ) -> AdvantageOutputs: ...


class PolicyLossFn(Protocol):
    """``fn(logprobs, old_logprobs, advantages, token_mask, **hparams)``, all ``(B, T)``,
    ``-> (per-token loss (B, T), metrics)``; the loss is 0 where ``token_mask`` is 0."""

    def __call__(
        self,
        logprobs: Tensor,
        old_logprobs: Tensor,
        advantages: Tensor,
        token_mask: Tensor,
        /,
        *args: Any,
        **hparams: Any,
    ) -> tuple[Tensor, dict[str, float]]: ...


class AggregationFn(Protocol):
    """``fn(per_token (B,T), token_mask (B,T), *, total_tokens, total_seqs, norm_len)``
    ``-> scalar``. ``total_*`` are whole-batch counts (None: this call's own counts)."""

    def __call__(
        self,
        per_token: Tensor,
        token_mask: Tensor,
        /,
        *,
        total_tokens: float | None = None,
        total_seqs: float | None = None,
        norm_len: float | None = None,
    ) -> Tensor: ...


class KLFn(Protocol):
    """``fn(logprobs (B,T), ref_logprobs (B,T)) -> (B,T)`` per-token estimate of
    KL(π‖π_ref) from tokens sampled from π."""

    def __call__(self, logprobs: Tensor, ref_logprobs: Tensor, /) -> Tensor: ...


ADVANTAGES: Registry[AdvantageFn] = Registry("advantage")
POLICY_LOSSES: Registry[PolicyLossFn] = Registry("policy loss")
AGGREGATIONS: Registry[AggregationFn] = Registry("loss aggregation")
KL_ESTIMATORS: Registry[KLFn] = Registry("KL estimator")

_NEEDS_CRITIC: dict[str, bool] = {}
_NEEDS_GROUPS: dict[str, bool] = {}

AdvF = TypeVar("AdvF", bound=AdvantageFn)
LossF = TypeVar("LossF", bound=PolicyLossFn)
AggF = TypeVar("AggF", bound=AggregationFn)
KLF = TypeVar("KLF", bound=KLFn)


def register_advantage(name: str, *, needs_critic: bool = False,
                       needs_groups: bool = False) -> Callable[[AdvF], AdvF]:
    """Decorator: store an advantage estimator under ``name``; ``needs_critic=True`` when it
    reads ``AdvantageInputs.values`` (the learner then trains a value head),
    ``needs_groups=True`` when it compares the episodes of a group (group size >= 2)."""

    def add(fn: AdvF) -> AdvF:
        ADVANTAGES.register(name)(fn)
        _NEEDS_CRITIC[name] = needs_critic
        _NEEDS_GROUPS[name] = needs_groups
        return fn

    return add


def needs_critic(name: str) -> bool:
    """Whether the advantage estimator ``name`` needs a critic (raises for unknown names)."""
    ADVANTAGES[name]  # UnknownNameError listing the choices
    return _NEEDS_CRITIC.get(name, False)


def needs_groups(name: str) -> bool:
    """Whether the advantage estimator ``name`` compares episodes of a group."""
    ADVANTAGES[name]
    return _NEEDS_GROUPS.get(name, False)


def register_policy_loss(name: str) -> Callable[[LossF], LossF]:
    """Decorator: store a policy loss under ``name``."""

    def add(fn: LossF) -> LossF:
        POLICY_LOSSES.register(name)(fn)
        return fn

    return add


def register_aggregation(name: str) -> Callable[[AggF], AggF]:
    """Decorator: store a loss aggregation under ``name``."""

    def add(fn: AggF) -> AggF:
        AGGREGATIONS.register(name)(fn)
        return fn

    return add


def register_kl_estimator(name: str) -> Callable[[KLF], KLF]:
    """Decorator: store a KL estimator under ``name``."""

    def add(fn: KLF) -> KLF:
        KL_ESTIMATORS.register(name)(fn)
        return fn

    return add
