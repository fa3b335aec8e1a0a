"""turnrl compare: grouping by a config key, rliable's statistics, the markdown table."""

from __future__ import annotations

import pytest

from fixture_runs import write_scored_runs as make_runs
from turnrl.cli import main
from turnrl.report import ReportError
from turnrl.report.compare import compare, final_score, markdown
from turnrl.report.runs import load_run

pytest.importorskip("rliable", reason="turnrl compare needs rliable: pip install "
                    "'turnrl[compare]'")


def test_iqm_improvement_and_curves_of_two_groups(tmp_path):
    low = make_runs(tmp_path, "grpo", [0.1, 0.2, 0.3, 0.4, 0.5])
    high = make_runs(tmp_path, "rloo", [0.6, 0.7, 0.8, 0.9, 1.0], curve=1.0)
    result = compare(low + high, by="algo.preset", reps=500)
    assert result.groups == ["grpo", "rloo"] and result.tasks == ["frozenlake-v0"]
    point, lo, hi = result.iqm["grpo"]
    assert point == pytest.approx(0.3)  # the middle three of five
    assert lo <= point <= hi and hi - lo > 0
    assert result.mean["rloo"][0] == pytest.approx(0.8)
    assert result.improvement[("rloo", "grpo")][0] == pytest.approx(1.0)
    assert result.improvement[("grpo", "rloo")][0] == pytest.approx(0.0)
    curve = result.curves["rloo"]
    assert curve["x"] == [1, 2, 3, 4]
    assert curve["y"][0] == pytest.approx(1.12)  # IQM of 1.10 … 1.14 at step 1
    profile = result.profiles["grpo"][0]
    assert profile[0] == pytest.approx(0.8) and profile[-1] == 0.0  # 4 of 5 above the lowest
    # reproducible: the same intervals twice
    again = compare(low + high, by="algo.preset", reps=500)
    assert again.iqm == result.iqm and again.improvement == result.improvement
    table = markdown(result)
    assert "| grpo | 5 | 0.300 [" in table and "| rloo | 1.000 [" in table


def test_unequal_seeds_per_env_and_runs_without_scores(tmp_path):
    runs = make_runs(tmp_path, "grpo", [0.1, 0.2]) + make_runs(tmp_path, "grpo", [0.3],
                                                                env="sokoban-v0")
    with pytest.raises(ReportError, match=r"'frozenlake-v0': 2, 'sokoban-v0': 1"):
        compare(runs, reps=100)
    unfinished = make_runs(tmp_path / "u", "ppo", [0.5])[0]
    (unfinished / "eval.json").unlink()
    assert final_score(load_run(unfinished), "success") is None
    result = compare([*make_runs(tmp_path / "ok", "grpo", [0.1, 0.2]), unfinished], reps=100)
    assert result.groups == ["grpo"] and "no held-out 'success' yet" in result.skipped[0]
    with pytest.raises(ReportError, match="none of the 1 runs"):
        compare([unfinished], reps=100)


def test_the_cli_prints_markdown_and_writes_the_page(tmp_path, capsys):
    make_runs(tmp_path / "runs", "grpo", [0.2, 0.4, 0.6])
    make_runs(tmp_path / "runs", "ppo", [0.3, 0.5, 0.7])
    out = tmp_path / "compare.html"
    assert main(["compare", str(tmp_path / "runs" / "*"), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| grpo | 3 | 0.400 [" in printed and "| ppo | 3 | 0.500 [" in printed
    assert f"compare page: {out}" in printed
    page = out.read_text()
    assert page.count('<tr data-group="') == 2
    assert main(["compare", str(tmp_path / "runs"), "--by", "algo.nope",
                 "-o", str(out)]) == 2
    assert "config has no key 'algo.nope'" in capsys.readouterr().err
