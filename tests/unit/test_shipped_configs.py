"""The configs shipped in ``configs/`` load, and their envs build as written (paths are
relative to the repository root, where ``turnrl train configs/<name>.yaml`` runs)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from turnrl.config import load_config
from turnrl.envs.registry import make

ROOT = Path(__file__).resolve().parents[2]
PRETRAIN = ROOT / "configs" / "pretrain.yaml"  # `turnrl pretrain`'s recipe, not a train config
CONFIGS = sorted(p for p in (ROOT / "configs").glob("*.yaml") if p != PRETRAIN)


def test_every_env_with_a_part1_config_is_covered():
    assert {path.stem for path in CONFIGS} >= {"default", "sokoban", "dataset"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.stem)
def test_a_shipped_config_loads_and_its_env_builds(path, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = load_config(path.relative_to(ROOT))
    env = make(cfg.env.id, **cfg.env.kwargs)
    if env.spec.agents:  # a multi-agent env: the first agent's conversation
        env.reset(seed=cfg.env.train_seed_start)
        assert env.observe(env.agent_selection) and env.oracle_action()
        return
    observation, _ = env.reset(seed=cfg.env.train_seed_start)
    assert observation and env.oracle_action()


def test_the_pretraining_recipe_loads_and_fits_its_model(monkeypatch):
    from turnrl.config import PretrainConfig
    from turnrl.pretrain.loop import check_pretrain_config

    monkeypatch.chdir(ROOT)
    cfg = load_config(PRETRAIN.relative_to(ROOT), schema=PretrainConfig)
    check_pretrain_config(cfg)
    assert cfg.corpus.short_steps < cfg.optim.steps


def test_the_dataset_config_sees_each_question_once_per_epoch_and_evaluates_all_held_out(
        monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = load_config("configs/dataset.yaml")
    train = make(cfg.env.id, **cfg.env.kwargs)
    test = make(cfg.env.id, **{**cfg.env.kwargs, "subset": "test"})
    assert (len(train.rows), len(test.rows)) == (cfg.sft.episodes, cfg.eval.episodes)
    questions = {row[0] for row in train.rows}
    assert not questions & {row[0] for row in test.rows}  # held out means unseen


def test_the_addition_data_is_what_its_script_writes(tmp_path):
    shipped = (ROOT / "configs" / "data" / "addition.jsonl").read_bytes()
    script = runpy.run_path(str(ROOT / "scripts" / "make_addition.py"))
    assert script["DATA"] == ROOT / "configs" / "data" / "addition.jsonl"
    script["write"](tmp_path / "addition.jsonl")
    assert (tmp_path / "addition.jsonl").read_bytes() == shipped
