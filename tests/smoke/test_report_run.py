"""A real run's report: what ``turnrl train`` records for it (samples with the learner's
token statistics, meta.json, eval times) and ``turnrl report`` on it."""

from __future__ import annotations

import json
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
