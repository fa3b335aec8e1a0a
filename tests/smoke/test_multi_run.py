"""A run on a multi-agent env: SFT on the oracle's games in every role main plays, RL on
self-play or against a script, and evaluation against each opponent."""

from __future__ import annotations

import json

import pytest
from test_train_loop import SMALL_RUN

from turnrl.config import load_config
from turnrl.train.loop import train

pytestmark = pytest.mark.slow

TICTACTOE = ["env.id=tictactoe-v0", "rollout.max_new_tokens=4", "sft.episodes=60",
             "sft.epochs=2", "eval.episodes=4", "eval.samples_per_task=1"]


def samples(run_dir, step: int) -> list[dict]:
    path = run_dir / "samples" / f"step_{step}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_self_play_trains_both_roles_and_evaluates_against_each_opponent(tmp_path) -> None:
    result = train(load_config(None, [*SMALL_RUN, *TICTACTOE, f"run.out_dir={tmp_path}",
                                      "train.save_samples=64"]))
    assert result.after is not None
    for opponent in ("random", "oracle", "self"):
        rates = [result.after[f"vs_{opponent}/{k}"] for k in ("win", "draw", "loss")]
        assert sum(rates) == pytest.approx(1.0)  # every tic-tac-toe game has an outcome
    assert result.after["vs_oracle/win"] == 0.0  # minimax never loses
    kept = samples(result.run_dir, 1)
    assert {row["agent"] for row in kept} == {"x", "o"}
    for row in kept:  # role-conditioned groups: x on even ids, o on odd ones
        assert row["group_id"] % 2 == (row["agent"] == "o")
        assert sum(row["turn_rewards"]) in (-1.0, 0.0, 1.0)


def test_against_the_oracle_only_main_is_trained(tmp_path) -> None:
    result = train(load_config(None, [*SMALL_RUN, *TICTACTOE, f"run.out_dir={tmp_path}",
                                      "multi.agents={x: oracle}", "train.save_samples=64",
                                      "multi.eval_opponents=[random]"]))
    assert result.after is not None and "vs_self/win" not in result.after
    kept = samples(result.run_dir, 1)
    assert {row["agent"] for row in kept} == {"o"}
    assert all(sum(row["turn_rewards"]) <= 0 for row in kept)  # o never beats the oracle
