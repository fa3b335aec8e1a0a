"""Collapse alarms in a real run: warn shows and logs them, stop checkpoints and exits with
status 1, rollback reloads the last good checkpoint with a lower learning rate."""

from __future__ import annotations

import json

import pytest
import torch
from test_train_loop import overrides, read_metrics

from turnrl.cli import main
from turnrl.config import load_config
from turnrl.train.loop import AlarmStop, train

pytestmark = pytest.mark.slow

# a threshold every step crosses: the per-token entropy is always below 100 nats
ALWAYS = "alarms.min_entropy=100"


def test_warn_flags_the_alarm_in_metrics_and_finishes(tmp_path, capsys) -> None:
    result = train(load_config(None, overrides(tmp_path, ALWAYS, "train.steps=3")))
    rows = [r for r in read_metrics(result.run_dir) if r["phase"] == "train"]
    assert [r["alarm/entropy_collapse"] for r in rows] == [0.0, 1.0, 1.0]  # patience 2
    assert "alarm/entropy_collapse (loss/entropy" in capsys.readouterr().err
    assert result.after is not None


def test_stop_checkpoints_and_exits_with_status_1(tmp_path, capsys) -> None:
    code = main(["train", *overrides(tmp_path, ALWAYS, "alarms.on_alarm=stop",
                                     "train.steps=5", "train.checkpoint_every=0")])
    err = capsys.readouterr().err
    assert code == 1
    assert "step 2: alarm/entropy_collapse" in err and "Traceback" not in err
    assert err.count("step 2: alarm/entropy_collapse") == 1  # once, not once per logger
    assert "Loading weights" not in err and "Writing model shards" not in err  # quiet
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    assert (run_dir / "checkpoints" / "step_2" / "state.json").is_file()
    assert max(r["step"] for r in read_metrics(run_dir) if r["phase"] == "train") == 2


def test_rollback_reloads_the_last_good_checkpoint_with_a_lower_lr(tmp_path) -> None:
    cfg = load_config(None, overrides(tmp_path, ALWAYS, "alarms.on_alarm=rollback",
                                      "alarms.max_rollbacks=1", "train.steps=5",
                                      "train.checkpoint_every=0", "train.lr=1e-3"))
    with pytest.raises(AlarmStop, match="after 1 rollbacks"):
        train(cfg)
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    records = read_metrics(run_dir)
    rollback = [r for r in records if r["phase"] == "alarm"]
    assert len(rollback) == 1 and rollback[0]["alarm/rollback_to"] == 0.0
    assert rollback[0]["alarm/lr_scale"] == 0.5
    # steps 1, 2 (alarm), rolled back to 0: steps 1, 2 again (alarm, no rollbacks left)
    assert [r["step"] for r in records if r["phase"] == "train"] == [1, 2, 1, 2]
    saved = torch.load(run_dir / "checkpoints" / "step_2" / "optimizer.pt", weights_only=False)
    assert saved["policy"]["param_groups"][0]["lr"] == pytest.approx(5e-4)
    state = json.loads((run_dir / "checkpoints" / "step_0" / "state.json").read_text())
    assert state["step"] == 0


def test_warn_only_alarms_do_not_stop_a_run(tmp_path) -> None:
    """reward_std_zero can mean the task is solved: under on_alarm=stop it only warns."""
    result = train(load_config(None, overrides(tmp_path, "alarms.max_zero_std_groups=0",
                                               "alarms.on_alarm=stop", "train.steps=3")))
    rows = [r for r in read_metrics(result.run_dir) if r["phase"] == "train"]
    assert [r["alarm/reward_std_zero"] for r in rows] == [0.0, 1.0, 1.0]
    assert result.after is not None


def test_rollback_replaces_the_checkpoints_of_the_collapse(tmp_path) -> None:
    cfg = load_config(None, overrides(tmp_path, ALWAYS, "alarms.on_alarm=rollback",
                                      "alarms.max_rollbacks=1", "train.steps=5",
                                      "train.checkpoint_every=1", "train.keep_last=10"))
    with pytest.raises(AlarmStop):
        train(cfg)
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    # step_1 was written during the collapse, deleted by the rollback to step_0, and written
    # again by the replay (which knows it has rolled back once)
    state = json.loads((run_dir / "checkpoints" / "step_1" / "state.json").read_text())
    assert state["rollbacks"] == 1


def test_rollback_without_a_checkpoint_from_before_the_alarm_stops(tmp_path) -> None:
    cfg = load_config(None, overrides(tmp_path, ALWAYS, "alarms.on_alarm=rollback",
                                      "train.steps=5", "train.checkpoint_every=1",
                                      "train.keep_last=1"))
    with pytest.raises(AlarmStop, match="no checkpoint from before the alarm"):
        train(cfg)
