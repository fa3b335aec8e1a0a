"""The algorithm registries and their call signatures (one signature per registry).

A training config names an entry of each registry (``advantage``, ``policy_loss``,
``loss_agg``, ``kl_estimator``, ``kl_mode`` (where the KL term goes), ``is_correction``
(behaviour-policy correction), ``filters``); the driver looks the function up and never
branches on the name. Register with the typed decorators below (they keep the decorated function's
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


class FilterFn(Protocol):
    """``fn(outcomes (B,), group_ids (B,), terminated (B,)) -> keep (B,) bool``: which
    episodes a batch filter keeps. Registered with ``resample=True`` it drops episodes at
    collection (more are sampled in their place); else their loss is masked out after the
    advantages (they still count in the group baselines)."""

    def __call__(self, outcomes: Tensor, group_ids: Tensor, terminated: Tensor, /) -> Tensor: ...


class CorrectionFn(Protocol):
    """``fn(sampling_logprobs (B,T), learner_logprobs (B,T) | None, token_mask (B,T), *,
    threshold) -> (old_logprobs (B,T), loss weights (B,T) | None, metrics)``: the log-probs
    the policy ratio is taken against and per-token weights of the loss. Registered with
    ``needs_learner_logprobs=True`` when it reads the learner's own log-probs of the batch."""

    def __call__(self, sampling_logprobs: Tensor, learner_logprobs: Tensor | None,
                 token_mask: Tensor, /, *, threshold: float
                 ) -> tuple[Tensor, Tensor | None, dict[str, float]]: ...


class KLPlacementFn(Protocol):
    """``fn(kl (B,T), token_mask (B,T), turn_index (B,T), num_turns, *, coef) ->
    (turn reward penalty (B,K) or None, loss coefficient)``: where ``coef · KL(π‖π_ref)``
    goes, into the rewards before the advantages or into the loss."""

    def __call__(self, kl: Tensor, token_mask: Tensor, turn_index: Tensor, num_turns: int, /,
                 *, coef: float) -> tuple[Tensor | None, float]: ...


ADVANTAGES: Registry[AdvantageFn] = Registry("advantage")
FILTERS: Registry[FilterFn] = Registry("batch filter")
CORRECTIONS: Registry[CorrectionFn] = Registry("behaviour correction")
KL_PLACEMENTS: Registry[KLPlacementFn] = Registry("KL placement")
POLICY_LOSSES: Registry[PolicyLossFn] = Registry("policy loss")
AGGREGATIONS: Registry[AggregationFn] = Registry("loss aggregation")
KL_ESTIMATORS: Registry[KLFn] = Registry("KL estimator")

_NEEDS_CRITIC: dict[str, bool] = {}
_NEEDS_GROUPS: dict[str, bool] = {}
_RESAMPLES: dict[str, bool] = {}
_NEEDS_LEARNER_LOGPROBS: dict[str, bool] = {}

AdvF = TypeVar("AdvF", bound=AdvantageFn)
LossF = TypeVar("LossF", bound=PolicyLossFn)
AggF = TypeVar("AggF", bound=AggregationFn)
KLF = TypeVar("KLF", bound=KLFn)
FilterF = TypeVar("FilterF", bound=FilterFn)
CorrectionF = TypeVar("CorrectionF", bound=CorrectionFn)
PlacementF = TypeVar("PlacementF", bound=KLPlacementFn)


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


def register_filter(name: str, *, resample: bool) -> Callable[[FilterF], FilterF]:
    """Decorator: store a batch filter under ``name``; ``resample=True`` drops the episodes it
    rejects at collection and samples more, else it masks their loss."""

    def add(fn: FilterF) -> FilterF:
        FILTERS.register(name)(fn)
        _RESAMPLES[name] = resample
        return fn

    return add


def resamples(name: str) -> bool:
    """Whether the batch filter ``name`` drops episodes at collection (and samples more)."""
    FILTERS[name]
    return _RESAMPLES[name]


def register_correction(name: str, *,
                        needs_learner_logprobs: bool) -> Callable[[CorrectionF], CorrectionF]:
    """Decorator: store a behaviour-policy correction under ``name``."""

    def add(fn: CorrectionF) -> CorrectionF:
        CORRECTIONS.register(name)(fn)
        _NEEDS_LEARNER_LOGPROBS[name] = needs_learner_logprobs
        return fn

    return add


def needs_learner_logprobs(name: str) -> bool:
    """Whether the correction ``name`` reads the learner's own log-probs of the batch (one
    more forward pass before the update)."""
    CORRECTIONS[name]
    return _NEEDS_LEARNER_LOGPROBS[name]


def register_kl_placement(name: str) -> Callable[[PlacementF], PlacementF]:
    """Decorator: store a KL placement under ``name``."""

    def add(fn: PlacementF) -> PlacementF:
        KL_PLACEMENTS.register(name)(fn)
        return fn

    return add
