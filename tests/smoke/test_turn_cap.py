"""``rollout.max_turns``: a horizon curriculum caps training episodes step by step, and the
held-out evaluation plays to the env's own horizon (or ``eval.max_turns``)."""

from __future__ import annotations

import pytest

from fixture_runs import TINY
from turnrl.cli import main
from turnrl.report.episodes import read_samples
from turnrl.report.runs import load_run

pytestmark = pytest.mark.slow

TINY_MODEL = ["model.path=tiny-random", *(f"model.tiny.{key}={getattr(TINY, key)}" for key in (
    "hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size"))]


def assistant_turns(episode: dict) -> int:
    return sum(message["role"] == "assistant" for message in episode["messages"])


def test_a_curriculum_caps_each_steps_episodes_and_evaluation_is_uncapped(tmp_path):
    assert main(["train", "sft.enabled=false", "train.steps=3", "train.n_groups=2",
                 "train.group_size=2", "eval.episodes=4", "eval.before_training=false",
                 "rollout.max_new_tokens=4", "rollout.max_turns=[[0, 1], [2, 3]]",
                 "env.kwargs={hole_prob: 0.0}", "run.threads=1", "log.progress=false",
                 "log.report=false", *TINY_MODEL, f"run.out_dir={tmp_path}",
                 "run.name=cap"]) == 0
    run = load_run(tmp_path / "cap")
    assert [row["rollout/turn_cap"] for row in run.phase("train")] == [1.0, 1.0, 3.0]
    for step, cap in ((1, 1), (2, 1), (3, 3)):
        episodes = read_samples(run.samples_path(step))
        turns = [assistant_turns(e) for e in episodes]
        # an untrained model rarely reaches G: most episodes run into the cap
        assert max(turns) <= cap and turns.count(cap) >= len(turns) // 2
    evaluated = read_samples(tmp_path / "cap" / "samples" / "eval_3.jsonl")
    assert max(assistant_turns(e) for e in evaluated) > 3  # the env's 10, not the cap
