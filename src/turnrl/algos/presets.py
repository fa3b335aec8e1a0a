"""Named algorithm presets: a paper's method as a bundle of registry keys (data, never branches).

``PRESETS["grpo"]`` says which advantage estimator, policy loss, aggregation and KL settings
the method uses; the learner reads the keys and looks the functions up in the registries.
Each preset owns fresh kwargs dicts (copied on construction); treat ``PRESETS`` as read-only
and derive variants with ``dataclasses.replace(preset, adv_kwargs={...})``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from turnrl.registry import UnknownNameError
from turnrl.wording import unknown_name_message

__all__ = ["PRESETS", "AlgoPreset", "get_preset"]


def documented(default: Any, doc: str, **bounds: float) -> Any:
    """A preset field: its default, its one-line documentation and its numeric bounds
    (``ge``, ``gt``), read by the config schema that overrides it (``algo.<name>``)."""
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata={"doc": doc, **bounds})
    return field(default=default, metadata={"doc": doc, **bounds})


@dataclass(frozen=True)
class AlgoPreset:
    """One method: ``ADVANTAGES[advantage](inputs, **adv_kwargs)``, then
    ``POLICY_LOSSES[policy_loss](..., **loss_kwargs)`` aggregated by ``AGGREGATIONS[loss_agg]``,
    plus ``kl_coef · KL_ESTIMATORS[kl_estimator]`` placed by ``KL_PLACEMENTS[kl_mode]``,
    ``−entropy_coef · entropy``, the behaviour correction ``CORRECTIONS[is_correction]`` and
    the batch ``FILTERS`` named in ``filters``.

    This is the one schema of an algorithm: the config's ``algo`` section is generated from
    these fields (each ``algo.<field>`` overrides the preset's value), so a field documented
    here is a config key.
    """

    advantage: str = documented("grpo", "Advantage estimator name (turnrl algos lists them).")
    adv_kwargs: dict[str, Any] = documented({}, "Hyperparameters of the advantage estimator.")
    policy_loss: str = documented("ppo_clip", "Policy loss name.")
    loss_kwargs: dict[str, Any] = documented({}, "Policy loss hyperparameters.")
    loss_agg: str = documented(
        "token_mean", "Loss aggregation: token_mean, seq_mean_token_mean, seq_mean_token_sum, "
        "seq_mean_token_sum_norm.")
    kl_coef: float = documented(0.0, "Weight of the KL penalty to the frozen reference.", ge=0)
    kl_estimator: str = documented("k3", "KL estimator: k1, k2 or k3.")
    kl_mode: str = documented(
        "loss", "Where the KL goes (KL_PLACEMENTS): loss (+ kl_coef·KL in the loss) or reward "
        "(− kl_coef·KL per token, in the turn rewards).")
    kl_target: float | None = documented(
        None, "Adapt kl_coef each step towards this per-token KL (Ziegler et al. 2019; None: "
        "fixed).", gt=0)
    entropy_coef: float = documented(0.0, "Weight of the entropy bonus.")
    is_correction: str = documented(
        "none", "Behaviour-policy correction (CORRECTIONS): none, tis (truncated IS) or mask "
        "(masked IS): the ratio is taken against the learner's own old log-probs and the loss "
        "weighted by the capped ratio to the sampling log-probs.")
    is_threshold: float = documented(2.0, "Truncation threshold C of the correction.", gt=0)
    value_clip: float | None = documented(
        None, "Critic presets: clip the new value to old ± this (PPO value clipping).", gt=0)
    filters: tuple[str, ...] = documented(
        (), "Batch filters (FILTERS): dynamic_sampling drops groups whose rewards are all equal "
        "and samples more (up to train.max_sampling_tries collections a step); truncated "
        "masks the loss of truncated episodes.")
    overlong_cache: int = documented(
        0, "DAPO soft overlong penalty: turns longer than rollout.max_new_tokens minus this "
        "many tokens are penalised; 0 = off.", ge=0)
    bootstrap_truncated: bool = documented(
        False, "Critic estimators (gae, turn_gae): bootstrap a truncated episode from the "
        "critic's value of its last state (Gymnasium time-limit semantics) instead of ending "
        "it with value 0. Off by default: an env's turn budget is part of the task (running "
        "out of turns fails it), and bootstrapping it pays a stalling policy the critic's "
        "estimate.")
    paper: str = field(default="", metadata={"preset_only": True})
    description: str = field(default="", metadata={"preset_only": True})

    def __post_init__(self) -> None:
        # own copies: presets never share a kwargs dict (nor alias the caller's)
        object.__setattr__(self, "adv_kwargs", dict(self.adv_kwargs))
        object.__setattr__(self, "loss_kwargs", dict(self.loss_kwargs))
        object.__setattr__(self, "filters", tuple(self.filters))


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
        adv_kwargs={"gamma": 1.0, "lam": 1.0, "whiten": True},
        policy_loss="ppo_clip",
        loss_kwargs=_PPO_CLIP,
        loss_agg="token_mean",
        paper="Schulman et al. 2017, arXiv:1707.06347; GAE: Schulman et al. 2016, arXiv:1506.02438",
        description=(
            "Actor-critic PPO: token-level GAE over the sampled tokens with a learned critic "
            "(value loss via turnrl.algos.value_loss), PPO clip, token mean. gamma = lam = 1 "
            "and batch-whitened advantages, as verl's PPO defaults."
        ),
    ),
    "dapo": AlgoPreset(
        advantage="grpo",
        adv_kwargs={"norm_std": True},
        policy_loss="ppo_clip",
        loss_kwargs={"clip_low": 0.2, "clip_high": 0.28},
        loss_agg="token_mean",
        filters=("dynamic_sampling",),
        overlong_cache=4,
        paper="Yu et al. 2025, DAPO, arXiv:2503.14476",
        description=(
            "GRPO advantages with clip-higher (0.2/0.28), token-mean loss, dynamic sampling "
            "(groups with equal rewards are dropped and replaced) and the soft overlong "
            "penalty on each turn (cache 4 tokens below rollout.max_new_tokens)."
        ),
    ),
    "reinforce_pp_baseline": AlgoPreset(
        advantage="reinforce_pp_baseline",
        adv_kwargs={"gamma": 1.0},
        policy_loss="ppo_clip",
        loss_kwargs=_PPO_CLIP,
        loss_agg="token_mean",
        paper="Hu et al. 2025, REINFORCE++ (baseline variant), arXiv:2501.03262",
        description="Group-mean baseline, then whitening over the batch; PPO clip, token mean.",
    ),
    "gspo": AlgoPreset(
        advantage="grpo",
        adv_kwargs={"norm_std": True},
        policy_loss="gspo",
        loss_kwargs={"clip_low": 3e-4, "clip_high": 4e-4},
        loss_agg="seq_mean_token_mean",
        paper="Zheng et al. 2025, Group Sequence Policy Optimization, arXiv:2507.18071",
        description="GRPO advantages with a sequence-level importance ratio and clip.",
    ),
    "cispo": AlgoPreset(
        advantage="grpo",
        adv_kwargs={"norm_std": True},
        policy_loss="cispo",
        loss_kwargs={"clip_high": 5.0},
        loss_agg="token_mean",
        paper="MiniMax 2025, MiniMax-M1, arXiv:2506.13585",
        description="GRPO advantages; clipped stop-gradient IS weight times log-prob (CISPO).",
    ),
    "turn_ppo": AlgoPreset(
        advantage="turn_gae",
        adv_kwargs={"gamma": 1.0, "lam": 1.0, "whiten": True},
        policy_loss="ppo_clip",
        loss_kwargs=_PPO_CLIP,
        loss_agg="token_mean",
        paper="GAE (Schulman et al. 2016, arXiv:1506.02438) with turns as steps, as the "
        "utterance-level critic of ArCHer (Zhou et al. 2024, arXiv:2402.19446)",
        description=(
            "Actor-critic PPO on the turn-level MDP: the critic values the state at the start "
            "of each turn; every token of turn k gets A_k (gamma = lam = 1, whitened, as ppo)."
        ),
    ),
    "trloo": AlgoPreset(
        advantage="trloo",
        adv_kwargs={"gamma": 1.0},
        policy_loss="ppo_clip",
        loss_kwargs=_PPO_CLIP,
        loss_agg="token_mean",
        paper="Kool et al. 2019 leave-one-out baseline, per turn; Ahmadian et al. 2024",
        description="Turn-level leave-one-out baseline over the group's episodes.",
    ),
    "turn_grpo": AlgoPreset(
        advantage="turn_grpo",
        adv_kwargs={"gamma": 1.0},
        policy_loss="ppo_clip",
        loss_kwargs=_PPO_CLIP,
        loss_agg="seq_mean_token_mean",
        paper="Shao et al. 2024 (GRPO with process supervision), on turn returns-to-go",
        description="Per-turn return-to-go normalised over all turns of the group.",
    ),
    "gigpo": AlgoPreset(
        advantage="gigpo",
        adv_kwargs={"omega": 1.0, "gamma": 1.0, "norm_std": True},
        policy_loss="ppo_clip",
        loss_kwargs=_PPO_CLIP,
        loss_agg="seq_mean_token_mean",
        paper="Feng et al. 2025, Group-in-Group Policy Optimization, arXiv:2505.10978",
        description=(
            "Episode-level GRPO advantage plus a step-level one over turns of the group that "
            "share an env state (needs an env with state keys)."
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
