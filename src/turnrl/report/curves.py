"""The data behind a report's plots: learning curves, alarms, timings, evaluations.

Every function here reads :class:`~turnrl.report.runs.RunRecord` rows and returns plain
lists (what the page plots); :mod:`turnrl.report.figures` turns them into plotly figures.
A curve's x is the RL step (``step`` of ``train`` rows: 1 after the first update); held-out
evaluations sit at the step they were taken after (0: before RL).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from turnrl.report.runs import RunRecord

__all__ = ["PANELS", "Curve", "Panel", "Series", "alarm_events", "curve", "eval_table",
           "panels", "pass_at_k", "rollbacks", "timings"]


@dataclass(frozen=True)
class Series:
    """One line of a panel: ``metric`` of the ``phase`` rows; ``per_turn`` divides it by
    ``rollout/turns`` (sampled tokens per episode → per reply); ``interval``: the rows also
    hold ``<metric>_lo`` / ``_hi`` (a 95% interval, drawn as error bars)."""

    metric: str
    label: str
    phase: str = "train"
    interval: bool = False
    per_turn: bool = False


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    series: tuple[Series, ...]
    x_title: str = "RL step"
    if_nonzero: bool = False  # a counter: shown only when some run counted something


PANELS: tuple[Panel, ...] = (
    Panel("reward", "Reward per episode", (Series("reward/mean", "training episodes"),
                                           Series("eval/reward", "held-out", "eval", True))),
    Panel("success", "Success rate", (Series("rollout/success", "training episodes"),
                                      Series("eval/success", "held-out", "eval", True))),
    Panel("entropy", "Policy entropy (nats per token)", (Series("loss/entropy", "entropy"),)),
    Panel("kl", "KL", (Series("loss/approx_kl", "to the sampling policy (k3)"),
                       Series("rollout/kl_ref", "to the reference"))),
    Panel("grad_norm", "Gradient norm (before clipping)", (Series("loss/grad_norm", "norm"),)),
    Panel("clipfrac", "Clip fraction", (Series("loss/clipfrac", "clipped tokens"),)),
    Panel("reply_length", "Reply length (sampled tokens per turn)",
          (Series("rollout/sampled_tokens", "per turn", per_turn=True),)),
    Panel("length_finishes", "Replies cut by max_new_tokens (per episode)",
          (Series("rollout/length_finishes", "cut replies"),), if_nonzero=True),
    Panel("invalid", "Invalid actions per episode", (Series("rollout/invalid_actions",
                                                            "invalid actions"),),
          if_nonzero=True),
    Panel("turns", "Turns per episode", (Series("rollout/turns", "training episodes"),
                                         Series("eval/turns", "held-out", "eval", True))),
    Panel("tools", "Tool calls per episode", (Series("rollout/tool_calls", "calls"),
                                              Series("rollout/tool_errors", "errors")),
          if_nonzero=True),
    Panel("logprob_diff", "Engine vs learner |Δ log-prob| (sampled tokens)",
          (Series("rollout/logprob_abs_diff", "mean"),
           Series("rollout/logprob_abs_diff_max", "max"))),
    Panel("opponents", "Held-out outcomes by opponent (multi-agent)",
          (Series("eval/vs_random/win", "win vs random", "eval"),
           Series("eval/vs_oracle/win", "win vs oracle", "eval"),
           Series("eval/vs_oracle/draw", "draw vs oracle", "eval"),
           Series("eval/vs_frozen/win", "win vs frozen start", "eval"),
           Series("eval/vs_self/draw", "draw vs itself", "eval"))),
    Panel("rating", "Rating against frozen players (OpenSkill mu)",
          (Series("multi/rating", "the model"), Series("multi/pool_rating", "best pool member"))),
    Panel("sft_loss", "SFT loss", (Series("sft/loss", "loss", "sft"),), x_title="SFT step"),
)


def panels(runs: list[RunRecord]) -> tuple[Panel, ...]:
    """:data:`PANELS`, with the panels of a multi-agent run's roles and policies before the
    SFT loss: the training success of each agent a trained policy played
    (``rollout/role/<agent>/success``), and each separate policy's training success
    (``policy/<name>/rollout/success``) and held-out success per opponent
    (``eval/vs_<opponent>/<policy>/success``)."""
    keys = {key for run in runs for row in run.rows for key in row}
    roles = sorted({k.split("/")[2] for k in keys
                    if k.startswith("rollout/role/") and k.endswith("/success")})
    trained = sorted({k.split("/")[1] for k in keys
                      if k.startswith("policy/") and k.endswith("/rollout/success")})
    held_out = sorted(k for k in keys if k.startswith("eval/vs_") and k.count("/") == 3
                      and k.endswith("/success"))
    extra = []
    if roles:
        extra.append(Panel("roles", "Success per role (training episodes)", tuple(
            Series(f"rollout/role/{role}/success", role) for role in roles)))
    if trained or held_out:
        extra.append(Panel("policies", "Success per policy (separate policies)", (
            *(Series(f"policy/{name}/rollout/success", f"{name} (training)")
              for name in trained),
            *(Series(key, f"{key.split('/')[2]} vs {key.split('/')[1][3:]}", "eval")
              for key in held_out))))
    return (*PANELS[:-1], *extra, PANELS[-1])


@dataclass
class Curve:
    """Points of one series of one run; ``lo``/``hi`` are empty without an interval."""

    x: list[int]
    y: list[float]
    lo: list[float]
    hi: list[float]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def curve(run: RunRecord, series: Series) -> Curve:
    """The points of ``series`` in ``run`` (steps where the metric is missing or not
    finite are skipped)."""
    out = Curve([], [], [], [])
    for row in run.phase(series.phase):
        y = _number(row.get(series.metric))
        if y is None:
            continue
        if series.per_turn:
            turns = _number(row.get("rollout/turns"))
            if not turns:
                continue
            y /= turns
        out.x.append(int(row["step"]))
        out.y.append(y)
        if series.interval:
            lo, hi = _number(row.get(f"{series.metric}_lo")), _number(row.get(
                f"{series.metric}_hi"))
            out.lo.append(y if lo is None else lo)
            out.hi.append(y if hi is None else hi)
    return out


def alarm_events(run: RunRecord) -> list[tuple[int, list[str]]]:
    """``(step, [alarm names])`` for each RL step at which an alarm fired."""
    events = []
    for row in run.phase("train"):
        fired = sorted(key.removeprefix("alarm/") for key, value in row.items()
                       if key.startswith("alarm/") and value == 1.0)
        if fired:
            events.append((int(row["step"]), fired))
    return events


def rollbacks(run: RunRecord) -> list[tuple[int, int]]:
    """``(step, back to step)`` for each rollback (``alarms.on_alarm=rollback``), in order
    (rows are not de-duplicated: each rollback is an event)."""
    return [(int(row["step"]), int(row["alarm/rollback_to"])) for row in run.rows
            if row.get("phase") == "alarm" and "alarm/rollback_to" in row]


def timings(run: RunRecord) -> dict[str, list[float]]:
    """Seconds per RL step spent sampling (``rollout``) and updating (``update``), and per
    held-out evaluation (``eval``, at ``eval_steps``)."""
    train = [row for row in run.phase("train") if "perf/step_s" in row]
    evals = [row for row in run.phase("eval") if "perf/eval_s" in row]
    return {"steps": [row["step"] for row in train],
            "rollout": [float(row.get("perf/rollout_s", 0.0)) for row in train],
            "update": [float(row.get("perf/update_s", 0.0)) for row in train],
            "eval_steps": [row["step"] for row in evals],
            "eval": [float(row["perf/eval_s"]) for row in evals]}


EVAL_COLUMNS = ("success", "reward", "turns", "tokens")


def eval_table(run: RunRecord) -> list[dict[str, Any]]:
    """One row per held-out evaluation: ``label`` (before RL, step N, after RL), ``step``,
    ``episodes`` and, for each of :data:`EVAL_COLUMNS` and ``pass@k``, ``{"value", "lo",
    "hi"}`` (``lo``/``hi`` None where the evaluation has no interval for it)."""
    rows = run.phase("eval")
    steps = int(run.config.get("train", {}).get("steps", 0) or 0)
    table = []
    for i, row in enumerate(rows):
        label = f"step {row['step']}"
        if i == 0 and row["step"] == 0 and run.config.get("eval", {}).get("before_training"):
            label = "before RL"
        elif i == len(rows) - 1 and row["step"] == steps and (run.evaluation or i > 0):
            label = "after RL"
        entry: dict[str, Any] = {"label": label, "step": int(row["step"]),
                                 "episodes": row.get("eval/episodes")}
        names = [*EVAL_COLUMNS, *sorted((k.removeprefix("eval/") for k in row
                                         if k.startswith("eval/pass@") and
                                         not k.endswith(("_lo", "_hi"))),
                                        key=lambda n: int(n.removeprefix("pass@")))]
        for name in names:
            value = _number(row.get(f"eval/{name}"))
            if value is not None:
                entry[name] = {"value": value, "lo": _number(row.get(f"eval/{name}_lo")),
                               "hi": _number(row.get(f"eval/{name}_hi"))}
        table.append(entry)
    return table


def pass_at_k(run: RunRecord) -> list[dict[str, Any]]:
    """For each evaluation with pass@k at two or more k: ``{"label", "k": [...], "value":
    [...], "lo": [...], "hi": [...]}``; empty when only pass@1 was recorded."""
    curves = []
    for entry in eval_table(run):
        ks = sorted(int(name.removeprefix("pass@")) for name in entry
                    if name.startswith("pass@"))
        if len(ks) < 2:
            continue
        cells = [entry[f"pass@{k}"] for k in ks]
        curves.append({"label": entry["label"], "k": ks,
                       "value": [c["value"] for c in cells],
                       "lo": [c["lo"] if c["lo"] is not None else c["value"] for c in cells],
                       "hi": [c["hi"] if c["hi"] is not None else c["value"] for c in cells]})
    return curves
