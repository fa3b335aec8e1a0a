"""Algorithm math as pure tensor functions, looked up by name in typed registries.

Importing ``turnrl.algos`` fills ``ADVANTAGES``, ``POLICY_LOSSES``, ``AGGREGATIONS`` and
``KL_ESTIMATORS``; ``PRESETS`` bundles their keys into named methods (grpo, dr_grpo, rloo,
reinforce_pp, ppo). Formulas and papers: ``docs/algorithms.md``.
"""

from turnrl.algos import (  # noqa: F401  (fill the registries)
    advantages,
    aggregation,
    kl,
    losses,
    turn_advantages,
)
from turnrl.algos.correction import AdaptiveKLController, behaviour_correction, kl_token_penalty
from turnrl.algos.functional import entropy_from_logits, masked_mean, masked_whiten
from turnrl.algos.losses import value_loss
from turnrl.algos.presets import PRESETS, AlgoPreset, get_preset
from turnrl.algos.registry import (
    ADVANTAGES,
    AGGREGATIONS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    AdvantageFn,
    AggregationFn,
    KLFn,
    PolicyLossFn,
    needs_critic,
    needs_groups,
    register_advantage,
    register_aggregation,
    register_kl_estimator,
    register_policy_loss,
)

__all__ = [
    "ADVANTAGES",
    "AGGREGATIONS",
    "KL_ESTIMATORS",
    "POLICY_LOSSES",
    "PRESETS",
    "AdaptiveKLController",
    "AdvantageFn",
    "AggregationFn",
    "AlgoPreset",
    "KLFn",
    "PolicyLossFn",
    "behaviour_correction",
    "entropy_from_logits",
    "get_preset",
    "kl_token_penalty",
    "masked_mean",
    "masked_whiten",
    "needs_critic",
    "needs_groups",
    "register_advantage",
    "register_aggregation",
    "register_kl_estimator",
    "register_policy_loss",
    "value_loss",
]
