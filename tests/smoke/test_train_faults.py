"""Training through a misbehaving env: a run whose env raises on 10% of its steps still trains
and finishes; a run whose every episode fails stops with a clear error (exit status 1)."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_train_loop import EASY_ARITHMETIC, SMALL_RUN

from turnrl import envs
from turnrl.cli import main
from turnrl.config import load_config
from turnrl.envs import registry
from turnrl.envs.builtin.arithmetic import Arithmetic
from turnrl.envs.protocol import EnvSpec
from turnrl.train.loop import RolloutError, train

pytestmark = pytest.mark.slow

ID = "faulty-arithmetic-v0"
_steps = itertools.count(1)


class FaultyArithmetic(Arithmetic):
    """``arithmetic-v0`` whose every ``fail_every``-th step (over the process) raises."""

    def __init__(self, *, fail_every: int = 10, min_value: int = 0, max_value: int = 1) -> None:
        super().__init__(min_value=min_value, max_value=max_value)
        self.fail_every = fail_every
        self.spec = replace(envs.spec(ID), kwargs={"fail_every": fail_every,
                                                   "min_value": min_value,
                                                   "max_value": max_value})

    def step(self, action: str):
        if next(_steps) % self.fail_every == 0:
            raise RuntimeError("injected fault")
        return super().step(action)


@pytest.fixture(autouse=True)
def faulty_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered for the duration of each test only (check_env must not see it)."""
    monkeypatch.setitem(registry._SPECS, ID, EnvSpec(
        id=ID, entry_point=FaultyArithmetic, max_turns=1, has_oracle=True,
        description="arithmetic-v0 with injected step failures (tests only)"))


def faulty_run(out_dir: Path, fail_every: int, *extra: str) -> list[str]:
    easy = [o for o in EASY_ARITHMETIC if not o.startswith(("env.id", "env.kwargs"))]
    return [*SMALL_RUN, *easy, f"env.id={ID}", f"env.kwargs={{fail_every: {fail_every}}}",
            f"run.out_dir={out_dir}", *extra]


def test_a_run_whose_env_fails_on_10_percent_of_steps_trains_and_finishes(tmp_path) -> None:
    result = train(load_config(None, faulty_run(tmp_path, 10, "train.steps=4")))
    rows = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text()
            .splitlines() if '"phase": "train"' in line]
    assert len(rows) == 4 and result.after is not None
    errors = sum(r["rollout/env_errors"] for r in rows)
    episodes = sum(r["rollout/episodes"] + r["rollout/env_errors"] for r in rows)
    assert 0 < errors <= 0.2 * episodes  # about one step in ten failed...
    assert all(r["rollout/episodes"] == 8 - r["rollout/env_errors"] for r in rows)  # excluded
    assert all(r.get("loss/optimizer_steps", 0) >= 1 for r in rows)  # ...and every step trained


def test_a_run_whose_every_episode_fails_stops_with_a_clear_error(tmp_path, capsys) -> None:
    with pytest.raises(RolloutError, match="every episode of the last 2 batches failed"):
        train(load_config(None, faulty_run(tmp_path, 1, "env.max_failed_batches=2",
                                           "sft.enabled=false", "eval.before_training=false")))
    code = main(["train", *faulty_run(tmp_path / "cli", 1, "env.max_failed_batches=2",
                                      "sft.enabled=false", "eval.before_training=false")])
    err = capsys.readouterr().err
    assert code == 1
    assert "injected fault" in err and f"env {ID}" in err and "Traceback" not in err


def test_score_mode_also_stops_when_every_episode_fails(tmp_path) -> None:
    """Scored failures still count as failures: a batch in which every episode failed is not
    trained on, even though its episodes stay in the batch with error_reward."""
    with pytest.raises(RolloutError, match="every episode of the last 2 batches failed"):
        train(load_config(None, faulty_run(tmp_path, 1, "env.max_failed_batches=2",
                                           "env.on_error=score", "env.error_reward=-1",
                                           "sft.enabled=false", "eval.before_training=false")))
