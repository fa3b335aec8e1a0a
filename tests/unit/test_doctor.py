"""``turnrl doctor``: each check names what the run recorded and the key to change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnrl.config import load_config, save_config
from turnrl.train.doctor import as_json, diagnose


def write_run(root: Path, rows: list[dict], *overrides: str, episodes: list[dict] | None = None
              ) -> Path:
    run = root / "run"
    run.mkdir()
    save_config(load_config(None, ["env.id=arithmetic-v0", *overrides]), run / "config.yaml")
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if episodes is not None:
        (run / "samples").mkdir()
        (run / "samples" / "eval_0.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in episodes))
    return run


def sft(step: int, loss: float, empty: float = 0.0) -> dict:
    return {"step": step, "phase": "sft", "sft/loss": loss, "sft/tokens": 50.0,
            "sft/empty_demos": empty}


def train(step: int, **metrics: float) -> dict:
    return {"step": step, "phase": "train", "rollout/turns": 1.0,
            "rollout/length_finishes": 0.0, "reward/frac_zero_std_groups": 0.0, **metrics}


def evaluation(step: int, success: float, invalid: float = 0.0) -> dict:
    return {"step": step, "phase": "eval", "eval/success": success, "eval/turns": 1.0,
            "eval/invalid_actions": invalid}


def by_check(run: Path) -> dict:
    return {f.check: f for f in diagnose(run)}


def test_a_random_init_that_never_fitted_is_named_with_the_fix(tmp_path) -> None:
    rows = [*(sft(i, 1.39) for i in range(10)), evaluation(0, 0.0, invalid=0.9),
            *(train(i, **{"reward/frac_zero_std_groups": 1.0}) for i in range(1, 4)),
            evaluation(3, 0.0, invalid=0.9)]
    episodes = [{"seed": 10_000 + i, "messages": [
        {"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "7 7"}]}
        for i in range(4)]
    found = by_check(write_run(tmp_path, rows, "model.path=tiny-random", episodes=episodes))
    assert found["model"].level == "problem" and "model.path=tiny" in found["model"].fix
    assert found["sft_fit"].level == "problem"
    assert "1.390 -> 1.390" in found["sft_fit"].summary and "sft.epochs" in found["sft_fit"].fix
    assert found["sft_noise"].level == "problem"  # the defaults train random replies
    assert "sft.train_random_actions=false" in found["sft_noise"].fix
    assert found["valid_actions"].level == "problem"
    assert "90%" in found["valid_actions"].summary
    examples = found["valid_actions"].examples
    assert len(examples) == 3 and all(reply == "7 7" for _, reply, _ in examples)
    assert all(oracle.strip().lstrip("-").isdigit() for _, _, oracle in examples)  # arithmetic
    assert found["reward_spread"].level == "problem" and "train.group_size" in \
        found["reward_spread"].fix
    assert found["outcome"].level == "problem"
    assert json.loads(as_json(diagnose(tmp_path / "run")))[0]["check"] == "model"


def test_a_run_that_learned_has_no_problem(tmp_path) -> None:
    rows = [sft(0, 1.2), sft(1, 0.6), *(sft(i, 0.05) for i in range(2, 8)),
            evaluation(0, 0.4), *(train(i) for i in range(1, 4)), evaluation(3, 0.8)]
    found = by_check(write_run(tmp_path, rows, "model.path=tiny",
                               "sft.train_random_actions=false"))
    assert {f.level for f in found.values()} == {"ok"}
    assert "as context only" in found["sft_noise"].summary
    assert "0.400 at step 0 -> 0.800 at step 3" in found["outcome"].summary


@pytest.mark.parametrize("metrics, check, fix", [
    ({"rollout/length_finishes": 0.8}, "budget", "rollout.max_new_tokens="),
    ({"rollout/context_overflow_rate": 0.5}, "budget", "rollout.max_context_tokens"),
])
def test_budgets(tmp_path, metrics: dict, check: str, fix: str) -> None:
    rows = [sft(0, 0.05), evaluation(0, 0.4), train(1, **metrics), evaluation(1, 0.5)]
    found = by_check(write_run(tmp_path, rows))
    assert found[check].level == "problem" and fix in found[check].fix


def test_sft_batches_with_nothing_to_train(tmp_path) -> None:
    rows = [sft(i, 0.05, empty=300.0) for i in range(4)]  # a count: 300 of 1000
    found = by_check(write_run(tmp_path, rows, "sft.episodes=1000"))
    assert found["sft_empty"].level == "problem"
    assert "300 of the 1000 SFT demonstrations (30%)" in found["sft_empty"].summary
    assert "sft.train_random_actions=true" in found["sft_empty"].fix
