"""Presets refer to registered names and pass only accepted kwargs; registry plumbing."""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import pytest

import turnrl.algos as algos
from turnrl.algos import (
    ADVANTAGES,
    AGGREGATIONS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    PRESETS,
    AlgoPreset,
    get_preset,
    needs_critic,
)
from turnrl.algos.registry import register_advantage
from turnrl.registry import UnknownNameError


def accepts(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
    params = inspect.signature(fn).parameters
    for key in kwargs:
        assert key in params, f"{fn.__name__} has no parameter {key!r}"
        assert params[key].kind is inspect.Parameter.KEYWORD_ONLY


def test_expected_presets() -> None:
    assert set(PRESETS) == {"grpo", "dr_grpo", "rloo", "reinforce_pp", "ppo",
                            "reinforce_pp_baseline", "gspo", "cispo", "turn_ppo", "trloo",
                            "turn_grpo", "gigpo", "dapo"}
    assert PRESETS["dapo"].dynamic_sampling and PRESETS["dapo"].overlong_cache > 0
    assert needs_critic(PRESETS["turn_ppo"].advantage)
    assert PRESETS["ppo"].advantage == "gae"
    assert needs_critic(PRESETS["ppo"].advantage)
    assert dict(PRESETS["dr_grpo"].adv_kwargs) == {"norm_std": False}
    assert "0.04" in PRESETS["grpo"].description


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_refers_to_registered_names_and_accepted_kwargs(name: str) -> None:
    preset = PRESETS[name]
    assert preset.paper and preset.description
    accepts(ADVANTAGES[preset.advantage], preset.adv_kwargs)
    accepts(POLICY_LOSSES[preset.policy_loss], preset.loss_kwargs)
    assert preset.loss_agg in AGGREGATIONS
    assert preset.kl_estimator in KL_ESTIMATORS
    assert preset.kl_coef >= 0 and preset.entropy_coef >= 0


def test_presets_are_frozen_plain_data() -> None:
    preset = PRESETS["grpo"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        preset.advantage = "rloo"  # type: ignore[misc]
    # each preset owns its kwargs: no dict is shared between presets or with the caller
    kwargs_ids = [id(p.loss_kwargs) for p in PRESETS.values()]
    assert len(set(kwargs_ids)) == len(kwargs_ids)
    mine = {"clip_high": 0.28}
    custom = AlgoPreset("rloo", {}, "ppo_clip", mine, "token_mean", kl_coef=0.01)
    mine["clip_high"] = 1.0
    assert custom.loss_kwargs == {"clip_high": 0.28}
    # plain data: copies, serialises, and derives variants with dataclasses.replace
    assert dataclasses.asdict(preset)["adv_kwargs"] == {"norm_std": True}
    assert copy.deepcopy(preset) == preset
    variant = dataclasses.replace(preset, loss_kwargs={"clip_high": 0.28}, kl_coef=0.04)
    assert variant.loss_kwargs == {"clip_high": 0.28} and preset.kl_coef == 0.0


def test_unknown_names_suggest_a_close_match() -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'grpo'"):
        get_preset("gpro")
    with pytest.raises(UnknownNameError, match="did you mean 'grpo'"):
        ADVANTAGES["gpro"]
    with pytest.raises(UnknownNameError, match="unknown advantage"):
        needs_critic("nope")


def test_duplicate_registration_is_an_error() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_advantage("grpo")(ADVANTAGES["grpo"])
    assert not needs_critic("grpo")  # the failed registration changed nothing


def test_package_exports() -> None:
    for name in algos.__all__:
        assert hasattr(algos, name)
    assert len(ADVANTAGES) >= 4 and len(POLICY_LOSSES) == 4
    for name, preset in PRESETS.items():  # every preset names registered functions
        assert preset.advantage in ADVANTAGES and preset.policy_loss in POLICY_LOSSES, name
