"""The data the report and compare pages are built from: run reading, curves, alarms,
timings, evaluation tables, token colours, episode views and groups (turnrl.report)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import yaml

from turnrl.report import ReportError, expand_runs, load_run
from turnrl.report import curves as c
from turnrl.report.colours import PALETTES, Scale, codes, fit_scale
from turnrl.report.episodes import choose_steps, episode_view, fit_scales, groups, index_row
from turnrl.report.runs import config_value


def write_run(root: Path, name: str, rows: list[dict], *, config: dict | None = None,
              evaluation: dict | None = None, samples: dict[int, list[dict]] | None = None
              ) -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "config.yaml").write_text(yaml.safe_dump(config or {
        "env": {"id": "frozenlake-v0"}, "algo": {"preset": "grpo"}, "train": {"steps": 3},
        "eval": {"before_training": True}}))
    if evaluation is not None:
        (run / "eval.json").write_text(json.dumps(evaluation))
    for step, episodes in (samples or {}).items():
        (run / "samples").mkdir(exist_ok=True)
        (run / "samples" / f"step_{step}.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in episodes))
    return run


def train_row(step: int, **metrics: float) -> dict:
    return {"step": step, "phase": "train", "time": float(step), **metrics}


# ---------------------------------------------------------------------- reading runs
def test_a_half_written_last_line_is_skipped_and_a_damaged_one_is_an_error(tmp_path):
    run = write_run(tmp_path, "r", [train_row(1, **{"reward/mean": 0.5})])
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 2, "phase": "tr')
    assert [row["step"] for row in load_run(run).rows] == [1]
    (run / "metrics.jsonl").write_text('{"step": 1\n' + json.dumps(train_row(2)) + "\n")
    with pytest.raises(ReportError, match=r"metrics.jsonl:1: not a JSON line"):
        load_run(run)


def test_paths_that_are_not_runs_get_a_clear_error(tmp_path):
    with pytest.raises(ReportError, match="no such run directory"):
        load_run(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match=r"no metrics\.jsonl"):
        load_run(tmp_path / "empty")
    with pytest.raises(ReportError, match="matches no run directory"):
        expand_runs([str(tmp_path / "nothing-*")])


def test_runs_expand_from_globs_and_from_a_directory_of_runs(tmp_path):
    for name in ("a-1", "a-2", "b-1"):
        write_run(tmp_path / "runs", name, [train_row(1)])
    names = [p.name for p in expand_runs([str(tmp_path / "runs" / "a-*")])]
    assert names == ["a-1", "a-2"]
    assert [p.name for p in expand_runs([str(tmp_path / "runs")])] == ["a-1", "a-2", "b-1"]
    # the same run twice is kept once
    assert len(expand_runs([str(tmp_path / "runs" / "a-1"), str(tmp_path / "runs" / "a-*")])) == 2


def test_config_value_names_the_missing_key(tmp_path):
    run = load_run(write_run(tmp_path, "r", [train_row(1)]))
    assert config_value(run, "algo.preset") == "grpo"
    with pytest.raises(ReportError, match=r"no key 'algo.prest' \(at 'prest'; there: preset\)"):
        config_value(run, "algo.prest")


# ---------------------------------------------------------------------- curves
def test_curves_skip_missing_points_divide_per_turn_and_carry_intervals(tmp_path):
    rows = [train_row(1, **{"rollout/sampled_tokens": 30.0, "rollout/turns": 6.0}),
            train_row(2, **{"rollout/turns": 5.0}),
            train_row(3, **{"rollout/sampled_tokens": 20.0, "rollout/turns": 4.0}),
            {"step": 0, "phase": "eval", "eval/success": 0.25, "eval/success_lo": 0.2,
             "eval/success_hi": 0.3},
            {"step": 3, "phase": "eval", "eval/success": 0.5}]
    run = load_run(write_run(tmp_path, "r", rows))
    reply = c.curve(run, c.Series("rollout/sampled_tokens", "", per_turn=True))
    assert (reply.x, reply.y) == ([1, 3], [5.0, 5.0])
    held_out = c.curve(run, c.Series("eval/success", "", "eval", interval=True))
    assert (held_out.x, held_out.y, held_out.lo, held_out.hi) == (
        [0, 3], [0.25, 0.5], [0.2, 0.5], [0.3, 0.5])  # no interval logged: the point itself


def test_after_a_rollback_the_rerun_steps_replace_the_first_ones(tmp_path):
    rows = [train_row(1, **{"reward/mean": 0.1}), train_row(2, **{"reward/mean": 0.2}),
            train_row(3, **{"reward/mean": 0.0, "alarm/entropy_collapse": 1.0,
                             "alarm/kl_blowup": 0.0}),
            {"step": 3, "phase": "alarm", "alarm/rollback_to": 1.0, "alarm/lr_scale": 0.5},
            train_row(2, **{"reward/mean": 0.4}), train_row(3, **{"reward/mean": 0.5})]
    run = load_run(write_run(tmp_path, "r", rows))
    points = c.curve(run, c.Series("reward/mean", ""))
    assert (points.x, points.y) == ([1, 2, 3], [0.1, 0.4, 0.5])
    assert c.rollbacks(run) == [(3, 1)]
    assert c.alarm_events(run) == []  # the step that fired was replaced by its re-run
    run.rows.append(train_row(4, **{"alarm/entropy_collapse": 1.0, "alarm/kl_blowup": 1.0}))
    assert c.alarm_events(run) == [(4, ["entropy_collapse", "kl_blowup"])]


def test_timings_split_rollout_update_and_evaluation(tmp_path):
    rows = [train_row(1, **{"perf/step_s": 3.0, "perf/rollout_s": 1.0, "perf/update_s": 2.0}),
            {"step": 1, "phase": "eval", "eval/success": 0.5, "perf/eval_s": 4.0},
            {"step": 0, "phase": "eval", "eval/success": 0.5}]  # an older run: no eval time
    t = c.timings(load_run(write_run(tmp_path, "r", rows)))
    assert t == {"steps": [1], "rollout": [1.0], "update": [2.0], "eval_steps": [1],
                 "eval": [4.0]}


def test_eval_table_labels_and_pass_at_k(tmp_path):
    def evaluation(step: int, success: float) -> dict:
        return {"step": step, "phase": "eval", "eval/success": success,
                "eval/success_lo": success - 0.1, "eval/success_hi": success + 0.1,
                "eval/episodes": 64.0, "eval/pass@1": success, "eval/pass@4": success + 0.2,
                "eval/pass@4_lo": success + 0.1, "eval/pass@4_hi": success + 0.3}

    run = load_run(write_run(tmp_path, "r", [evaluation(0, 0.2), evaluation(2, 0.3),
                                             evaluation(3, 0.4)], evaluation={}))
    table = c.eval_table(run)
    assert [e["label"] for e in table] == ["before RL", "step 2", "after RL"]
    assert table[0]["success"] == {"value": 0.2, "lo": pytest.approx(0.1),
                                   "hi": pytest.approx(0.3)}
    assert table[0]["pass@1"]["lo"] is None
    curves = c.pass_at_k(run)
    assert [p["k"] for p in curves] == [[1, 4]] * 3
    assert curves[2]["value"] == [0.4, pytest.approx(0.6)]
    assert curves[2]["lo"] == [0.4, pytest.approx(0.5)]  # pass@1 had no interval


# ---------------------------------------------------------------------- token colours
def test_the_advantage_scale_is_symmetric_with_zero_in_the_middle_bin():
    scale = fit_scale("advantage", [-2.0, 0.5, 1.0] + [0.1] * 97)
    assert scale.lo == -scale.hi and scale.hi == pytest.approx(1.0)  # 99th percentile of |a|
    n = len(PALETTES["advantage"])
    assert scale.bin(0.0) == n // 2
    assert scale.bin(-1.0) == 0 and scale.bin(-5.0) == 0  # clamped
    assert scale.bin(1.0) == n - 1 and scale.bin(9.0) == n - 1
    assert scale.bin(-0.3) < n // 2 < scale.bin(0.3)


def test_unlikely_tokens_are_dark_on_the_logprob_scale():
    scale = fit_scale("logprob", [-0.01, -0.5, -3.0])
    assert (scale.lo, scale.hi, scale.reverse) == (-3.0, 0.0, True)
    assert scale.bin(-0.001) == 0  # pale: nearly certain
    assert scale.bin(-3.0) == len(PALETTES["logprob"]) - 1  # darkest
    assert fit_scale("logprob", [-0.1, -0.2]).lo == -1.0  # at least one nat of range


def test_codes_colour_only_sampled_tokens_and_the_mask_mode_shows_the_mask():
    mask = [0, 0, 1, 1, 0, 1]
    assert codes(Scale("mask", 0, 1), [0, 0, 1, 1, 0, 1], mask) == "--00-0"
    scale = Scale("advantage", -1.0, 1.0)
    assert codes(scale, [9.0, 9.0, -1.0, 0.0, 9.0, 1.0], mask) == "--04-8"
    assert codes(scale, [0.0, 0.0, float("nan"), 0.0, 0.0, 0.0], mask) == "---4-4"


# ---------------------------------------------------------------------- episodes
def episode(group: int, *, reward: float, mask: list[int], turns: list[int],
            advantages: list[float], content: str = "search[cats]") -> dict:
    n = len(mask)
    return {"env_id": "search-qa-v0", "seed": 7, "group_id": group,
            "messages": [{"role": "user", "content": "Q?"},
                         {"role": "assistant", "content": content},
                         {"role": "tool", "content": "cats are mammals"},
                         {"role": "assistant", "content": "answer[yes]"}],
            "token_ids": list(range(n)), "loss_mask": mask, "turn_index": turns,
            "logprobs": [-0.5 * m for m in mask], "advantages": advantages,
            "entropies": [0.25] * n, "learner_logprobs": [-0.5 * m + 0.01 for m in mask],
            "env_rewards": [0.0, reward], "turn_rewards": [0.0, reward],
            "terminated": True, "truncated": False, "success": reward > 0}


def test_episode_view_summarises_turns_and_colours_tokens(tmp_path):
    mask, turns = [0, 0, 1, 1, 0, 1], [-1, -1, 0, 0, -1, 1]
    e = episode(3, reward=1.0, mask=mask, turns=turns,
                advantages=[0.0, 0.0, 0.5, 1.5, 0.0, -1.0])
    run = load_run(write_run(tmp_path, "r", [train_row(1)], samples={1: [e]}))
    scales = fit_scales([e])
    assert set(scales) == {"mask", "advantage", "logprob", "entropy", "logprob_diff"}
    view = episode_view(run, 1, 0, e, scales)
    assert [t["advantage"] for t in view["turn_rewards"]] == [1.0, -1.0]  # mean per turn
    assert [t["tokens"] for t in view["turn_rewards"]] == [2, 1]
    assert [t["reward"] for t in view["turn_rewards"]] == [0.0, 1.0]
    assert view["codes"]["mask"] == "--00-0"
    assert all(len(code) == 6 for code in view["codes"].values())
    assert view["values"]["advantage"] == [0.5, 1.5, -1.0]  # only the sampled tokens'
    assert view["values"]["logprob_diff"] == pytest.approx([0.01] * 3)
    first_reply = view["messages"][1]
    assert first_reply["calls"] == [{"name": "search", "arguments": "cats", "problem": None,
                                     "start": 0, "end": 12}]
    assert "calls" not in view["messages"][2]  # a tool result is not searched for calls


def test_an_episode_without_learner_statistics_has_no_entropy_mode(tmp_path):
    e = episode(0, reward=0.0, mask=[0, 1], turns=[-1, 0], advantages=[0.0, 0.2])
    del e["entropies"], e["learner_logprobs"]
    assert set(fit_scales([e])) == {"mask", "advantage", "logprob"}


def test_steps_are_chosen_evenly_with_the_first_and_last_and_groups_are_per_step():
    steps = list(range(1, 1001))
    chosen = choose_steps(steps, per_step=64, max_episodes=2000)
    assert len(chosen) == 31 and chosen[0] == 1 and chosen[-1] == 1000
    gaps = {b - a for a, b in itertools.pairwise(chosen)}
    assert max(gaps) - min(gaps) <= 1
    assert choose_steps([1, 2, 3], per_step=8, max_episodes=2000) == [1, 2, 3]
    assert choose_steps([1, 2, 3], per_step=8, max_episodes=4) == [3]
    rows = [index_row(s, i, episode(i // 2, reward=1.0, mask=[1], turns=[0],
                                    advantages=[0.0])) for s in (1, 2) for i in range(4)]
    assert groups(rows) == {(1, 0): [0, 1], (1, 1): [2, 3], (2, 0): [0, 1], (2, 1): [2, 3]}
    assert rows[0]["reward"] == 1.0 and rows[0]["turns"] == 2 and rows[0]["sampled"] == 1


def test_a_multi_agent_run_gets_panels_per_role_and_per_policy(tmp_path):
    rows = [train_row(1, **{"rollout/role/x/success": 0.25, "rollout/role/o/success": 0.5,
                            "policy/second/rollout/success": 0.5}),
            {"step": 1, "phase": "eval", "time": 1.0, "eval/vs_random/main/success": 0.3,
             "eval/vs_random/second/success": 0.6, "eval/vs_random/success": 0.45}]
    run = load_run(write_run(tmp_path, "r", rows))
    panels = {p.key: p for p in c.panels([run])}
    assert [s.metric for s in panels["roles"].series] == [
        "rollout/role/o/success", "rollout/role/x/success"]
    assert [(s.metric, s.label, s.phase) for s in panels["policies"].series] == [
        ("policy/second/rollout/success", "second (training)", "train"),
        ("eval/vs_random/main/success", "main vs random", "eval"),
        ("eval/vs_random/second/success", "second vs random", "eval")]
    assert c.curve(run, panels["policies"].series[2]).y == [0.6]
    assert list(panels)[-1] == "sft_loss"  # the SFT loss stays last
    single = load_run(write_run(tmp_path, "s", [train_row(1, **{"rollout/success": 0.5})]))
    assert {p.key for p in c.panels([single])} == {p.key for p in c.PANELS}
