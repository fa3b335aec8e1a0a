"""A real run's report: what ``turnrl train`` records for it (samples with the learner's
token statistics, meta.json, eval times) and ``turnrl report`` on it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from turnrl.cli import main
from turnrl.report.episodes import read_samples
from turnrl.report.report import report_data
from turnrl.report.runs import load_run
from turnrl.train import hooks

pytestmark = pytest.mark.slow


def test_train_writes_the_report_and_prints_its_path(tiny_run):
    run_dir, printed = tiny_run
    assert f"report: {run_dir / 'report.html'}" in printed.replace("\n", "")  # rich wraps
    page = (run_dir / "report.html").read_text()
    assert page.startswith("<!doctype html>") and 'id="fig-reward"' in page
    assert "<script src=" not in page and "<link " not in page  # nothing to fetch


def test_samples_carry_the_learners_statistics_taken_before_the_update(tiny_run):
    run_dir, _ = tiny_run
    episodes = read_samples(run_dir / "samples" / "step_1.jsonl")
    assert len(episodes) == 8
    for episode in episodes:
        n = len(episode["token_ids"])
        assert len(episode["entropies"]) == len(episode["learner_logprobs"]) == n
        sampled = [i for i, m in enumerate(episode["loss_mask"]) if m]
        # the hf engine samples from the learner's own weights: the same log-probs
        for i in sampled:
            assert episode["learner_logprobs"][i] == pytest.approx(episode["logprobs"][i],
                                                                   abs=1e-4)
            assert episode["entropies"][i] >= 0.0


def test_meta_names_the_commit_and_machine_and_evaluations_are_timed(tiny_run):
    run_dir, _ = tiny_run
    session, = json.loads((run_dir / "meta.json").read_text())["sessions"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).parent).stdout.strip()
    assert session["commit"] == (head or None)
    assert session["device"] == "cpu" and session["threads"] == 1
    evals = [row for row in load_run(run_dir).rows if row["phase"] == "eval"]
    assert [row["step"] for row in evals] == [0, 2, 4]
    assert all(row["perf/eval_s"] > 0 for row in evals)


def test_report_data_of_the_run(tiny_run):
    run_dir, _ = tiny_run
    run = load_run(run_dir)
    data, documents = report_data([run])
    keys = {f["key"] for f in data["figures"]}
    assert {"reward", "success", "entropy", "grad_norm", "timing", "sft_loss"} <= keys
    browser = data["runs"][0]["browser"]
    assert browser["steps"] == [1, 2, 3, 4] and len(browser["index"]) == 32
    assert set(browser["scales"]) == {"mask", "advantage", "logprob", "entropy",
                                      "logprob_diff"}
    assert len(documents) == 32
    view = json.loads(documents["ep-0-1-0"])
    assert "".join(browser["vocab"][str(i)] for i in view["token_ids"]).count(
        "<|im_start|>assistant") == view["turns"]


def test_turnrl_report_cli_and_the_report_every_steps(tiny_run, tmp_path, capsys,
                                                      monkeypatch):
    run_dir, _ = tiny_run
    out = tmp_path / "two.html"
    assert main(["report", str(run_dir), str(run_dir), "-o", str(out)]) == 0
    assert f"report: {out}" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "no such run directory" in capsys.readouterr().err
    written: list[int] = []
    monkeypatch.setattr(hooks, "write_run_report",
                        lambda run_dir: written.append(len(read_metrics_steps(run_dir))))
    from fixture_runs import TINY_RUN

    assert main(["train", *TINY_RUN, "train.eval_every=0", "log.report_every=2",
                 "log.report=false", f"run.out_dir={tmp_path}", "train.steps=4"]) == 0
    assert written == [2, 4]  # after steps 2 and 4; none at the end (log.report=false)
    assert not (tmp_path / "default" / "report.html").exists()


def read_metrics_steps(run_dir: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").open()
            if '"phase": "train"' in line]


def test_eval_of_a_run_uses_its_config_and_matches_its_own_evaluation(tiny_run, tmp_path):
    """`turnrl eval RUN`: the run's env kwargs, token budget and evaluation settings, so its
    numbers are the run's own final evaluation (same checkpoint, seeds and sampling seeds)."""
    from turnrl.config import load_config

    run_dir, _ = tiny_run
    assert main(["eval", str(run_dir), "--out-dir", str(tmp_path)]) == 0
    evaluated = tmp_path / "eval-arithmetic-v0"
    cfg = load_config(evaluated / "config.yaml")
    assert cfg.env.kwargs == {"min_value": 0, "max_value": 1}
    assert cfg.rollout.max_new_tokens == 4 and cfg.eval.episodes == 8
    row = [r for r in load_run(evaluated).rows if r["phase"] == "eval"][-1]
    after = json.loads((run_dir / "eval.json").read_text())["after"]
    for key in ("success", "reward", "turns", "tokens"):
        assert row[f"eval/{key}"] == pytest.approx(after[key]), key

    assert main(["eval", str(run_dir), "--out-dir", str(tmp_path), "--episodes", "3",
                 "env.kwargs.max_value=2", "rollout.max_new_tokens=5"]) == 0
    cfg = load_config(tmp_path / "eval-arithmetic-v0-2" / "config.yaml")
    assert cfg.env.kwargs == {"min_value": 0, "max_value": 2}
    assert (cfg.eval.episodes, cfg.rollout.max_new_tokens) == (3, 5)
    # another env: the run's kwargs are not carried over to it
    assert main(["eval", str(run_dir), "--out-dir", str(tmp_path), "--env", "frozenlake-v0",
                 "--episodes", "2"]) == 0
    assert load_config(tmp_path / "eval-frozenlake-v0" / "config.yaml").env.kwargs == {}


def test_turnrl_show_prints_a_steps_episodes_and_a_transcript(tiny_run, capsys):
    run_dir, _ = tiny_run
    episodes = read_samples(run_dir / "samples" / "step_3.jsonl")
    assert main(["show", str(run_dir), "--step", "3", "--episode", "1"]) == 0
    out = capsys.readouterr().out
    assert "tiny: step 3" in out and f"episode 1 (group {episodes[1]['group_id']}" in out
    assert out.count("assistant (turn 0: reward") == 1  # one turn per arithmetic episode
    assert re.search(r", 1 turn\b", out) and "1 turns" not in out
    assert episodes[1]["messages"][0]["content"] in out
    # evaluations keep their episodes too: before RL (0), every eval_every (2), after (4)
    assert sorted(p.name for p in (run_dir / "samples").glob("eval_*.jsonl")) == [
        "eval_0.jsonl", "eval_2.jsonl", "eval_4.jsonl"]
    assert main(["show", str(run_dir), "--eval"]) == 0
    out = capsys.readouterr().out
    assert "tiny: evaluation at step 4" in out and "advantage" not in out
    assert main(["show", str(run_dir), "--step", "9"]) == 2
    assert "no samples for step 9; there are: 1, 2, 3, 4" in capsys.readouterr().err
