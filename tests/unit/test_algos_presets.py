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
from turnrl.algos.registry import (
    CORRECTIONS,
    FILTERS,
    KL_PLACEMENTS,
    needs_learner_logprobs,
    register_advantage,
    resamples,
)
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
    assert PRESETS["dapo"].filters == ("dynamic_sampling",)
    assert resamples("dynamic_sampling") and PRESETS["dapo"].overlong_cache > 0
    assert all(not p.filters for name, p in PRESETS.items() if name != "dapo")
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
    assert preset.kl_mode in KL_PLACEMENTS and preset.is_correction in CORRECTIONS
    assert all(name in FILTERS for name in preset.filters)
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


def test_registries_of_filters_corrections_and_kl_placements() -> None:
    assert set(FILTERS.names()) >= {"dynamic_sampling", "truncated"}
    assert resamples("dynamic_sampling") and not resamples("truncated")
    assert set(CORRECTIONS.names()) >= {"none", "tis", "mask"}
    assert not needs_learner_logprobs("none")
    assert needs_learner_logprobs("tis") and needs_learner_logprobs("mask")
    assert set(KL_PLACEMENTS.names()) >= {"loss", "reward"}
    with pytest.raises(UnknownNameError, match="unknown batch filter"):
        resamples("dynamic_sampl")


def test_deprecated_filter_keys_still_work() -> None:
    from turnrl.config import load_config

    def filters(*overrides: str) -> tuple[str, ...]:
        return load_config(None, list(overrides)).algo.resolve().filters

    assert filters() == ()
    assert filters("algo.dynamic_sampling=true") == ("dynamic_sampling",)
    assert filters("algo.mask_truncated=true") == ("truncated",)
    assert filters("algo.preset=dapo", "algo.mask_truncated=true") == (
        "dynamic_sampling", "truncated")
    assert filters("algo.preset=dapo", "algo.dynamic_sampling=false") == ()
    assert filters("algo.preset=dapo", "algo.dynamic_sampling=true") == ("dynamic_sampling",)
    assert filters("algo.filters=[truncated]") == ("truncated",)


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


def test_a_deprecated_key_says_what_replaces_it(caplog: pytest.LogCaptureFixture) -> None:
    from turnrl.config import load_config

    with caplog.at_level("WARNING", logger="turnrl"):
        load_config(None, ["algo.mask_truncated=true"])
    assert "algo.mask_truncated is deprecated: use algo.filters" in caplog.text
    assert "[truncated]" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="turnrl"):
        load_config(None, ["algo.filters=[truncated]"])
    assert "deprecated" not in caplog.text


def test_every_preset_field_is_a_config_key() -> None:
    """AlgoPreset is the one algorithm schema: the algo section is generated from it."""
    import dataclasses

    from turnrl.algos.presets import AlgoPreset
    from turnrl.config import AlgoConfig

    keys = {f.name for f in dataclasses.fields(AlgoPreset) if not f.metadata.get("preset_only")}
    assert keys <= set(AlgoConfig.model_fields)
    assert set(AlgoConfig.model_fields) - keys == {"preset", "dynamic_sampling", "mask_truncated"}
    kl_coef = next(f for f in dataclasses.fields(AlgoPreset) if f.name == "kl_coef")
    assert AlgoConfig.model_fields["kl_coef"].description == kl_coef.metadata["doc"]
