"""Training faults (issue 17, items 4-8) at the level of their pieces: SFT demonstrations
call the env through the rollouts' guard; a corrupt checkpoint is refused before anything
changes; a full disk is one clear error; a run dir is locked to one process; a full
context is reported as itself, not as an entropy collapse."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from turnrl.cli import main
from turnrl.config import load_config, save_config
from turnrl.envs.builtin.arithmetic import Arithmetic
from turnrl.io import DiskFullError, RunDirLocked, RunWriteError, lock_run_dir, run_write
from turnrl.rollout.guard import EnvCalls
from turnrl.rollout.stats import rollout_metrics
from turnrl.train.alarms import AlarmMonitor, default_rules
from turnrl.train.checkpoint import (
    CheckpointError,
    checkpoint_problem,
    resume_checkpoint,
    save_checkpoint,
)
from turnrl.train.hooks import alarm_details
from turnrl.train.sft import DatasetError, play_demonstrations
from turnrl.train.tracking import MetricsLogger
from turnrl.types import EpisodeCounts, StepResult, Trajectory


# ---------------------------------------------------------------- 4: SFT demonstrations
class Misbehaving(Arithmetic):
    """``arithmetic-v0`` (it has an oracle) whose episodes with an odd seed misbehave."""

    def __init__(self, mode: str) -> None:
        super().__init__(min_value=0, max_value=9)
        self.mode = mode

    def reset(self, *, seed=None, options=None):
        self.faulty = seed % 2 == 1
        return super().reset(seed=seed, options=options)

    def step(self, action: str):
        if self.faulty and self.mode == "hang":
            time.sleep(30)
        if self.faulty and self.mode == "garbage":
            return StepResult("not a list of messages", 1.0, True, False, {})
        if self.faulty and self.mode == "tuple":
            return [], 1.0, True, False, {}
        return super().step(action)

    def oracle_action(self):
        if self.faulty and self.mode == "oracle":
            return 42
        return super().oracle_action()


def test_a_hanging_env_step_in_sft_demonstrations_times_out() -> None:
    """Without the guard, SFT waited forever on a hung step (env.step_timeout_s ignored)."""
    start = time.perf_counter()
    demos = play_demonstrations(lambda: Misbehaving("hang"), range(4), random_action_prob=0.0,
                                calls=EnvCalls(step_timeout_s=0.3))
    assert time.perf_counter() - start < 10  # not 2 x 30 s
    assert len(demos.conversations) == 2 and len(demos.failures) == 2
    assert "did not return within 0.3 s (env.step_timeout_s)" in demos.failures[0]
    assert "env arithmetic-v0, seed 1, env.step at turn 0" in demos.failures[0]
    assert "turnrl play arithmetic-v0 --seed 1" in demos.failures[0]
    assert demos.metrics == {"sft/env_errors": 2.0, "sft/env_error_rate": 0.5}


@pytest.mark.parametrize(("mode", "expected"), [
    ("garbage", "StepResult.observation must be a list of"),
    ("tuple", "env.step must return turnrl.types.StepResult, got tuple"),
    ("oracle", "oracle_action must return a str (or None), got 42"),
])
def test_garbage_from_the_env_fails_the_demonstration_not_sft(tokenizer, mode, expected) -> None:
    """A garbage StepResult used to crash SFT later, in ledger_from_messages (TypeError)."""
    from turnrl.train.sft import conversations_to_trajectories

    demos = play_demonstrations(lambda: Misbehaving(mode), range(4), random_action_prob=0.0)
    assert len(demos.conversations) == 2
    assert all(expected in failure for failure in demos.failures)
    assert len(conversations_to_trajectories(tokenizer, demos.conversations)) == 2
    with pytest.raises(DatasetError, match="every oracle demonstration failed"):
        play_demonstrations(lambda: Misbehaving(mode), [1, 3], random_action_prob=0.0)


def test_on_error_score_keeps_what_a_failed_demonstration_played() -> None:
    """``env.on_error=score`` trains on what was played (here the oracle's one reply)."""
    demos = play_demonstrations(lambda: Misbehaving("garbage"), range(4),
                                random_action_prob=0.0, keep_failed=True)
    assert len(demos.conversations) == 4 and len(demos.failures) == 2
    assert demos.metrics["sft/env_error_rate"] == 0.5
    failed = demos.conversations[1]
    assert [m["role"] for m in failed] == ["user", "assistant"]


# ---------------------------------------------------------------- 5: corrupt checkpoints
@pytest.fixture
def run_with_checkpoints(tmp_path: Path, load_tiny, tokenizer) -> Path:
    """A run dir with complete checkpoints step_1 and step_2 (tiny model, AdamW state)."""
    policy = load_tiny()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    policy(torch.tensor([[1, 2, 3]])).logits.sum().backward()
    optimizer.step()
    for step in (1, 2):
        save_checkpoint(tmp_path, step, policy=policy, tokenizer=tokenizer,
                        optimizers={"policy": optimizer}, extra_state={"metrics_lines": step})
    return tmp_path


CORRUPTIONS = {
    "model.safetensors": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "state.json": lambda p: p.write_text('{"step": 2, "rng"'),
    "optimizer.pt": lambda p: p.write_bytes(b"\0" * 64),
}


def test_a_sound_checkpoint_has_no_problem(run_with_checkpoints: Path) -> None:
    run = run_with_checkpoints
    assert checkpoint_problem(run / "checkpoints" / "step_2") is None
    assert resume_checkpoint(run) == run / "checkpoints" / "step_2"
    for choice in ("step_1", "1", str(run / "checkpoints" / "step_1")):
        assert resume_checkpoint(run, choice) == run / "checkpoints" / "step_1"


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_a_corrupt_newest_checkpoint_is_refused_offering_the_previous(
        run_with_checkpoints: Path, name: str) -> None:
    run = run_with_checkpoints
    CORRUPTIONS[name](run / "checkpoints" / "step_2" / name)
    problem = checkpoint_problem(run / "checkpoints" / "step_2")
    assert problem is not None and name in problem
    with pytest.raises(CheckpointError) as refused:
        resume_checkpoint(run)
    message = str(refused.value)
    assert "step_2 is corrupt" in message and name in message and "\n" not in message
    assert f"turnrl train --resume {run} --resume-from step_1" in message
    assert resume_checkpoint(run, "step_1") == run / "checkpoints" / "step_1"


def test_no_sound_earlier_checkpoint_says_so(run_with_checkpoints: Path) -> None:
    run = run_with_checkpoints
    for step in (1, 2):
        (run / "checkpoints" / f"step_{step}" / "optimizer.pt").unlink()
    with pytest.raises(CheckpointError, match=r"missing optimizer\.pt\); nothing was changed; "
                                              r"no earlier checkpoint is sound"):
        resume_checkpoint(run)
    with pytest.raises(CheckpointError, match=r"--resume-from 'step_7': no checkpoint step_7 .*"
                                              r"complete ones: step_1, step_2"):
        resume_checkpoint(run, "step_7")


def resumable_run_dir(tmp_path: Path) -> Path:
    """A run dir as ``turnrl train`` leaves it after two steps (config, metrics), with
    hand-made checkpoints; ``metrics.jsonl`` has a line per step."""
    run = tmp_path / "run"
    save_config(load_config(None, [f"run.out_dir={tmp_path}", "run.name=run",
                                   "log.progress=false"]), run / "config.yaml")
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "phase": "train"}) + "\n"
                                               for s in (1, 2, 3)))
    return run


def test_the_cli_refuses_a_corrupt_checkpoint_in_one_line_and_touches_nothing(
        tmp_path: Path, load_tiny, tokenizer, capsys) -> None:
    run = resumable_run_dir(tmp_path)
    policy = load_tiny()
    for step in (1, 2):
        save_checkpoint(run, step, policy=policy, tokenizer=tokenizer,
                        optimizers={"policy": torch.optim.AdamW(policy.parameters())},
                        extra_state={"metrics_lines": step})
    (run / "checkpoints" / "step_2" / "state.json").write_text("{not json")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: checkpoint ") and err.count("\n") == 1
    assert "Traceback" not in err and "--resume-from step_1" in err
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == before  # metrics.jsonl not cut back, no checkpoint deleted
    assert main(["train", "--resume-from", "step_1"]) == 2
    assert "needs --resume RUN_DIR" in capsys.readouterr().err


def test_a_resume_override_past_the_models_positions_is_refused_before_anything(
        tmp_path: Path, load_tiny, tokenizer, capsys) -> None:
    run = resumable_run_dir(tmp_path)
    policy = load_tiny()
    save_checkpoint(run, 1, policy=policy, tokenizer=tokenizer,
                    optimizers={"policy": torch.optim.AdamW(policy.parameters())},
                    extra_state={"metrics_lines": 1})
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "rollout.max_context_tokens=100000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "rollout.max_context_tokens" in err and "2048" in err and "Traceback" not in err
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == before


# ---------------------------------------------------------------- 6: a full disk
@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
    OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)),
    RuntimeError("Error while serializing: IoError(No space left on device (os error 28))"),
])
def test_a_full_disk_becomes_one_line_naming_what_and_where(tmp_path: Path, error) -> None:
    with pytest.raises(DiskFullError) as full, run_write("checkpoint step_3", tmp_path,
                                                          needed=lambda: 3 * 1024 ** 2):
        raise error
    message = str(full.value)
    assert message.startswith(f"disk full while writing checkpoint step_3 to {tmp_path} "
                              "(needs about 3.0 MiB, ")
    assert "free)" in message and "\n" not in message


def test_other_write_errors_are_one_line_not_called_a_full_disk(tmp_path: Path) -> None:
    with pytest.raises(RunWriteError) as failed, run_write("metrics", tmp_path):
        raise PermissionError(errno.EACCES, "Permission denied")
    assert not isinstance(failed.value, DiskFullError)
    assert str(failed.value) == (f"could not write metrics to {tmp_path}: "
                                 "PermissionError: [Errno 13] Permission denied")


def test_errors_that_are_not_about_the_write_pass_unchanged(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="a bug"), run_write("metrics", tmp_path):
        raise ValueError("a bug")


class FullFile:
    """A file on a full disk."""

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def close(self) -> None:
        pass


def test_the_metrics_logger_reports_a_full_disk(tmp_path: Path) -> None:
    logger = MetricsLogger(tmp_path, tensorboard=False)
    logger.log(1, {"reward/mean": 1.0})
    logger._file.close()
    logger._file = FullFile()  # type: ignore[assignment]
    with pytest.raises(DiskFullError, match="disk full while writing the metrics of step 2 "
                                            f"to {tmp_path / 'metrics.jsonl'}"):
        logger.log(2, {"reward/mean": 2.0})
    assert logger.lines == 1


def test_a_checkpoint_that_meets_a_full_disk_leaves_no_half_directory(
        tmp_path: Path, load_tiny, tokenizer, monkeypatch) -> None:
    import turnrl.train.checkpoint as checkpoint

    policy = load_tiny()
    save_checkpoint(tmp_path, 1, policy=policy, tokenizer=tokenizer, optimizers={})

    def full(*args, **kwargs) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint, "atomic_write_text", full)
    with pytest.raises(DiskFullError, match=r"checkpoint step_2 .*needs about"):
        save_checkpoint(tmp_path, 2, policy=policy, tokenizer=tokenizer, optimizers={})
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_1"]


# ---------------------------------------------------------------- 7: the run-dir lock
HOLD = ("import sys, time; from pathlib import Path; from turnrl.io import lock_run_dir; "
        "lock = lock_run_dir(Path(sys.argv[1])); print('locked', flush=True); time.sleep(60)")


@pytest.fixture
def held_by_another_process(tmp_path: Path):
    """A run dir whose lock another process holds; yields (run dir, that process)."""
    run = resumable_run_dir(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    yield run, holder
    holder.kill()
    holder.wait(timeout=30)


def test_a_second_process_gets_a_clear_error_naming_the_holder(held_by_another_process,
                                                               capsys) -> None:
    run, holder = held_by_another_process
    with pytest.raises(RunDirLocked, match=f"pid {holder.pid}"):
        lock_run_dir(run)
    metrics = (run / "metrics.jsonl").read_bytes()
    assert main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {run} is in use by another turnrl process (pid {holder.pid}, "
                   f"holding {run / '.lock'}); wait for it to finish or stop it (kill "
                   f"{holder.pid}), then run this again\n")
    assert (run / "metrics.jsonl").read_bytes() == metrics


def test_the_lock_dies_with_its_process_even_by_sigkill(held_by_another_process) -> None:
    run, holder = held_by_another_process
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    lock = lock_run_dir(run)  # the stale lock file is taken over
    assert (run / ".lock").read_text().strip() == str(os.getpid())
    lock.release()
    lock_run_dir(run).release()  # released: it can be taken again


# ---------------------------------------------------------------- 8: a full context
def episode(overflow: bool, group: int = 0) -> Trajectory:
    return Trajectory(env_id="x-v0", seed=0, group_id=group, messages=[],
                      counts=EpisodeCounts(context_overflow=int(overflow)))


def test_the_context_overflow_rate_is_reported_when_there_is_one() -> None:
    assert "rollout/context_overflow_rate" not in rollout_metrics([episode(False)] * 4)
    rate = rollout_metrics([episode(True), episode(False), episode(True), episode(True)])
    assert rate["rollout/context_overflow_rate"] == 0.75


def test_a_full_context_raises_its_own_alarm_not_entropy_collapse() -> None:
    """Episodes that never got a turn have entropy 0: that used to be entropy_collapse."""
    monitor = AlarmMonitor(default_rules(), patience=2)
    empty = {"loss/entropy": 0.0, "rollout/sampled_tokens": 0.0, "rollout/repeated_outputs": 1.0,
             "reward/frac_zero_std_groups": 1.0, "rollout/context_overflow_rate": 1.0}
    monitor.check({"loss/entropy": 2.0, "rollout/sampled_tokens": 8.0})
    assert monitor.check(empty) == ([], {
        "alarm/entropy_collapse": 0.0, "alarm/reward_std_zero": 0.0,
        "alarm/length_collapse": 0.0, "alarm/repeated_outputs": 0.0,
        "alarm/context_overflow": 0.0})
    fired, flags = monitor.check(empty)
    assert fired == ["alarm/context_overflow"] and flags["alarm/entropy_collapse"] == 0.0
    details = alarm_details(fired, empty)
    assert "alarm/context_overflow (rollout/context_overflow_rate 1;" in details
    assert "raise rollout.max_context_tokens" in details and "shorten the prompts" in details


def test_the_overflow_alarm_is_quiet_and_unlisted_without_overflow() -> None:
    """Steps without an overflow report no rate: the rule's streak ends and it writes no
    flag (runs without overflow keep their metric names)."""
    monitor = AlarmMonitor(default_rules(), patience=2)
    monitor.check({"rollout/context_overflow_rate": 1.0})
    fired, flags = monitor.check({"loss/entropy": 0.0})
    assert "alarm/context_overflow" not in flags and fired == []
    fired, _ = monitor.check({"rollout/context_overflow_rate": 1.0})
    assert fired == []  # the streak started over
    fired, _ = monitor.check({"loss/entropy": 0.0})
    assert fired == ["alarm/entropy_collapse"]  # with the context fine, entropy is real
