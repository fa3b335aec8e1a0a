"""Named algorithm presets: a paper's method as a bundle of registry keys (data, never branches).

``PRESETS["grpo"]`` says which advantage estimator, policy loss, aggregation and KL settings
the method uses; the learner reads the keys and looks the functions up in the registries.
Each preset owns fresh kwargs dicts (copied on construction); treat ``PRESETS`` as read-only
and derive variants with ``dataclasses.replace(preset, adv_kwargs={...})``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from turnrl.registry import UnknownNameError, unknown_name_message

__all__ = ["PRESETS", "AlgoPreset", "get_preset"]


@dataclass(frozen=True)
class AlgoPreset:
    """One method: ``ADVANTAGES[advantage](inputs, **adv_kwargs)``, then
    ``POLICY_LOSSES[policy_loss](..., **loss_kwargs)`` aggregated by ``AGGREGATIONS[loss_agg]``,
    plus ``kl_coef · KL_ESTIMATORS[kl_estimator]`` and ``−entropy_coef · entropy``."""

    advantage: str
    adv_kwargs: dict[str, Any]
    policy_loss: str
    loss_kwargs: dict[str, Any]
    loss_agg: str
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    entropy_coef: float = 0.0
    paper: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        # own copies: presets never share a kwargs dict (nor alias the caller's)
        object.__setattr__(self, "adv_kwargs", dict(self.adv_kwargs))
        object.__setattr__(self, "loss_kwargs", dict(self.loss_kwargs))


_PPO_CLIP = {"clip_low": 0.2, "clip_high": 0.2}

PRESETS: dict[str, AlgoPreset] = {
    "grpo": AlgoPreset(
        advantage="grpo",
        adv_kwargs={"norm_std": True},
        policy_loss="ppo_clip",
        loss_kwargs=_PPO_CLIP,
        loss_agg="seq_mean_token_mean",
        paper="Shao et al. 2024, DeepSeekMath, arXiv:2402.03300",
        description=(
            "Group-normalised outcome advantage, PPO clip 0.2, mean of per-trajectory token "
            "means. The paper also adds a k3 KL penalty to a reference policy with beta=0.04; "
            "it is off here by default (set kl_coef=0.04 to reproduce it)."
        ),
    ),
    "dr_grpo": AlgoPreset(
        advantage="grpo",
        adv_kwargs={"norm_std": False},
        policy_loss="ppo_clip",
        loss_kwargs=_PPO_CLIP,
        loss_agg="seq_mean_token_sum_norm",
        paper="Liu et al. 2025, Understanding R1-Zero-Like Training, arXiv:2503.20783",
        description=(
            "GRPO without the std and length normalisations (both bias the update): "
            "A = R - group mean, token sums divided by a constant norm_len (the maximum "
            "generation length, passed by the learner)."
        ),
    ),
    "rloo": AlgoPreset(
        advantage="rloo",
        adv_kwargs={},
        policy_loss="ppo_clip",
        loss_kwargs=_PPO_CLIP,
        loss_agg="token_mean",
        paper="Ahmadian et al. 2024, Back to Basics, arXiv:2402.14740",
        description="Leave-one-out group baseline (unbiased), PPO clip, token mean.",
    ),
    "reinforce_pp": AlgoPreset(
        advantage="reinforce_pp",
        adv_kwargs={"gamma": 1.0},
        policy_loss="ppo_clip",
        loss_kwargs=_PPO_CLIP,
        loss_agg="token_mean",
        paper="Hu 2025, REINFORCE++, arXiv:2501.03262",
        description=(
            "Token-level return-to-go whitened over the whole batch (no groups needed), "
            "PPO clip, token mean."
        ),
    ),
    "ppo": AlgoPreset(
        advantage="gae",
        adv_kwargs={"gamma": 1.0, "lam": 0.95},
        policy_loss="ppo_clip",
        loss_kwargs=_PPO_CLIP,
        loss_agg="token_mean",
        paper="Schulman et al. 2017, arXiv:1707.06347; GAE: Schulman et al. 2016, arXiv:1506.02438",
        description=(
            "Actor-critic PPO: token-level GAE over the sampled tokens with a learned critic "
            "(value loss via turnrl.algos.value_loss), PPO clip, token mean."
        ),
    ),
}


def get_preset(name: str) -> AlgoPreset:
    """``PRESETS[name]`` with an error that lists the valid names (and a close match)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownNameError(
            unknown_name_message("algorithm preset", name, sorted(PRESETS))
        ) from None
