"""Exact resume: a deterministic CPU run killed with SIGKILL at an arbitrary moment and then
resumed ends with the same parameters and the same metrics.jsonl as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_train_loop import overrides

pytestmark = pytest.mark.slow

STEPS = 4


def argv(out_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "turnrl.cli", "train",
            *overrides(out_dir, f"train.steps={STEPS}", "train.checkpoint_every=1",
                       "train.keep_last=10", "run.deterministic=true", "log.tensorboard=false",
                       "log.progress=false", "run.name=run", *extra)]


def env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def comparable(run_dir: Path) -> list[dict]:
    """metrics.jsonl without wall-clock fields."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "time" and not k.startswith("perf/")}
            for r in records]


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "checkpoints" / f"step_{STEPS}" / "model.safetensors"))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted")
    subprocess.run(argv(out), check=True, env=env(), capture_output=True, timeout=600)
    return out / "run"


def kill_when(out: Path, ready, *extra: str) -> None:
    """Start the run, SIGKILL it as soon as ``ready(run_dir)`` holds, and check it died."""
    process = subprocess.Popen(argv(out, *extra), env=env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    run_dir = out / "run"
    deadline = time.monotonic() + 600
    while not ready(run_dir):
        assert process.poll() is None, "the run finished before the kill moment"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL


def train_records(run_dir: Path) -> int:
    path = run_dir / "metrics.jsonl"
    return path.read_text().count('"phase": "train"') if path.is_file() else 0


MOMENTS = {
    # during the SFT warm start: no checkpoint yet, the resumed run starts over
    "during SFT": lambda d: (d / "metrics.jsonl").is_file()
    and '"phase": "sft"' in (d / "metrics.jsonl").read_text(),
    # while (or just after) the step-2 checkpoint is written
    "during a checkpoint write": lambda d: (d / "checkpoints" / ".tmp_step_2").exists()
    or (d / "checkpoints" / "step_2").exists(),
    # after step 3 was logged, before its checkpoint is complete
    "after a logged step": lambda d: train_records(d) >= 3,
}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_killed_and_resumed_run_equals_the_uninterrupted_one(moment, uninterrupted,
                                                             tmp_path) -> None:
    kill_when(tmp_path, MOMENTS[moment])
    run_dir = tmp_path / "run"
    resumed = subprocess.run([sys.executable, "-m", "turnrl.cli", "train", "--resume",
                              str(run_dir)], env=env(), capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    want, got = final_weights(uninterrupted), final_weights(run_dir)
    assert want.keys() == got.keys()
    assert all(torch.equal(want[k], got[k]) for k in want)
    assert comparable(run_dir) == comparable(uninterrupted)
    # the clock goes on from the checkpoint: the time column never runs back, and the
    # wall time counts the seconds before the kill that the checkpoint kept
    records = (run_dir / "metrics.jsonl").read_text().splitlines()
    times = [json.loads(line)["time"] for line in records]
    assert times == sorted(times)
    assert json.loads((run_dir / "eval.json").read_text())["wall_time_s"] >= times[-1]


def test_a_resumed_run_keeps_its_kl_reference(tmp_path) -> None:
    """With a KL term the reference is the policy as RL first started (saved once in
    ``reference/``), not a copy of the policy the run resumes from."""
    kl = ("algo.kl_coef=0.5", "algo.kl_mode=loss")
    subprocess.run(argv(tmp_path / "whole", *kl), check=True, env=env(), capture_output=True,
                   timeout=600)
    kill_when(tmp_path / "killed", lambda d: train_records(d) >= 2, *kl)
    run_dir = tmp_path / "killed" / "run"
    resumed = subprocess.run([sys.executable, "-m", "turnrl.cli", "train", "--resume",
                              str(run_dir)], env=env(), capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert (run_dir / "reference" / "model.safetensors").is_file()
    whole = tmp_path / "whole" / "run"
    want, got = final_weights(whole), final_weights(run_dir)
    assert all(torch.equal(want[k], got[k]) for k in want)
    kl_values = [[r["loss/kl"] for r in comparable(d) if r["phase"] == "train"]
                 for d in (whole, run_dir)]
    assert kl_values[0] == kl_values[1] and max(kl_values[0]) > 0


def test_a_half_written_checkpoint_is_ignored(uninterrupted, tmp_path) -> None:
    """A crash mid-write leaves a temporary directory (and an incomplete step dir, if one were
    ever made by hand): --resume takes the newest complete checkpoint and cleans up."""
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(uninterrupted, run_dir)
    for step in (3, 4):
        shutil.rmtree(run_dir / "checkpoints" / f"step_{step}")
    half = run_dir / "checkpoints" / ".tmp_step_3"
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"\0" * 10)  # truncated
    broken = run_dir / "checkpoints" / "step_5"
    broken.mkdir()  # no state.json: not a complete checkpoint
    resumed = subprocess.run([sys.executable, "-m", "turnrl.cli", "train", "--resume",
                              str(run_dir)], env=env(), capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert not half.exists()
    want, got = final_weights(uninterrupted), final_weights(run_dir)
    assert all(torch.equal(want[k], got[k]) for k in want)
    assert comparable(run_dir) == comparable(uninterrupted)


def test_sigterm_saves_a_checkpoint_and_exits_cleanly(tmp_path) -> None:
    process = subprocess.Popen([*argv(tmp_path), "train.checkpoint_every=0"], env=env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_dir = tmp_path / "run"
    deadline = time.monotonic() + 600
    while train_records(run_dir) < 1:
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM after step" in err and "--resume" in err
    assert "Traceback" not in err
    saved = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert len(saved) == 1 and saved[0].startswith("step_")
    step = int(saved[0].split("_")[1])
    assert 1 <= step < STEPS and train_records(run_dir) == step
