"""A real ``turnrl sweep``: 2 presets x 2 seeds of a tiny run, 2 at a time, sharing one SFT
start per seed; then resumed (nothing re-runs), a lost record, an unfinished run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from fixture_runs import TINY_RUN
from turnrl.cli import main
from turnrl.report.runs import load_run

pytestmark = pytest.mark.slow

NO_EXTRAS = ["train.eval_every=0", "log.report=false", "log.tensorboard=false"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("sweep")
    recipe = root / "tiny.yaml"
    recipe.write_text(yaml.safe_dump({
        "claim": "rloo beats grpo", "seeds": 2, "overrides": [*TINY_RUN, *NO_EXTRAS],
        "grid": {"algo.preset": ["grpo", "rloo"]}, "jobs": 2, "results": "results"}))
    return recipe, ["sweep", str(recipe), "--out", str(root / "out")]


def started(capsys) -> list[str]:
    return re.findall(r"\[sweep\] start (.+?)  \(log", capsys.readouterr().out)


def test_a_sweep_runs_every_cell_and_seed_sharing_sft_starts(sweep, capsys):
    recipe, command = sweep
    assert main(command) == 0
    launched = started(capsys)
    assert sorted(launched) == sorted([
        *(f"SFT start {key} (seed {s})" for s, key in enumerate(
            [name.split()[2] for name in launched if name.startswith("SFT")])),
        "preset=grpo seed 0", "preset=grpo seed 1", "preset=rloo seed 0", "preset=rloo seed 1"])
    out = recipe.parent / "out"
    sft_runs = sorted((out.parent / "sft").iterdir())  # sweeps/sft: shared by recipes
    assert len(sft_runs) == 2  # one per seed, shared by both presets
    records = {p.stem: json.loads(p.read_text())
               for p in (recipe.parent / "results" / "records").glob("*.json")}
    assert sorted(records) == ["preset=grpo-s0", "preset=grpo-s1", "preset=rloo-s0",
                               "preset=rloo-s1"]
    for name, record in records.items():
        run = load_run(record["run_dir"])
        assert run.config["algo"]["preset"] == name.split("=")[1][:4]
        assert run.config["sft"]["enabled"] is False
        sft_dir = Path(run.config["model"]["path"]).parent
        # "before" is the shared SFT start's own evaluation
        sft_eval = load_run(sft_dir).phase("eval")[-1]
        assert record["before"]["success"] == sft_eval["eval/success"]
        assert record["after"] == run.evaluation["after"]
        assert record["curve"]["step"] == [1, 2, 3, 4]
        assert record["curve"]["episodes"] == [8.0, 16.0, 24.0, 32.0]
    same_seed = {records[f"preset={p}-s0"]["before"]["success"] for p in ("grpo", "rloo")}
    assert len(same_seed) == 1
    table = (recipe.parent / "results" / "results.md").read_text()
    assert re.search(r"^\| preset=grpo \| 2 \| ", table, re.M)
    assert re.search(r"^\| preset=rloo \| 2 \| ", table, re.M)
    assert "**Claim:** rloo beats grpo" in table and "P(row > column)" in table


def test_a_second_call_runs_nothing(sweep, capsys):
    _, command = sweep
    assert main(command) == 0
    assert started(capsys) == []


def test_a_lost_record_is_rewritten_and_an_unfinished_run_resumes(sweep, capsys):
    recipe, command = sweep
    results, out = recipe.parent / "results" / "records", recipe.parent / "out" / "runs"
    kept = json.loads((results / "preset=grpo-s0.json").read_text())
    (results / "preset=grpo-s0.json").unlink()
    (results / "preset=rloo-s1.json").unlink()
    (out / "preset=rloo-s1" / "eval.json").unlink()  # as if killed after its last checkpoint
    assert main([*command, "--jobs", "1"]) == 0
    assert started(capsys) == ["preset=rloo seed 1"]  # the lost record needs no run
    rewritten = json.loads((results / "preset=grpo-s0.json").read_text())
    assert rewritten["process_s"] is None and kept["process_s"] > 0  # not measured again
    assert {**rewritten, "process_s": kept["process_s"]} == kept
    log = (recipe.parent / "out" / "logs" / "preset=rloo-s1.log").read_text()
    # resumed from its step-4 checkpoint: only the final evaluation was left to do (after the
    # run's header line, which names the checkpoint)
    header, first = log.splitlines()[:2]
    assert header.startswith("turnrl train: run ") and "resumed from step_4" in header
    assert first.startswith("eval (after RL) 1/8") and "RL 1/4" not in log
    assert (out / "preset=rloo-s1" / "eval.json").is_file()


def test_another_recipe_with_the_same_sft_reuses_its_starts(sweep, capsys):
    recipe, _ = sweep
    other = recipe.parent / "other.yaml"
    spec = yaml.safe_load(recipe.read_text())
    other.write_text(yaml.safe_dump({**spec, "seeds": 1, "grid": {"algo.preset": ["rloo"]},
                                     "overrides": [*spec["overrides"], "train.lr=1e-4"],
                                     "results": "other-results"}))
    assert main(["sweep", str(other), "--out", str(recipe.parent / "other")]) == 0
    assert started(capsys) == ["preset=rloo seed 0"]  # seed 0's SFT start is reused
    record = json.loads((recipe.parent / "other-results" / "records" / "preset=rloo-s0.json")
                        .read_text())
    first = json.loads((recipe.parent / "results" / "records" / "preset=rloo-s0.json")
                       .read_text())
    assert record["before"] == first["before"]
