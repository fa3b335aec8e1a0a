"""Model-free pieces of training: batch layout, rollout stats, metrics logging, checkpoints."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from turnrl.algos.presets import PRESETS
from turnrl.rollout.stats import rollout_metrics
from turnrl.train.checkpoint import latest_checkpoint, load_training_state, save_checkpoint
from turnrl.train.layout import layout
from turnrl.train.microbatch import bucketed_batches, micro_batches
from turnrl.train.scoring import ScoredBatch
from turnrl.train.stages import Passes, advantage_inputs
from turnrl.train.tracking import MetricsLogger
from turnrl.types import EpisodeCounts, TrainBatch, Trajectory

PAD = 0


def traj(n_prompt: int, turns: list[int], rewards: list[float], *, group: int = 0,
         success: bool = False, terminated: bool = True) -> Trajectory:
    """A ledger: ``n_prompt`` prompt tokens, then per turn its sampled tokens + 2 obs tokens."""
    ids, mask, lps, turn_index = [7] * n_prompt, [0] * n_prompt, [0.0] * n_prompt, \
        [-1] * n_prompt
    for k, n in enumerate(turns):
        ids += [10 + k] * n + [5, 6]
        mask += [1] * n + [0, 0]
        lps += [-0.5] * n + [0.0, 0.0]
        turn_index += [k] * (n + 2)
    return Trajectory(env_id="x-v0", seed=0, group_id=group, messages=[], token_ids=ids,
                      loss_mask=mask, logprobs=lps, turn_index=turn_index, turn_rewards=rewards,
                      terminated=terminated, truncated=not terminated, success=success,
                      counts=EpisodeCounts(invalid_actions=1, length_finishes=0))


# ---------------------------------------------------------------------- layout / select
def test_layout_right_pads_every_per_token_list() -> None:
    a, b = traj(3, [2, 1], [0.0, 1.0], group=4), traj(2, [1], [0.5], group=5, terminated=False)
    batch = layout([a, b], PAD)  # a's final observation is cut, b keeps its bootstrap tail
    a.token_ids, a.loss_mask, a.logprobs, a.turn_index = (
        x[:-2] for x in (a.token_ids, a.loss_mask, a.logprobs, a.turn_index))
    assert batch.input_ids.shape == (2, len(a.token_ids))
    n = len(b.token_ids)
    assert batch.input_ids[1, :n].tolist() == b.token_ids
    assert batch.input_ids[1, n:].tolist() == [PAD] * (len(a.token_ids) - n)
    assert batch.attention_mask[1].tolist() == [1.0] * n + [0.0] * (len(a.token_ids) - n)
    assert batch.loss_mask[0].tolist() == [float(m) for m in a.loss_mask]
    assert batch.logprobs[1, :n].tolist() == b.logprobs
    assert batch.turn_index[1].tolist() == b.turn_index + [-1] * (len(a.token_ids) - n)
    # K = most turns + 1: a spare column for turn-level bootstrap values
    assert batch.env_rewards.tolist() == [[0.0, 1.0, 0.0], [0.5, 0.0, 0.0]]
    assert batch.turn_mask.tolist() == [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    assert batch.group_ids.tolist() == [4, 5]
    assert batch.terminated.tolist() == [True, False]
    assert batch.state_keys is None and batch.critic_prefix_ids is None
    # the estimator's inputs are read off the batch (rewards: the scored ones)
    inputs = advantage_inputs(ScoredBatch(batch, batch.env_rewards, {}), Passes(),
                              PRESETS["grpo"])
    assert torch.equal(inputs.token_mask, batch.loss_mask)
    assert torch.equal(inputs.turn_index, batch.turn_index)
    assert torch.equal(inputs.turn_rewards, batch.env_rewards)
    assert torch.equal(inputs.turn_mask, batch.turn_mask)
    assert torch.equal(inputs.group_ids, batch.group_ids)
    assert inputs.values is None and inputs.turn_values is None


def test_layout_cuts_each_row_after_its_last_sampled_token() -> None:
    done = traj(3, [2, 1], [0.0, 1.0])  # 3 prompt, 2 + 2 obs, 1 + 2 obs = 10 tokens
    cut = traj(2, [1], [0.5], terminated=False)  # 2 prompt, 1 + 2 obs = 5 tokens
    silent = Trajectory(env_id="x-v0", seed=0, group_id=0, messages=[], token_ids=[7, 7, 7],
                        loss_mask=[0, 0, 0], logprobs=[0.0] * 3, turn_index=[-1] * 3,
                        turn_rewards=[], terminated=True)
    kept = layout([done, cut, silent], PAD, bootstrap_truncated=True)
    assert kept.attention_mask.sum(-1).tolist() == [8.0, 5.0, 3.0]
    assert kept.input_ids[0, :8].tolist() == done.token_ids[:8]
    dropped = layout([done, cut, silent], PAD, bootstrap_truncated=False)
    assert dropped.input_ids.shape == (3, 8)
    assert dropped.attention_mask.sum(-1).tolist() == [8.0, 3.0, 3.0]
    assert dropped.loss_mask.sum().item() == sum(done.loss_mask) + sum(cut.loss_mask)


def test_layout_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        layout([], PAD)


def train_batch_of(tokens) -> TrainBatch:
    """A TrainBatch over ``tokens`` whose advantages number the positions."""
    adv = torch.arange(tokens.input_ids.numel(), dtype=torch.float).view_as(tokens.loss_mask)
    return TrainBatch(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask,
                      loss_mask=tokens.loss_mask, old_logprobs=tokens.logprobs,
                      advantages=adv, returns=2 * adv, kl_coef=0.25)


def test_select_takes_rows_and_trims_padding() -> None:
    long, short = traj(10, [3], [1.0]), traj(2, [1], [0.0])
    batch = train_batch_of(layout([long, short, short], PAD))
    sub = batch.select(torch.tensor([2, 1]))
    width = len(short.token_ids) - 2  # without the final observation
    assert sub.input_ids.shape == (2, width)
    assert torch.equal(sub.advantages, batch.advantages[[2, 1], :width])
    assert torch.equal(sub.returns, batch.returns[[2, 1], :width])
    assert sub.ref_logprobs is None and sub.old_values is None and sub.is_weights is None
    assert sub.kl_coef == 0.25 and sub.size == 2


def test_token_batch_select_trims_per_token_fields_only() -> None:
    long, short = traj(10, [3], [1.0], group=1), traj(2, [1, 1], [0.0, 1.0], group=2)
    tokens = layout([long, short, short], PAD, critic_prefixes=[[3], [3, 4, 5], [4, 5]])
    rows = torch.tensor([2, 1])
    sub = tokens.select(rows)
    width = len(short.token_ids) - 2  # without the final observation
    for name in ("input_ids", "attention_mask", "loss_mask", "logprobs", "turn_index"):
        assert torch.equal(getattr(sub, name), getattr(tokens, name)[rows, :width]), name
    # per-row fields keep their own width (K turns, P prefix tokens)
    for name in ("turn_mask", "env_rewards", "group_ids", "terminated", "critic_prefix_ids",
                 "critic_prefix_mask"):
        assert torch.equal(getattr(sub, name), getattr(tokens, name)[rows]), name
    assert sub.turn_mask.shape == (2, 3) and sub.critic_prefix_ids.shape == (2, 3)
    assert sub.state_keys is None
    assert tokens.input_ids.shape[1] > width  # the original is untouched


def test_batch_to_moves_every_tensor_and_leaves_the_original() -> None:
    tokens = layout([traj(4, [3], [1.0]), traj(2, [1, 2], [0.0, 1.0])], PAD)
    batch = train_batch_of(tokens)
    for b in (tokens, batch):
        assert b.to("cpu") is b  # already there: no copy
    moved = batch.to("meta")  # a device that exists on every build
    for name in ("input_ids", "attention_mask", "loss_mask", "old_logprobs", "advantages",
                 "returns"):
        assert getattr(moved, name).device.type == "meta", name
        assert getattr(moved, name).shape == getattr(batch, name).shape
        assert getattr(batch, name).device.type == "cpu"  # the original is untouched
    assert moved.ref_logprobs is None and moved.is_weights is None and moved.kl_coef == 0.25
    moved_tokens = tokens.to("meta")  # per-row fields (the estimator's inputs) move too
    for name in ("input_ids", "logprobs", "turn_index", "turn_mask", "env_rewards",
                 "group_ids", "terminated"):
        assert getattr(moved_tokens, name).device.type == "meta", name
        assert getattr(tokens, name).device.type == "cpu"
    assert moved_tokens.state_keys is None


def test_bucketed_batches_partition_the_rows() -> None:
    trajectories = [traj(i % 7 + 1, [1 + i % 3], [0.0]) for i in range(37)]
    batch = layout(trajectories, PAD)
    batches = bucketed_batches(batch, 4, torch.Generator().manual_seed(0))
    rows = torch.cat(batches).tolist()
    assert sorted(rows) == list(range(37))
    assert all(len(b) <= 4 for b in batches)
    again = bucketed_batches(batch, 4, torch.Generator().manual_seed(0))
    assert [b.tolist() for b in again] == [b.tolist() for b in batches]


def test_micro_batches_respect_the_row_count_and_the_token_budget() -> None:
    # lengths 1 + 3·(i % 5) prompt tokens + 3 per turn: 4 .. 16 tokens
    trajectories = [traj(1 + 3 * (i % 5), [1], [0.0], terminated=False) for i in range(23)]
    batch = layout(trajectories, PAD)  # truncated: every token kept for the bootstrap
    lengths = batch.attention_mask.sum(-1).long()
    rows = torch.arange(23)
    by_rows = micro_batches(batch, rows, max_rows=5)
    assert [len(p) for p in by_rows] == [5, 5, 5, 5, 3]
    passes = micro_batches(batch, rows, max_rows=8, max_tokens=40)
    assert sorted(torch.cat(passes).tolist()) == list(range(23))  # a partition
    for chunk in passes:
        assert len(chunk) <= 8 and len(chunk) * int(lengths[chunk].max()) <= 40
    # short rows share big passes, long rows small ones: the five rows of 4 tokens run
    # together (a sixth of 7 tokens would make 6 x 7 = 42 > 40), the 16-token rows in twos
    assert len(passes[0]) == 5 and int(lengths[passes[0]].max()) == 4
    assert len(passes[-1]) <= 40 // 16
    # a row longer than the budget still runs, alone
    alone = micro_batches(batch, rows, max_rows=8, max_tokens=10)
    assert all(len(c) == 1 for c in alone if int(lengths[c].max()) > 10)
    assert sorted(torch.cat(alone).tolist()) == list(range(23))


# ---------------------------------------------------------------------- rollout stats
def test_rollout_metrics_by_hand() -> None:
    trajectories = [
        traj(2, [1, 2], [0.0, 1.0], group=0, success=True),   # reward 1, 2 turns, 3 tokens
        traj(2, [2], [0.0], group=0),                           # reward 0, 1 turn, 2 tokens
        traj(2, [1], [1.0], group=1, success=True),             # reward 1
        traj(2, [1], [1.0], group=1, success=True, terminated=False),
    ]
    m = rollout_metrics(trajectories)
    assert m["reward/mean"] == 0.75
    assert m["reward/std"] == pytest.approx(np.std([1, 0, 1, 1]))
    assert m["reward/group_std"] == pytest.approx((0.5 + 0.0) / 2)  # std of {1,0} and {1,1}
    assert m["reward/frac_zero_std_groups"] == 0.5
    assert m["rollout/success"] == 0.75
    assert m["rollout/turns"] == pytest.approx(5 / 4)
    assert m["rollout/sampled_tokens"] == pytest.approx((3 + 2 + 1 + 1) / 4)
    assert m["rollout/truncated"] == 0.25
    assert m["rollout/invalid_actions"] == 1.0
    assert m["rollout/length_finishes"] == 0.0
    assert m["rollout/episodes"] == 4.0
    assert all(k.startswith(("rollout/", "reward/")) for k in m)
    # the scored outcome rewards replace the env's when given
    scored = rollout_metrics(trajectories, [2.0, 0.0, 1.0, 1.0])
    assert scored["reward/mean"] == 1.0
    assert scored["reward/group_std"] == pytest.approx((1.0 + 0.0) / 2)
    assert scored["rollout/success"] == 0.75
    # hand-built trajectories without the runner's counts count nothing
    bare = rollout_metrics([Trajectory(env_id="x-v0", seed=0, group_id=0, messages=[])])
    assert bare["rollout/invalid_actions"] == 0.0 and bare["rollout/tool_calls"] == 0.0


# ---------------------------------------------------------------------- metrics logger
def test_metrics_logger_writes_json_lines(tmp_path: Path) -> None:
    logger = MetricsLogger(tmp_path, tensorboard=True)
    logger.log(0, {"sft/loss": 1.5, "sft/flag": True, "sft/name": "x"}, phase="sft")
    logger.log(3, {"loss/policy": float("nan"), "reward/mean": 2})
    logger.close()
    first, second = [json.loads(line) for line in
                     (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert first["step"] == 0 and first["phase"] == "sft" and first["sft/loss"] == 1.5
    assert "sft/flag" not in first and "sft/name" not in first  # only numbers are metrics
    assert second["phase"] == "train" and second["reward/mean"] == 2.0
    assert second["loss/policy"] != second["loss/policy"]  # NaN kept in the JSONL
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))


def test_metrics_logger_appends_across_sessions(tmp_path: Path) -> None:
    for step in (1, 2):
        logger = MetricsLogger(tmp_path, tensorboard=False)
        logger.log(step, {"reward/mean": float(step)})
        logger.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line)["step"] for line in lines]
    assert steps == [1, 2]
    assert not (tmp_path / "tensorboard").exists()


def test_optional_tracker_without_its_package_says_how_to_install(tmp_path: Path,
                                                                  monkeypatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with pytest.raises(ImportError, match=r"pip install 'turnrl\[wandb\]'"):
        MetricsLogger(tmp_path, tensorboard=False, wandb=True)


# ---------------------------------------------------------------------- checkpoints
class _Saveable(nn.Linear):
    def save_pretrained(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), Path(path) / "weights.pt")


class _Tokenizer:
    def save_pretrained(self, path: str) -> None:
        (Path(path) / "tokenizer.json").write_text("{}")


def test_checkpoint_round_trip_restores_optimizer_and_rng(tmp_path: Path) -> None:
    model = _Saveable(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    path = save_checkpoint(tmp_path, 7, policy=model, tokenizer=_Tokenizer(),
                           optimizers={"policy": optimizer, "critic": None},
                           extra_state={"eval_before": {"success": 0.5}})
    assert path == tmp_path / "checkpoints" / "step_7"
    assert sorted(p.name for p in path.iterdir()) == [
        "optimizer.pt", "state.json", "tokenizer.json", "weights.pt"]
    assert not list((tmp_path / "checkpoints").glob(".tmp*"))
    expected = (random.random(), np.random.rand(), torch.rand(1))

    fresh = torch.optim.AdamW(_Saveable(3, 2).parameters(), lr=0.1)
    random.seed(99), np.random.seed(99), torch.manual_seed(99)
    state = load_training_state(path, {"policy": fresh, "critic": None})
    assert state["step"] == 7 and state["eval_before"] == {"success": 0.5}
    assert (random.random(), np.random.rand()) == expected[:2]
    assert torch.equal(torch.rand(1), expected[2])
    saved = optimizer.state_dict()["state"][0]["exp_avg"]
    assert torch.equal(fresh.state_dict()["state"][0]["exp_avg"], saved)


def test_latest_checkpoint_ignores_incomplete_ones(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path) is None
    model, tokenizer = _Saveable(2, 2), _Tokenizer()
    optimizers = {"policy": torch.optim.SGD(model.parameters(), lr=0.1)}
    for step in (2, 10):
        save_checkpoint(tmp_path, step, policy=model, tokenizer=tokenizer, optimizers=optimizers)
    (tmp_path / "checkpoints" / "step_30").mkdir()  # no state.json: a crashed write
    (tmp_path / "checkpoints" / ".tmp_step_40").mkdir()
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoints" / "step_10"  # 10 > 2
    save_checkpoint(tmp_path, 10, policy=model, tokenizer=tokenizer, optimizers=optimizers)
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoints" / "step_10"


def test_turn_start_values_read_the_critic_before_each_turn() -> None:
    from turnrl.train.stages import turn_start_values

    a, b = traj(3, [2, 1], [0.0, 1.0], group=4), traj(2, [1], [0.5], group=5, terminated=False)
    batch = layout([a, b], PAD)
    values = torch.arange(batch.input_ids.numel(), dtype=torch.float).view_as(batch.input_ids)
    turn_values = turn_start_values(values, batch)
    for row, t in enumerate((a, b)):
        for k in range(t.num_turns):
            first = next(i for i, (m, ti) in enumerate(zip(t.loss_mask, t.turn_index,
                                                            strict=True)) if m and ti == k)
            assert turn_values[row, k] == values[row, first - 1]
    # b is truncated: the slot after its last turn holds the value at its last real token
    assert turn_values[1, b.num_turns] == values[1, len(b.token_ids) - 1]
    # a terminated: nothing to bootstrap
    assert turn_values[0, a.num_turns] == 0
