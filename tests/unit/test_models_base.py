"""The built-in models by name: ``tiny`` is the shipped pretrained base (its weights, card and
recipe in the package), ``tiny-random`` the random init; both load as Hugging Face dirs."""

from __future__ import annotations

from pathlib import Path

import torch
import yaml
from safetensors.torch import load_file

from turnrl.cli import main
from turnrl.config import PretrainConfig, TinyConfig, default_config_path, load_config
from turnrl.models.base import builtin_model_dir, shipped_base_dir, shipped_shape, write_builtin
from turnrl.models.policy import load_policy, load_tokenizer
from turnrl.models.tiny import init_tiny_model
from turnrl.pretrain.probes import headline, run_probes
from turnrl.train.setup import model_source


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_shipped_base_is_a_whole_model_dir_with_its_card_and_recipe() -> None:
    base = shipped_base_dir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json", "README.md", "pretrain.yaml", "probes.md"):
        assert (base / name).is_file(), name
    tokenizer = load_tokenizer(base)
    model = load_policy(base, dtype=torch.float32, device=torch.device("cpu"))
    assert model.config.vocab_size == len(tokenizer) and tokenizer.chat_template
    assert shipped_shape() == TinyConfig()  # the default shape is the base's
    card = (base / "README.md").read_text()
    assert "turnrl pretrain" in card and "| copy@1024 | accuracy |" in card
    # the recipe shipped with the weights is the packaged configs/pretrain.yaml (in all that
    # decides the weights: where the run was written and how often it probed do not)
    recipe = yaml.safe_load((base / "pretrain.yaml").read_text())
    packaged = load_config(default_config_path("pretrain.yaml"), schema=PretrainConfig).model_dump(
        mode="json")
    for section in ("model", "corpus", "optim"):
        assert recipe[section] == packaged[section], section
    assert (recipe["run"]["seed"], recipe["run"]["threads"]) == (packaged["run"]["seed"],
                                                                 packaged["run"]["threads"])


def test_tiny_is_the_base_and_tiny_random_the_init(tmp_path: Path) -> None:
    base = load_config(None, ["model.path=tiny"])
    written = Path(model_source(base, tmp_path / "a"))
    assert same(weights(written), weights(shipped_base_dir()))
    shape = ["model.path=tiny-random", "model.tiny.hidden_size=32", "model.tiny.num_layers=1"]
    random_init = Path(model_source(load_config(None, shape), tmp_path / "b"))
    expected = init_tiny_model(tmp_path / "c", TinyConfig(hidden_size=32, num_layers=1))
    assert same(weights(random_init), weights(expected))
    assert same(weights(write_builtin("tiny", tmp_path / "d")), weights(shipped_base_dir()))
    scratch = builtin_model_dir("tiny-random")
    assert scratch is not None and same(weights(scratch), weights(init_tiny_model(
        tmp_path / "e")))
    assert builtin_model_dir("Qwen/Qwen2.5-0.5B") is None


def test_init_model_writes_the_base_or_with_random_the_init(tmp_path: Path, capsys) -> None:
    assert main(["init-model", str(tmp_path / "base")]) == 0
    assert "pretrained base" in capsys.readouterr().out
    assert same(weights(tmp_path / "base"), weights(shipped_base_dir()))
    assert (tmp_path / "base" / "README.md").is_file()
    assert main(["init-model", str(tmp_path / "random"), "--random"]) == 0
    assert same(weights(tmp_path / "random"), weights(init_tiny_model(tmp_path / "expected")))
    assert main(["init-model", str(tmp_path / "x"), "--hidden-size", "64"]) == 2
    assert "--random" in capsys.readouterr().err


def test_the_base_copies_and_calls_tools_where_the_random_init_cannot() -> None:
    scores = {}
    for name in ("tiny", "tiny-random"):
        path = builtin_model_dir(name)
        assert path is not None
        model = load_policy(path, dtype=torch.float32, device=torch.device("cpu"))
        scores[name] = headline(run_probes(model, load_tokenizer(path), 16))
    base, random_init = scores["tiny"], scores["tiny-random"]
    assert base["copy@64"] >= 0.95 and base["copy@256"] >= 0.95 and base["copy@1024"] >= 0.8
    assert base["tool_call"] >= 0.25 and base["choose"] >= 0.4
    assert max(random_init.values()) <= 0.15
