"""Training through faults: a run whose env raises on 10% of its steps still trains and
finishes; a run whose every episode fails stops with a clear error (exit status 1); the SFT
warm start survives a hanging or garbage-returning env; a corrupt newest checkpoint is
refused and an earlier one resumed from; a full disk stops a run resumably; a prompt longer
than the context stops it as a context overflow, not as an entropy collapse."""

from __future__ import annotations

import errno
import itertools
import json
import os
import time
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
from turnrl.types import StepResult

pytestmark = pytest.mark.slow

ID = "faulty-arithmetic-v0"
_steps = itertools.count(1)


class FaultyArithmetic(Arithmetic):
    """``arithmetic-v0`` whose every ``fail_every``-th step (over the process) raises, hangs
    (``mode="hang"``, for 30 s) or returns garbage (``mode="garbage"``)."""

    def __init__(self, *, fail_every: int = 10, mode: str = "raise", min_value: int = 0,
                 max_value: int = 1) -> None:
        super().__init__(min_value=min_value, max_value=max_value)
        self.fail_every, self.mode = fail_every, mode
        self.spec = replace(envs.spec(ID), kwargs={"fail_every": fail_every, "mode": mode,
                                                   "min_value": min_value,
                                                   "max_value": max_value})

    def step(self, action: str):
        if next(_steps) % self.fail_every == 0:
            if self.mode == "hang":
                time.sleep(30)
            elif self.mode == "garbage":
                return StepResult("plain text", 1.0, True, False, {})
            else:
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


# ---------------------------------------------------------------- the SFT warm start
@pytest.mark.parametrize("mode", ["hang", "garbage"])
def test_sft_demonstrations_go_through_the_guarded_env_calls(tmp_path, mode) -> None:
    """A hanging step used to hang the SFT warm start forever (env.step_timeout_s was
    ignored there), a garbage StepResult to crash it in ledger_from_messages."""
    start = time.perf_counter()
    result = train(load_config(None, [
        *faulty_run(tmp_path, 10), f"env.kwargs={{fail_every: 10, mode: {mode}}}",
        "env.step_timeout_s=0.5", "train.steps=1", "eval.before_training=false",
        "eval.episodes=4", "log.tensorboard=false"]))
    assert time.perf_counter() - start < 120
    records = [json.loads(line) for line in
               (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    counted = [r for r in records if "sft/env_errors" in r]
    assert len(counted) == 1 and counted[0]["phase"] == "sft"
    assert 3 <= counted[0]["sft/env_errors"] <= 7  # one SFT step in ten (of 50) failed
    assert any("sft/loss" in r for r in records) and result.after is not None


# ---------------------------------------------------------------- resuming and the disk
def small_run(out_dir: Path, *extra: str) -> list[str]:
    return [*SMALL_RUN, *EASY_ARITHMETIC, f"run.out_dir={out_dir}", "run.name=run",
            "sft.enabled=false", "eval.before_training=false", "eval.episodes=2",
            "log.tensorboard=false", "train.checkpoint_every=1", "train.keep_last=5", *extra]


def error_lines(err: str) -> list[str]:
    """The ``error:`` lines of stderr (which also has the libraries' progress bars)."""
    return [line for line in err.replace("\r", "\n").splitlines() if line.startswith("error")]


def train_steps(run_dir: Path) -> list[int]:
    return [json.loads(line)["step"] for line in
            (run_dir / "metrics.jsonl").read_text().splitlines() if '"phase": "train"' in line]


def test_a_corrupt_newest_checkpoint_is_refused_and_an_earlier_one_resumed(
        tmp_path, capsys) -> None:
    assert main(["train", *small_run(tmp_path, "train.steps=2")]) == 0
    run_dir = tmp_path / "run"
    weights = run_dir / "checkpoints" / "step_2" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    metrics = (run_dir / "metrics.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["train", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    (line,) = error_lines(err)
    assert line.startswith(f"error: checkpoint {run_dir / 'checkpoints' / 'step_2'} is corrupt "
                           "(model.safetensors does not load: ")
    assert "Traceback" not in err
    assert line.endswith(f"`turnrl train --resume {run_dir} --resume-from step_1`")
    assert (run_dir / "metrics.jsonl").read_bytes() == metrics  # no rows lost for nothing

    assert main(["train", "--resume", str(run_dir), "--resume-from", "step_1"]) == 0
    assert train_steps(run_dir) == [1, 2]  # step 2 replayed once, from step_1
    assert len(weights.read_bytes()) > 100  # and checkpointed again, whole


@pytest.mark.parametrize(("target", "code"), [("samples", errno.ENOSPC),
                                               ("checkpoint", errno.ENOSPC),
                                               ("samples", errno.EACCES),
                                               ("checkpoint", errno.EROFS)])
def test_a_failed_write_stops_the_run_in_one_line_and_it_resumes(
        tmp_path, capsys, monkeypatch, target, code) -> None:
    """A full disk, and any other write failure (issue 41: a PermissionError on the samples
    file was a raw traceback): one line naming what, where and why; metrics and the last
    whole checkpoint kept; the run resumes."""
    import turnrl.train.checkpoint as checkpoint
    import turnrl.train.samples as samples

    module = samples if target == "samples" else checkpoint
    real = module.atomic_write_text
    calls = itertools.count(1)

    def failing(path, text) -> None:  # the third write fails
        if next(calls) == 3:
            raise OSError(code, os.strerror(code), str(path))
        real(path, text)

    monkeypatch.setattr(module, "atomic_write_text", failing)
    capsys.readouterr()
    assert main(["train", *small_run(tmp_path, "train.steps=4")]) == 1
    err = capsys.readouterr().err
    run_dir = tmp_path / "run"
    what = "the samples of step 3" if target == "samples" else "checkpoint step_3"
    (line,) = error_lines(err)
    if code == errno.ENOSPC:
        assert line.startswith(f"error: disk full while writing {what} to {run_dir}")
        assert "free space (or move run.out_dir)" in line
    else:
        assert line.startswith(f"error: could not write {what} to {run_dir}")
        assert f"[Errno {code}] {os.strerror(code)}" in line and "disk full" not in line
        assert "make the path writable" in line
    assert "Traceback" not in err
    assert line.endswith(f"resume with `turnrl train --resume {run_dir}`")
    assert not list((run_dir / "checkpoints").glob(".tmp_*"))  # no half checkpoint left
    kept = train_steps(run_dir)
    assert kept == ([1, 2] if target == "samples" else [1, 2, 3])  # every logged row kept

    monkeypatch.setattr(module, "atomic_write_text", real)
    assert main(["train", "--resume", str(run_dir)]) == 0
    assert train_steps(run_dir) == [1, 2, 3, 4]


def test_run_directories_are_private_to_their_owner(tmp_path) -> None:
    from turnrl.io import new_run_dir

    old = os.umask(0)  # even a permissive umask leaves other users out
    try:
        first, second = new_run_dir(tmp_path / "runs", "r"), new_run_dir(tmp_path / "runs", "r")
    finally:
        os.umask(old)
    assert second.name == "r-2"
    assert all((d.stat().st_mode & 0o777) == 0o700 for d in (first, second))


# ---------------------------------------------------------------- a full context
def test_a_prompt_longer_than_the_context_is_a_context_overflow(tmp_path, capsys) -> None:
    """It used to stop the run as alarm/entropy_collapse (no sampled tokens: entropy 0)."""
    capsys.readouterr()
    code = main(["train", *small_run(tmp_path, "train.steps=3", "rollout.max_context_tokens=12",
                                     "alarms.on_alarm=stop")])
    err = capsys.readouterr().err
    assert code == 1
    (line,) = error_lines(err)
    assert "alarm/context_overflow (rollout/context_overflow_rate 1" in line
    assert "raise rollout.max_context_tokens" in line and "entropy" not in line
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
            if '"phase": "train"' in x]
    assert [r["rollout/context_overflow_rate"] for r in rows] == [1.0, 1.0]
    # no token was sampled: there is no entropy to report, so the entropy rule has nothing to read
    assert all("loss/entropy" not in r and r.get("alarm/entropy_collapse", 0.0) == 0.0
               for r in rows)
