"""Checks before a run starts, one function at a time: algorithm hyperparameters against the
registered signatures, optional packages, model dirs read without their weights
(:mod:`turnrl.models.files`), and the config against the model and the env
(:mod:`turnrl.train.preflight`). The end-to-end cases through the CLI are in
``test_bad_inputs.py``."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from turnrl.algos import ADVANTAGES, POLICY_LOSSES, PRESETS
from turnrl.config import ConfigError, load_config
from turnrl.config.checks import check_algo_kwargs, check_packages, hyperparameter_problem
from turnrl.models.files import (
    adaptable_modules,
    check_safetensors,
    check_weights,
    read_config,
)
from turnrl.models.policy import ModelLoadError
from turnrl.models.tiny import build_tokenizer, llama_config
from turnrl.packages import installed
from turnrl.rewards import combine
from turnrl.train import preflight

# ---------------------------------------------------------------- algorithm hyperparameters


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_kwargs_bind_to_its_functions(name: str) -> None:
    cfg = load_config(None, [f"algo.preset={name}"])
    check_algo_kwargs(cfg, cfg.algo.resolve())


def test_hyperparameters_are_checked_by_name_and_type() -> None:
    ppo_clip = POLICY_LOSSES["ppo_clip"]
    assert hyperparameter_problem(ppo_clip, {"clip_low": 0.1, "clip_c": None}, leading=4,
                                  owner="policy loss 'ppo_clip'") is None
    assert hyperparameter_problem(ppo_clip, {"clip_high": 1}, leading=4, owner="x") is None
    unknown = hyperparameter_problem(ppo_clip, {"clip_hi": 0.3}, leading=4, owner="loss 'p'")
    assert unknown is not None and unknown.startswith("loss 'p' has no setting 'clip_hi'; "
                                                      "did you mean 'clip_high'?")
    # the leading arguments are the registry's, never settings
    assert "no setting 'logprobs'" in str(hyperparameter_problem(
        ppo_clip, {"logprobs": 1.0}, leading=4, owner="x"))
    wrong = hyperparameter_problem(ADVANTAGES["grpo"], {"norm_std": "yes"}, leading=1,
                                   owner="advantage 'grpo'")
    assert wrong == "norm_std of advantage 'grpo': expected bool, got 'yes' (str)"


def test_a_function_taking_any_keyword_accepts_any_setting() -> None:
    def advantage(inputs, **hparams):  # a user's estimator
        return inputs

    assert hyperparameter_problem(advantage, {"anything": 1}, leading=1, owner="x") is None


def test_preset_kwargs_kept_for_another_function_say_where_they_came_from() -> None:
    cfg = load_config(None, ["algo.preset=ppo", "algo.advantage=grpo"])
    with pytest.raises(ConfigError, match=r"override 'algo.advantage=grpo': algo.adv_kwargs: "
                       r"advantage 'grpo' has no setting 'gamma'.*the ppo preset's adv_kwargs"):
        check_algo_kwargs(cfg, cfg.algo.resolve())
    fixed = load_config(None, ["algo.preset=ppo", "algo.advantage=grpo", "algo.adv_kwargs={}"])
    check_algo_kwargs(fixed, fixed.algo.resolve())


# ---------------------------------------------------------------- optional packages


def test_installed_finds_without_importing(monkeypatch) -> None:
    assert installed("json") and not installed("no_such_module_xyz")
    assert not installed("no_such_package_xyz.sub")
    monkeypatch.setitem(sys.modules, "json", None)
    assert not installed("json")


@pytest.mark.parametrize(("override", "module", "fix"), [
    ("log.wandb=true", "wandb", "pip install wandb (or set log.wandb=false)"),
    ("log.mlflow=true", "mlflow", "pip install mlflow (or set log.mlflow=false)"),
    ("model.lora.enabled=true", "peft", "pip install peft"),
    ("distributed.backend=ray", "ray", "pip install 'turnrl[ray]' (or set "
                                       "distributed.backend=none)"),
])
def test_a_missing_optional_package_is_named_with_its_install_line(override, module, fix,
                                                                   monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigError) as info:
        check_packages(load_config(None, [override]))
    assert f"{override} needs" in str(info.value) and fix in str(info.value)


def test_packages_not_asked_for_are_not_needed(monkeypatch) -> None:
    for module in ("wandb", "mlflow", "peft", "ray"):
        monkeypatch.setitem(sys.modules, module, None)
    check_packages(load_config(None))


# ---------------------------------------------------------------- model files


def test_a_whole_safetensors_file_passes_and_a_cut_one_names_its_sizes(tmp_path: Path) -> None:
    file = tmp_path / "model.safetensors"
    save_file({"a": torch.zeros(64), "b": torch.ones(8, 8)}, str(file))
    check_safetensors("m", file)
    data = file.read_bytes()
    file.write_bytes(data[:-1])
    with pytest.raises(ModelLoadError, match=rf"is truncated: its tensors end at byte "
                       rf"{len(data)} but the file has {len(data) - 1} bytes"):
        check_safetensors("m", file)
    file.write_bytes(data[:5])
    with pytest.raises(ModelLoadError, match="shorter than its own header"):
        check_safetensors("m", file)


def test_model_dir_checks(tmp_path: Path, tiny_model_dir: Path) -> None:
    check_weights(str(tiny_model_dir))
    assert read_config(str(tiny_model_dir)).max_position_embeddings == 2048
    broken = Path(shutil.copytree(tiny_model_dir, tmp_path / "m"))
    (broken / "config.json").write_text("[1, 2]")
    with pytest.raises(ModelLoadError, match=r"config\.json must hold a JSON object"):
        read_config(str(broken))
    (broken / "model.safetensors.index.json").write_text(json.dumps({"weights": {}}))
    with pytest.raises(ModelLoadError, match="has no 'weight_map'"):
        check_weights(str(broken))


def test_a_lora_checkpoint_has_no_config_to_check(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "x"}))
    assert read_config(str(tmp_path)) is None


def test_adaptable_modules_come_from_a_meta_model() -> None:
    names = adaptable_modules(llama_config(len(build_tokenizer())))
    assert names is not None
    assert "model.layers.0.self_attn.q_proj" in names and "lm_head" in names
    assert "model.layers.0.mlp" not in names  # a container, not a layer


# ---------------------------------------------------------------- the config against the run


def test_lora_targets_match_as_peft_matches_them() -> None:
    for targets in ("[q_proj,v_proj]", "[self_attn.q_proj]", "[model.layers.0.mlp.up_proj]"):
        cfg = load_config(None, ["model.lora.enabled=true",
                                 f"model.lora.target_modules={targets}"])
        preflight.check_model(cfg)
    cfg = load_config(None, ["model.lora.enabled=true", "model.lora.target_modules=[attn.q]"])
    with pytest.raises(ConfigError, match=r"'attn\.q' matches no layer of the tiny model"):
        preflight.check_model(cfg)


def test_lora_targets_are_not_checked_when_lora_is_off() -> None:
    preflight.check_model(load_config(None, ["model.lora.target_modules=[nothing]"]))


def test_context_budget_fits_the_tiny_model_it_describes() -> None:
    preflight.check_model(load_config(None, ["rollout.max_context_tokens=2048"]))
    random_init = ["model.path=tiny-random"]
    preflight.check_model(load_config(None, [*random_init, "rollout.max_context_tokens=4096",
                                             "model.tiny.max_position_embeddings=4096"]))
    with pytest.raises(ConfigError, match=r"512 positions \(model.tiny.max_position_embeddings"
                       r"\); set rollout.max_context_tokens <= 512"):
        preflight.check_model(load_config(None, [*random_init,
                                                 "model.tiny.max_position_embeddings=512"]))
    with pytest.raises(ConfigError, match=r"2048 positions \(max_position_embeddings of the "
                       r"built-in base \(model.path=tiny\)\)"):
        preflight.check_model(load_config(None, ["rollout.max_context_tokens=4096"]))


def test_the_base_keeps_its_shape() -> None:
    with pytest.raises(ConfigError, match=r"model.tiny.num_layers=2 shapes the random init "
                       r"\(model.path=tiny-random\), but model.path=tiny is the pretrained "
                       r"base, whose num_layers is 4"):
        preflight.check_model(load_config(None, ["model.tiny.num_layers=2"]))


def test_a_reference_reward_needs_an_env_with_answers_or_its_own() -> None:
    def check(*overrides: str) -> None:
        cfg = load_config(None, ["env.kwargs={}", *overrides])
        preflight.check_rewards(cfg, combine(cfg.reward.terms) if cfg.reward.terms else None)

    check("env.id=dataset-v0", "reward.terms=[exact_match, f1]")  # info['answer'] at reset
    check("reward.terms=[{name: exact_match, kwargs: {answer: '42'}}]")  # its own reference
    check("reward.terms=[tool_cost, grounded]")  # no reference read: the env is not reset
    check()
    with pytest.raises(ConfigError, match=r"reward.terms\[1\] \(exact_match\): compares the "
                       r"final answer with a reference, but env 'frozenlake-v0' gives none"):
        check("reward.terms=[tool_cost, exact_match]")


def test_terms_declare_whether_they_read_a_reference() -> None:
    terms = combine(["exact_match", "f1", "math_verify", "grounded", "tool_cost",
                     {"name": "f1", "label": "f1_given", "kwargs": {"answer": "x"}}]).terms
    assert [t.needs_reference for t in terms] == [True, True, True, False, False, False]
