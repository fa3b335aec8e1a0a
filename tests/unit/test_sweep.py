"""``turnrl sweep``'s recipe, plan, resume checks and results table (no model runs here;
tests/smoke/test_sweep_run.py runs a real one)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from turnrl.cli import main
from turnrl.config import default_config_path, load_config
from turnrl.sweep import RecipeError, load_recipe, plan_runs, run_sweep
from turnrl.sweep.recipe import cells
from turnrl.sweep.results import summarize, time_to_target, write_results


def recipe_file(tmp_path: Path, text: str, name: str = "claim.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_cells_are_arms_times_grid_with_short_names_and_overrides_in_order(tmp_path):
    recipe = load_recipe(recipe_file(tmp_path, """
arms: {sparse: [], dense: ['env.kwargs={progress_reward: 0.1}']}
grid: {algo.preset: [grpo, rloo], train.lr: [1.0e-4]}
"""))
    found = cells(recipe)
    assert [c.name for c in found] == [
        "sparse preset=grpo lr=0.0001", "sparse preset=rloo lr=0.0001",
        "dense preset=grpo lr=0.0001", "dense preset=rloo lr=0.0001"]
    assert found[2].overrides == ("env.kwargs={progress_reward: 0.1}", "algo.preset=grpo",
                                  "train.lr=0.0001")
    assert found[2].slug == "dense_preset=grpo_lr=0.0001"


def test_keys_that_end_alike_keep_their_full_names(tmp_path):
    recipe = load_recipe(recipe_file(tmp_path, "grid: {train.lr: [1], sft.lr: [2]}"))
    assert cells(recipe)[0].name == "train.lr=1 sft.lr=2"


def test_runs_share_an_sft_start_only_when_sft_and_its_evaluation_agree(tmp_path):
    recipe = load_recipe(recipe_file(tmp_path, """
seeds: [0, 1]
grid: {algo.preset: [grpo, rloo], sft.episodes: [100, 200]}
"""))
    runs = plan_runs(recipe)
    assert len(runs) == 8 and len({r.name for r in runs}) == 8
    key = {(r.cell.name, r.seed): r.sft_key for r in runs}
    # the preset is read after SFT: shared; the SFT data and the seed are not
    assert key[("preset=grpo episodes=100", 0)] == \
        key[("preset=rloo episodes=100", 0)]
    assert key[("preset=grpo episodes=100", 0)] != key[("preset=grpo episodes=200", 0)]
    assert key[("preset=grpo episodes=100", 0)] != key[("preset=grpo episodes=100", 1)]
    assert runs[0].overrides[-1] == "run.seed=0"


def test_the_training_turn_cap_and_temperature_do_not_split_sft_starts(tmp_path):
    recipe = load_recipe(recipe_file(tmp_path, """
seeds: 1
arms: {fixed: [rollout.max_turns=10], curriculum: ["rollout.max_turns=[[0, 4], [5, 10]]",
                                                  rollout.temperature=0.8]}
grid: {rollout.max_new_tokens: [8, 16]}
"""))
    key = {r.cell.name: r.sft_key for r in plan_runs(recipe)}
    assert key["fixed max_new_tokens=8"] == key["curriculum max_new_tokens=8"]
    assert key["fixed max_new_tokens=8"] != key["fixed max_new_tokens=16"]  # eval reads it


def test_a_league_of_seatings_shares_the_sft_start_of_plain_self_play(tmp_path):
    """multi.seatings seats RL's task groups only: SFT demonstrates multi.agents' roles."""
    recipe = load_recipe(recipe_file(tmp_path, """
seeds: 1
overrides: [env.id=tictactoe-v0]
arms:
  self: []
  league: ['multi.seatings=[{}, {o: oracle}]']
  vs_oracle: ['multi.agents={o: oracle}']
"""))
    runs = {r.cell.name: r for r in plan_runs(recipe)}
    assert runs["self"].sft_key == runs["league"].sft_key != runs["vs_oracle"].sft_key
    assert runs["self"].config_key != runs["league"].config_key


def test_no_sharing_when_sft_is_off_or_the_recipe_says_so(tmp_path):
    off = load_recipe(recipe_file(tmp_path, "seeds: 1\noverrides: [sft.enabled=false]"))
    assert plan_runs(off)[0].sft_key is None
    unshared = load_recipe(recipe_file(tmp_path, "seeds: 1\nshare_sft: false", "b.yaml"))
    assert plan_runs(unshared)[0].sft_key is None


def test_a_later_field_at_its_default_leaves_the_keys_as_they_were(tmp_path):
    """A field added to the schema after records were made (LATER_FIELDS) must not change
    the keys of configs that do not use it, and must change them when it is set."""
    from turnrl.sweep.recipe import LATER_FIELDS, _digest, config_key, sft_key

    recipe = load_recipe(recipe_file(tmp_path, "seeds: 1"))
    run = plan_runs(recipe, ["model.path=tiny-random"])[0]  # keyed as "tiny" (the old name)
    resolved = load_config(default_config_path(), list(run.overrides)).model_dump()
    assert LATER_FIELDS["sft.stop_loss"] is None  # its default, left out of the keys
    without = {**{k: v for k, v in resolved.items() if k != "multi"},  # later, at defaults
               "sft": {k: v for k, v in resolved["sft"].items() if k != "stop_loss"},
               "agent": {k: v for k, v in resolved["agent"].items() if k != "train_partial"}}
    old_run = {k: v for k, v in without["run"].items() if k not in ("name", "out_dir", "threads")}
    old_model = {**resolved["model"], "path": "tiny"}
    assert config_key(resolved) == _digest({**without, "run": old_run, "model": old_model})
    assert sft_key(resolved) == sft_key(without)
    set_ = load_config(default_config_path(), [*run.overrides, "sft.stop_loss=0.1"]).model_dump()
    assert config_key(set_) != config_key(resolved)
    assert sft_key(set_) != sft_key(resolved)


def test_every_committed_record_keeps_the_key_its_recipe_plans_now():
    """The committed records of recipes/ stay reusable: a schema change that moves their
    config keys (a new field not in LATER_FIELDS, a changed default) fails here. Every
    recipe names its model: the records made from the random init (what ``model.path: tiny``
    was before issue 40) are planned with ``model.path=tiny-random``, those of
    ``env_*_base.yaml`` with the pretrained base, so neither is taken for the other's."""
    root = Path(__file__).resolve().parents[2] / "recipes"
    checked = 0
    for path in sorted(root.glob("*.yaml")):
        recipe = load_recipe(path)
        planned = {run.name: run for run in plan_runs(recipe)}
        other = {run.name: run.config_key for run in plan_runs(recipe, ["model.path=tiny"])} \
            if "model.path=tiny-random" in recipe.overrides else {}
        folder = path.parent / (recipe.results or "") / "records"
        for made in sorted(folder.glob("*.json")):
            record = json.loads(made.read_text())
            if "config_key" not in record:  # made before records kept their key
                continue
            assert record["config_key"] == planned[made.stem].config_key, \
                f"{made}: made from config key {record['config_key']}, now planned as " \
                f"{planned[made.stem].config_key}; add the new field to LATER_FIELDS"
            if made.stem in other:  # a random-init record is never the base's
                assert record["config_key"] != other[made.stem]
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize(("text", "expected"), [
    ("seeds: 5\ngird: {algo.preset: [grpo]}", "gird: Extra inputs are not permitted"),
    ("overrides: [train.steps]", "'train.steps' is not a key=value override"),
    ("overrides: [run.seed=3]", "run.seed is set by the sweep; list the seeds under seeds:"),
    ("seeds: 0", "seeds: must be a positive count"),
    ("seeds: [1, 1]", "must list distinct seeds"),
    ("grid: {algo.preset: []}", "algo.preset: give at least one value"),
    ("config: nowhere.yaml", "config: 'nowhere.yaml' is neither at"),
    ("- a list", "a recipe is a YAML mapping"),
    ("name: 'a b'", "name: 'a b' names a directory"),
])
def test_recipe_mistakes_name_the_file_and_key(tmp_path, text, expected):
    path = recipe_file(tmp_path, text)
    with pytest.raises(RecipeError) as error:
        load_recipe(path)
    assert str(path) in str(error.value) and expected in str(error.value)


def test_a_bad_override_fails_before_anything_runs_and_names_the_cell(tmp_path, capsys):
    path = recipe_file(tmp_path, "seeds: 1\ngrid: {train.group_size: [4, 0]}")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "cell 'group_size=0', seed 0" in err and "train.group_size" in err
    assert not (tmp_path / "out").exists()


def test_dry_run_lists_every_run_with_its_overrides(tmp_path, capsys):
    path = recipe_file(tmp_path, "seeds: 2\ngrid: {algo.preset: [grpo, rloo]}")
    assert main(["sweep", str(path), "--dry-run", "--cell", "*rloo", "train.steps=3"]) == 0
    out = capsys.readouterr().out
    assert "preset=rloo-s1: train.steps=3 algo.preset=rloo run.seed=1" in out
    assert "grpo" not in out and "2 runs" in out


def record(cell: str, seed: int, before: float, after: float, overrides=()) -> dict:
    curve = {"step": [1, 2, 3, 4], "time": [10.0, 20.0, 30.0, 40.0],
             "episodes": [8.0, 16.0, 24.0, 32.0], "success": [0.1, 0.5, 0.6, 0.7],
             "reward": [0.1, 0.5, 0.6, 0.7]}
    return {"cell": cell, "seed": seed, "overrides": list(overrides), "run_dir": "x",
            "before": {"success": before}, "after": {"success": after}, "wall_time_s": 50.0,
            "sft_wall_time_s": 5.0, "curve": curve, "evals": {}, "alarms": [], "git": None}


def test_a_record_made_with_other_overrides_stops_the_sweep_and_says_so(tmp_path):
    path = recipe_file(tmp_path, "seeds: 1\noverrides: [train.steps=3]")
    recipe = load_recipe(path)
    runs = plan_runs(recipe)
    folder = tmp_path / "res" / "records"
    folder.mkdir(parents=True)
    (folder / f"{runs[0].name}.json").write_text(json.dumps(
        record("base", 0, 0.1, 0.2, ["train.steps=5", "run.seed=0"])))
    with pytest.raises(RecipeError, match="base-s0 was made with different overrides"):
        run_sweep(recipe, runs, out=tmp_path / "out", results=tmp_path / "res", jobs=1,
                  git=None, threads=1)


def test_a_record_made_from_an_edited_base_config_stops_the_sweep(tmp_path):
    (tmp_path / "base.yaml").write_text("train:\n  lr: 1.0e-4\n")
    path = recipe_file(tmp_path, "seeds: 1\nconfig: base.yaml")
    runs = plan_runs(load_recipe(path))
    folder = tmp_path / "res" / "records"
    folder.mkdir(parents=True)
    made = {**record("base", 0, 0.1, 0.2, runs[0].overrides), "config_key": runs[0].config_key}
    (folder / f"{runs[0].name}.json").write_text(json.dumps(made))
    same = plan_runs(load_recipe(path))
    assert same[0].config_key == runs[0].config_key
    (tmp_path / "base.yaml").write_text("train:\n  lr: 2.0e-4\n")  # edited since
    edited = plan_runs(load_recipe(path))
    with pytest.raises(RecipeError, match="base-s0 was made from another config"):
        run_sweep(load_recipe(path), edited, out=tmp_path / "out", results=tmp_path / "res",
                  jobs=1, git=None)


def test_threads_come_from_the_option_unless_the_overrides_set_them(tmp_path):
    from turnrl.sweep.runner import _Sweep

    def threads(body: str, **kwargs) -> list[list[str]]:
        recipe = load_recipe(recipe_file(tmp_path, body))
        sweep = _Sweep(recipe, plan_runs(recipe), out=tmp_path / "out",
                       results=tmp_path / "res", git=None, **kwargs)
        return [[item for item in task.command if item.startswith("run.threads=")]
                for task in sweep.tasks]

    cpus = os.cpu_count() or 1
    assert threads("seeds: 2", jobs=1, threads=None) == [[f"run.threads={cpus}"]] * 4
    assert threads("seeds: 2", jobs=1, threads=1) == [["run.threads=1"]] * 4  # SFT, RL x2
    assert threads("seeds: 1\noverrides: [run.threads=3]", jobs=1, threads=1) == \
        [["run.threads=3"]] * 2


def test_sweep_counts_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "r.yaml", "--threads", "0"])
    assert "'0' is not a positive integer" in capsys.readouterr().err


def test_time_to_target_reads_the_moving_average():
    curve = record("a", 0, 0, 0)["curve"]
    assert time_to_target(curve, 0.39) == (24.0, 30.0)  # (0.1 + 0.5 + 0.6) / 3 = 0.4
    assert time_to_target(curve, 0.59) == (32.0, 40.0)  # (0.5 + 0.6 + 0.7) / 3
    assert time_to_target(curve, 0.61) is None


def test_summary_gain_wins_and_improvement():
    records = {f"{c}-s{s}": record(c, s, 0.2, after)
               for c, afters in {"good": [0.5, 0.6, 0.55, 0.7, 0.65],
                                 "flat": [0.2, 0.19, 0.21, 0.2, 0.18]}.items()
               for s, after in enumerate(afters)}
    summary = summarize(records, order=["good", "flat"], metric="success", target=0.5)
    good, flat = summary["cells"]
    assert good["cell"] == "good" and good["wins"] == 5 and flat["wins"] == 1
    point, low, high = good["gain"]
    assert point == pytest.approx(0.4) and low > 0.3 and high < 0.5
    assert flat["gain"][1] < 0 < flat["gain"][2]  # an interval across zero
    assert good["iqm"][0] == pytest.approx(np.mean([0.55, 0.6, 0.65]), abs=1e-9)
    assert summary["improvement"]["good > flat"][0] == 1.0
    assert summary["improvement"]["flat > good"][0] == 0.0
    # moving averages 0.4, 0.6: the target 0.5 is reached at step 4
    assert good["target"] == {"reached": 5, "episodes": [32.0] * 5, "seconds": [40.0] * 5}


def test_results_files(tmp_path):
    records = {f"{c}-s{s}": record(c, s, 0.1, 0.1 + 0.1 * s + (c == "b") * 0.3)
               for c in ("a", "b") for s in range(3)}
    path = write_results(records, tmp_path, order=["b", "a"], metric="success",
                         header=["# t"], title="t")
    text = path.read_text()
    assert text.startswith("# t\n")
    rows = [line for line in text.splitlines() if line.startswith("| b |")]
    assert rows[0].startswith("| b | 3 | 0.100 | 0.500 [")  # the order given, IQM of 3 = mid
    assert "- a: s0: 0.100 → 0.100, s1: 0.100 → 0.200, s2: 0.100 → 0.300" in text
    assert (tmp_path / "results.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "results.json").read_text())["cells"][0]["wins"] == 3


def test_sigterm_stops_the_running_processes_with_sigint_and_says_interrupted(
        tmp_path, monkeypatch):
    """What Ctrl-C or SIGTERM does to a sweep: every running process gets SIGTERM (a turnrl
    run saves a checkpoint and exits 143), the sweep waits for them and reports it; also
    when the sweep was started with SIGINT ignored, as a shell's background job is."""
    import signal
    import sys
    import threading

    from turnrl.sweep import runner

    marker = tmp_path / "got-sigterm"
    child = (f"import signal, sys, time\n"
             f"def stop(*a):\n    open({str(marker)!r}, 'w').close()\n    sys.exit(143)\n"
             f"signal.signal(signal.SIGTERM, stop)\ntime.sleep(60)\n")
    monkeypatch.setattr(runner, "_turnrl", lambda *args: [sys.executable, "-c", child])
    recipe = load_recipe(recipe_file(tmp_path, "seeds: 2\nshare_sft: false"))
    before = signal.getsignal(signal.SIGTERM)
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job's children
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        outcome = run_sweep(recipe, plan_runs(recipe), out=tmp_path / "out",
                            results=tmp_path / "res", jobs=2, git=None)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, ignored)
    assert outcome.interrupted and outcome.ran == [] and marker.is_file()
    assert signal.getsignal(signal.SIGTERM) == before  # the handler was put back


def test_summary_only_without_records_says_so(tmp_path, capsys):
    path = recipe_file(tmp_path, "seeds: 1")
    assert main(["sweep", str(path), "--summary-only", "--out", str(tmp_path / "o")]) == 0
    assert f"no records in {tmp_path / 'o' / 'records'}" in capsys.readouterr().out


def test_the_curve_counts_what_a_resampling_filter_paid_for(tmp_path):
    """With dynamic_sampling a step logs the episodes played (dropped groups included) and
    their success before the filter; the curve, and so samples-to-target, reads those.
    A run without the filter logs only the plain keys, which the curve then reads."""
    from turnrl.report.runs import RunRecord
    from turnrl.sweep.records import _curve

    def run(rows):
        return RunRecord(tmp_path, "r", {}, [{"phase": "train", "time": 1.0 + i, **row}
                                             for i, row in enumerate(rows)], None)

    filtered = _curve(run([
        {"step": 1, "rollout/episodes": 64.0, "rollout/success": 0.5,
         "rollout/sampled_episodes": 128.0, "rollout/sampled_success": 0.25},
        {"step": 2, "rollout/episodes": 64.0, "rollout/success": 0.6,
         "rollout/sampled_episodes": 192.0, "rollout/sampled_success": 0.3}]))
    assert filtered["episodes"] == [128.0, 320.0] and filtered["success"] == [0.25, 0.3]
    plain = _curve(run([{"step": 1, "rollout/episodes": 64.0, "rollout/success": 0.5},
                        {"step": 2, "rollout/episodes": 64.0, "rollout/success": 0.6}]))
    assert plain["episodes"] == [64.0, 128.0] and plain["success"] == [0.5, 0.6]
