"""A run on a multi-agent env: SFT on the oracle's games in every role main plays, RL on
self-play or against a script, and evaluation against each opponent."""

from __future__ import annotations

import json

import pytest
import torch
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
    # the headline is the first opponent's, over every seating (x and o)
    assert result.after["success"] == pytest.approx(result.after["vs_random/success"])
    assert result.after["episodes"] == 2 * 4
    rows = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text()
            .splitlines()]
    step = next(r for r in rows if r["phase"] == "train")
    for agent in ("x", "o"):  # per role
        assert 0.0 <= step[f"rollout/role/{agent}/success"] <= 1.0
    # zero-sum self-play: x's mean return is minus o's when both replied in every game
    assert step["rollout/role/x/reward"] == pytest.approx(
        -step["rollout/role/o/reward"], abs=0.51)
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


def test_a_league_of_seatings_takes_turns_by_group(tmp_path) -> None:
    """multi.seatings: group i plays seating i % 2, here the model as x against the oracle,
    then as o against it; each group trains only the seat main holds in it."""
    result = train(load_config(None, [*SMALL_RUN, *TICTACTOE, f"run.out_dir={tmp_path}",
                                      "multi.seatings=[{o: oracle}, {x: oracle}]",
                                      "train.save_samples=64", "multi.eval_opponents=[random]"]))
    assert result.after is not None
    for step in (1, 2):
        kept = samples(result.run_dir, step)
        assert {row["agent"] for row in kept} == {"x", "o"}
        for row in kept:  # role-conditioned ids: 2 * group + (agent is o)
            group = row["group_id"] // 2
            assert row["agent"] == ("x" if group % 2 == 0 else "o")
            assert sum(row["turn_rewards"]) <= 0  # nobody beats the oracle


def test_a_pool_run_resumes_exactly(tmp_path) -> None:
    """Self-play against an opponent pool: a run stopped after step 2 and resumed ends with
    the same weights, the same metrics (ratings included) and the same pool as one that never
    stopped."""
    from safetensors.torch import load_file

    from turnrl.train.loop import train as run_train

    def overrides(out, steps: int) -> list[str]:
        return [*SMALL_RUN, *TICTACTOE, f"run.out_dir={out}", "run.name=run",
                "multi.agents={o: pool}", "multi.pool_every=1", "multi.pool_size=3",
                "multi.eval_opponents=[frozen]", f"train.steps={steps}",
                "train.checkpoint_every=1", "train.keep_last=10", "run.deterministic=true",
                "log.tensorboard=false", "log.report=false"]

    whole = run_train(load_config(None, overrides(tmp_path / "whole", 4)))
    run_train(load_config(None, overrides(tmp_path / "parts", 2)))
    resumed = run_train(load_config(None, overrides(tmp_path / "parts", 4)),
                        resume=tmp_path / "parts" / "run")

    def rows(run_dir):
        return [{k: v for k, v in json.loads(line).items()
                 if k != "time" and not k.startswith("perf/")}
                for line in (run_dir / "metrics.jsonl").read_text().splitlines()]

    train_rows = [r for r in rows(whole.run_dir) if r["phase"] == "train"]
    assert [r["multi/pool_size"] for r in train_rows] == [2.0, 3.0, 3.0, 3.0]
    assert [r for r in rows(resumed.run_dir) if r["phase"] == "train"] == train_rows
    state = json.loads((whole.run_dir / "checkpoints" / "step_4" / "state.json").read_text())
    again = json.loads((resumed.run_dir / "checkpoints" / "step_4" / "state.json").read_text())
    assert state["players"] == again["players"]
    assert state["players"]["members"] == ["start", "step_3", "step_4"]
    a = load_file(str(whole.run_dir / "checkpoints" / "step_4" / "model.safetensors"))
    b = load_file(str(resumed.run_dir / "checkpoints" / "step_4" / "model.safetensors"))
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


def test_a_checkpoint_of_another_run_plays_frozen_and_is_rated(tmp_path) -> None:
    """multi.frozen_models: a checkpoint of an earlier run plays o, never trains, is met in
    evaluation and rated against the model."""
    first = train(load_config(None, [*SMALL_RUN, *TICTACTOE, f"run.out_dir={tmp_path}",
                                     "run.name=first", "multi.eval_opponents=[random]"]))
    champion = first.run_dir / "checkpoints" / "step_3"
    from safetensors.torch import load_file

    before = load_file(str(champion / "model.safetensors"))
    result = train(load_config(None, [
        *SMALL_RUN, *TICTACTOE, f"run.out_dir={tmp_path}", "run.name=second",
        f"multi.frozen_models={{champion: {champion}}}", "multi.agents={o: champion}",
        "multi.eval_opponents=[champion, random]", "train.save_samples=64"]))
    assert result.after is not None
    rates = [result.after[f"vs_champion/{k}"] for k in ("win", "draw", "loss")]
    assert sum(rates) == pytest.approx(1.0)
    assert {row["agent"] for row in samples(result.run_dir, 1)} == {"x"}  # o is not trained
    rows = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text()
            .splitlines()]
    assert all("multi/rating" in r for r in rows if r["phase"] == "train")
    after = load_file(str(champion / "model.safetensors"))
    assert all(torch.equal(before[k], after[k]) for k in before)  # frozen: never written
