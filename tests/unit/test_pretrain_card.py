"""The model card's command: the shipped recipe plus an override for each key that made these
weights differently, so that running it makes the same config again."""

from __future__ import annotations

import shlex
from importlib import resources
from pathlib import Path

from turnrl.config import PretrainConfig, load_config
from turnrl.pretrain.card import reproduce_command

RECIPE = Path(str(resources.files("turnrl") / "configs" / "pretrain.yaml"))


def recipe(*overrides: str) -> PretrainConfig:
    return load_config(RECIPE, list(overrides), schema=PretrainConfig)


def without_outputs(cfg: PretrainConfig) -> dict:
    dumped = cfg.model_dump(mode="json")
    dumped["run"] = {k: v for k, v in dumped["run"].items() if k not in ("name", "out_dir")}
    dumped.pop("log")
    return dumped


def test_the_shipped_recipe_is_the_bare_command() -> None:
    assert reproduce_command(recipe()) == "turnrl pretrain configs/pretrain.yaml"
    assert reproduce_command(recipe("run.out_dir=/tmp/x", "run.name=other",
                                    "log.progress=false")) \
        == "turnrl pretrain configs/pretrain.yaml"


def test_the_command_names_every_changed_key_and_makes_the_same_config() -> None:
    cfg = recipe("model.hidden_size=192", "model.num_heads=6", "optim.steps=2000",
                 "corpus.shares={copy: 1, lookup: 0.5}", "optim.lr=0.001",
                 "run.out_dir=/tmp/elsewhere")
    command = reproduce_command(cfg)
    words = shlex.split(command)
    assert words[:3] == ["turnrl", "pretrain", "configs/pretrain.yaml"]
    assert sorted(w.split("=")[0] for w in words[3:]) == [
        "corpus.shares", "model.hidden_size", "model.num_heads", "optim.lr", "optim.steps"]
    assert "run.out_dir" not in command
    assert without_outputs(recipe(*words[3:])) == without_outputs(cfg)
