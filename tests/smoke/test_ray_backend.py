"""The Ray backend on a local Ray instance (2 CPUs): env workers play the in-process
episodes, killed workers are restarted and their groups replayed, async mode with
``max_staleness=0`` is sync mode, and two gloo learners train as one."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_train_loop import EASY_ARITHMETIC, SMALL_RUN, TINY_MODEL

from turnrl.config import load_config
from turnrl.config.checks import validate
from turnrl.train import scaleout
from turnrl.train.loop import train
from turnrl.train.setup import Run, local_play, open_run
from turnrl.types import Trajectory

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False, _system_config={"worker_niceness": 0})
    yield
    ray.shutdown()


def open_test_run(out: Path, *extra: str) -> Run:
    return open_run(validate(load_config("configs/default.yaml", [
        *TINY_MODEL, "env.id=frozenlake-v0", "sft.enabled=false", "log.progress=false",
        "log.tensorboard=false", "run.threads=1", "train.group_size=2", "train.n_groups=4",
        "train.mini_batch_size=8", "train.micro_batch_size=4",
        "distributed.backend=ray", f"run.out_dir={out}", *extra])))


def assert_same_episodes(got: list[Trajectory], want: list[Trajectory]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert (a.seed, a.group_id, a.token_ids, a.loss_mask, a.turn_index, a.turn_rewards,
                a.terminated, a.truncated) == (b.seed, b.group_id, b.token_ids, b.loss_mask,
                                               b.turn_index, b.turn_rewards, b.terminated,
                                               b.truncated)
        assert a.state_keys == b.state_keys
        assert a.policy_versions == b.policy_versions
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_env_and_rollout_workers_play_the_in_process_episodes(local_ray, tmp_path) -> None:
    run = open_test_run(tmp_path, "distributed.num_env_workers=2",
                        "distributed.num_rollout_workers=2",
                        "distributed.cpus_per_rollout_worker=0.5")
    local = local_play(run)(0, 4)  # the in-process runner
    out = scaleout.start(run, version=0, cursor=0)
    assert out is not None
    try:
        remote = out.play()(0, 4)
    finally:
        out.close()
    assert_same_episodes(remote, local)
    assert {t.worker for t in remote} == {"rollout-0", "rollout-1"}
    assert any(t.num_turns > 1 for t in remote)  # multi-turn episodes crossed the workers


def test_a_killed_worker_is_restarted_and_its_groups_replayed(local_ray, tmp_path) -> None:
    # slow env steps keep the groups in flight when the worker is killed
    run = open_test_run(tmp_path, "distributed.num_env_workers=1", "env.latency.median_s=0.05",
                        "env.latency.sigma=0.0")
    tr = scaleout.start(run, version=0, cursor=0)
    assert tr is not None
    try:
        want = tr.play()(0, 2)
        for victim in ("rollout", "env"):
            resubmitted = tr.stream.resubmitted
            for index in range(2):
                tr.stream.submit(index)
            time.sleep(0.3)
            actor = (tr.cluster.rollout_workers[0] if victim == "rollout"
                     else tr.cluster.env_workers[0])
            ray.kill(actor, no_restart=False)
            got: dict[int, list[Trajectory]] = {}
            while len(got) < 2:
                got.update(tr.stream.wait())
            assert tr.stream.resubmitted > resubmitted, victim
            assert_same_episodes(got[0] + got[1], want)  # each group counted once, whole
        assert tr.cluster.restarts >= 2
    finally:
        tr.close()


def run(out: Path, *extra: str) -> Path:
    result = train(load_config("configs/default.yaml", [
        *SMALL_RUN, *EASY_ARITHMETIC, "train.steps=2", f"run.out_dir={out}",
        "log.tensorboard=false", "distributed.backend=ray", *extra]))
    return result.run_dir


def learning_records(run_dir: Path) -> list[dict]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "time" and not k.startswith("perf/")}
            for r in records]


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "checkpoints" / "step_2" / "model.safetensors"))


def test_async_with_max_staleness_0_is_sync(local_ray, tmp_path) -> None:
    sync = run(tmp_path / "sync", "train.mode=sync")
    async_ = run(tmp_path / "async", "train.mode=async", "train.max_staleness=0")
    # the same episodes and updates; float noise only: the engine's sampled log-probs (the
    # ratio's denominator) depend in their last bits on which requests share a prefill,
    # which is timing
    got_records, want_records = learning_records(async_), learning_records(sync)
    assert [r.keys() for r in got_records] == [r.keys() for r in want_records]
    for got_record, want_record in zip(got_records, want_records, strict=True):
        for key, want_value in want_record.items():
            if isinstance(want_value, float):
                assert got_record[key] == pytest.approx(want_value, rel=1e-6, abs=1e-7), key
            else:
                assert got_record[key] == want_value, key
    want, got = final_weights(sync), final_weights(async_)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-5, atol=1e-7, msg=k)
    last = [json.loads(line) for line in (async_ / "metrics.jsonl").read_text().splitlines()
            if '"phase": "train"' in line][-1]
    assert last["perf/staleness_0"] == 2.0 and last["perf/dropped_stale"] == 0.0


def test_two_gloo_learners_train_as_one(local_ray, tmp_path) -> None:
    # 8 trajectories per optimizer step in passes of 3: 3 passes, so the ranks hold 2 and 1
    uneven = ("train.micro_batch_size=3", "distributed.cpus_per_rollout_worker=0.5",
              "distributed.cpus_per_learner=0.5")
    one = run(tmp_path / "one", *uneven)
    two = run(tmp_path / "two", *uneven, "distributed.num_learners=2")
    want, got = final_weights(one), final_weights(two)
    moved = max(float((got[k] - load_file(str(one / "base_model" / "model.safetensors"))[k])
                      .abs().max()) for k in want)
    assert moved > 1e-3  # the updates did something
    for key in want:
        assert torch.allclose(got[key], want[key], atol=1e-5), key
    for a, b in zip(learning_records(two), learning_records(one), strict=True):
        for key in ("loss/policy", "loss/grad_norm", "loss/entropy", "reward/mean"):
            if key in b:
                assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key


@pytest.mark.parametrize("preset", ["grpo", "ppo"])
def test_two_fsdp_learners_train_as_one(local_ray, tmp_path, preset: str) -> None:
    """FSDP2 shards (gloo), stopped after step 1 and resumed: the weights, the optimizer
    states and the metrics of 2 steps are those of one learner (the checkpoint gathers the
    sharded optimizer states, the resume shards them again); with ppo the separate critic is
    sharded too."""
    uneven = ("train.micro_batch_size=3", "distributed.cpus_per_rollout_worker=0.5",
              "distributed.cpus_per_learner=0.5", f"algo.preset={preset}",
              "train.checkpoint_every=1")
    one = run(tmp_path / "one", *uneven)
    two = run(tmp_path / "two", *uneven, "distributed.num_learners=2",
              "distributed.learner_strategy=fsdp", "train.steps=1")
    train(load_config(two / "config.yaml", ["train.steps=2"]), resume=two)
    want, got = final_weights(one), final_weights(two)
    assert want.keys() == got.keys()
    start = load_file(str(one / "base_model" / "model.safetensors"))
    assert max(float((got[k] - start[k]).abs().max()) for k in want) > 1e-3  # it learned
    for key in want:
        assert torch.allclose(got[key], want[key], atol=1e-5), key
    if preset == "ppo":
        critic = "checkpoints/step_2/critic/model.safetensors"
        want_c, got_c = load_file(str(one / critic)), load_file(str(two / critic))
        for key in want_c:
            assert torch.allclose(got_c[key], want_c[key], atol=1e-5), key
    # the checkpoint's optimizer states: gathered from the shards, as one learner has them
    want_o = torch.load(one / "checkpoints/step_2/optimizer.pt", weights_only=False)
    got_o = torch.load(two / "checkpoints/step_2/optimizer.pt", weights_only=False)
    assert want_o.keys() == got_o.keys()
    for name in want_o:
        assert want_o[name]["param_groups"] == got_o[name]["param_groups"]
        for index, entry in want_o[name]["state"].items():
            for key, value in entry.items():
                torch.testing.assert_close(got_o[name]["state"][index][key], value,
                                           rtol=1e-4, atol=1e-7, msg=f"{name} {index} {key}")
    for a, b in zip(learning_records(two), learning_records(one), strict=True):
        for key in ("loss/policy", "loss/grad_norm", "loss/entropy", "reward/mean",
                    "loss/value"):
            if key in b:
                assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key


def test_async_training_overlaps_sampling_with_updates(local_ray, tmp_path) -> None:
    run_dir = run(tmp_path, "train.mode=async", "train.max_staleness=1", "train.steps=3")
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
               if '"phase": "train"' in line]
    # the second and later batches were sampled (partly) while the learner updated
    assert any(r.get("perf/staleness_1", 0) > 0 for r in records[1:])
    assert all(r["perf/dropped_stale"] == 0 for r in records)
    # the behaviour-policy correction is on (algo.is_correction=tis set by async mode)
    assert all(r["loss/is_weight_mean"] > 0 for r in records)
