"""One JSON record per finished sweep run (``<results>/records/<cell>-s<seed>.json``):
what the results table is computed from, small enough to commit, and the sweep's resume
marker (a run with a record is done).

A record: ``cell``, ``seed``, ``overrides`` (every override of the run, in order),
``config_key`` (its whole resolved config, hashed: :func:`turnrl.sweep.recipe.config_key`),
``run_dir``,
``before`` (held-out metrics after SFT, before RL; from the shared SFT run when there is one),
``after`` (after RL), ``wall_time_s`` (the RL run, as its ``eval.json`` says), ``process_s``
(its process, start to exit; None when the record was rewritten from a finished run) and
``sft_wall_time_s`` (the shared SFT process; None without one), ``curve`` (per RL step:
``step``, ``time`` (seconds since the run's logger started), ``episodes`` (cumulative,
every episode played: with ``dynamic_sampling`` the dropped groups too), ``success`` (of
those episodes, before any resampling filter), ``reward``), ``evals`` (``step`` →
held-out ``success``), ``alarms`` (the names of alarms that fired), ``git``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from turnrl.io import atomic_write_text
from turnrl.report.curves import alarm_events
from turnrl.report.runs import RunRecord, load_run

__all__ = ["SFT_WALL_TIME", "read_records", "run_record", "sft_summary", "write_record"]

SFT_WALL_TIME = "sweep_wall_time_s.txt"  # in a shared SFT run's dir, once it finished


def _last_eval(run: RunRecord) -> dict[str, float] | None:
    evals = run.phase("eval")
    if not evals:
        return None
    return {k.removeprefix("eval/"): v for k, v in evals[-1].items() if k.startswith("eval/")}


def sft_summary(sft_run_dir: Path) -> tuple[dict[str, float], float] | None:
    """The held-out metrics of a finished ``turnrl sft`` run of the sweep and the seconds
    its process took (``SFT_WALL_TIME``, written by the sweep), or None."""
    if not (sft_run_dir / SFT_WALL_TIME).is_file():
        return None
    summary = _last_eval(load_run(sft_run_dir))
    if summary is None:
        return None
    return summary, float((sft_run_dir / SFT_WALL_TIME).read_text())


def _curve(run: RunRecord) -> dict[str, list[float]]:
    rows = run.phase("train")
    episodes = 0.0
    curve: dict[str, list[float]] = {"step": [], "time": [], "episodes": [], "success": [],
                                     "reward": []}
    for row in rows:
        # with a resampling filter (dynamic_sampling), what was paid for: every episode
        # played and its success before the filter (runs without one log only the plain keys)
        episodes += float(row.get("rollout/sampled_episodes", row.get("rollout/episodes", 0.0)))
        success = row.get("rollout/sampled_success", row.get("rollout/success", math.nan))
        curve["step"].append(row["step"])
        curve["time"].append(round(float(row.get("time", math.nan)), 3))
        curve["episodes"].append(episodes)
        curve["success"].append(round(float(success), 5))
        curve["reward"].append(round(float(row.get("reward/mean", math.nan)), 5))
    return curve


def run_record(run_dir: Path, *, cell: str, seed: int, overrides: list[str], config_key: str,
               before: dict[str, float] | None, sft_wall_time_s: float | None,
               process_s: float | None, git: str | None) -> dict[str, Any]:
    """The record of the finished run at ``run_dir`` (its ``eval.json`` must exist)."""
    run = load_run(run_dir)
    assert run.evaluation is not None, f"{run_dir} has not finished"
    before = before or run.evaluation.get("before")
    if before is None:
        raise ValueError(f"{run_dir}: no evaluation before RL (eval.before_training=false "
                         "and no shared SFT start); the sweep needs one for the gain")
    alarms = sorted({name for _, names in alarm_events(run) for name in names})
    return {"cell": cell, "seed": seed, "overrides": overrides, "config_key": config_key,
            "run_dir": str(run_dir),
            "before": before, "after": run.evaluation["after"],
            "wall_time_s": run.evaluation.get("wall_time_s"), "process_s": process_s,
            "sft_wall_time_s": sft_wall_time_s, "curve": _curve(run),
            "evals": {str(row["step"]): row.get("eval/success") for row in run.phase("eval")},
            "alarms": alarms, "git": git}


def write_record(results: Path, name: str, record: dict[str, Any]) -> Path:
    path = results / "records" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=1) + "\n")
    return path


def read_records(results: Path) -> dict[str, dict[str, Any]]:
    """The records under ``results/records/``, by run name."""
    folder = results / "records"
    if not folder.is_dir():
        return {}
    return {path.stem: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(folder.glob("*.json"))}
