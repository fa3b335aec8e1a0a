"""``turnrl compare RUN_OR_GLOB ... --by KEY``: runs grouped by a config key, seeds pooled,
with the statistics recommended for RL across seeds (Agarwal et al., 2021, "Deep RL at the
Edge of the Statistical Precipice"), computed by ``rliable``:

- the interquartile mean (IQM: the mean of the middle 50% of runs) and the mean of each
  group's final held-out score, with stratified-bootstrap 95% intervals (runs resampled
  within each task; tasks are the env ids);
- the probability of improvement ``P(X > Y)`` of each ordered pair of groups, with its
  interval;
- performance profiles (the fraction of runs scoring above τ, for τ over the scores'
  range) with bands;
- learning curves: each group's IQM of a training metric at each step, with a band.

A run's score is its held-out ``--metric`` after training (``eval.json``'s ``after``; the
newest evaluation of a run still going). The same numbers go to stdout as markdown.
"""

from __future__ import annotations

import contextlib
import datetime
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from turnrl.report import figures
from turnrl.report.page import render, write_page
from turnrl.report.runs import ReportError, RunRecord, config_value, load_run

__all__ = ["Comparison", "ScoreStats", "compare", "final_score", "iqm_band", "markdown",
           "score_stats", "write_compare"]

REPS = 2000  # bootstrap replications
CURVE_POINTS = 60  # most x positions of a learning curve's band


def _rliable() -> tuple[Any, Any]:
    try:
        from rliable import library, metrics
    except ImportError as error:
        raise ReportError(f"turnrl compare needs rliable ({error}); install it with "
                          "pip install 'turnrl[compare]'") from None
    return library, metrics


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[np.random.RandomState]:
    """rliable's two-sample bootstrap draws from numpy's global generator: seed it for
    reproducible intervals, and put it back afterwards. (arch, under rliable, warns that
    ``random_state`` is deprecated in its API; that is rliable's call to change.)"""
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module="arch")
            yield np.random.RandomState(seed)
    finally:
        np.random.set_state(saved)


def final_score(run: RunRecord, metric: str) -> float | None:
    """The run's held-out ``metric`` after training, or its newest evaluation's."""
    after = (run.evaluation or {}).get("after") or {}
    if metric in after:
        return float(after[metric])
    evals = [row for row in run.phase("eval") if f"eval/{metric}" in row]
    return float(evals[-1][f"eval/{metric}"]) if evals else None


@dataclass
class Comparison:
    """The statistics of one comparison (what the page and the markdown show)."""

    by: str
    metric: str
    curve_metric: str
    groups: list[str]
    tasks: list[str]
    runs: dict[str, list[str]]  # group → run names
    scores: dict[str, np.ndarray]  # group → (runs per task, tasks)
    iqm: dict[str, tuple[float, float, float]]  # point, lo, hi
    mean: dict[str, tuple[float, float, float]]
    improvement: dict[tuple[str, str], tuple[float, float, float]]  # P(X > Y)
    taus: list[float]
    profiles: dict[str, tuple[list[float], list[float], list[float]]]
    curves: dict[str, dict[str, list[float]]]  # group → x, y, lo, hi
    skipped: list[str]  # runs without a score, and why
    reps: int = REPS


def _group_key(value: Any) -> str:
    return str(value) if not isinstance(value, dict | list) else repr(value)


def _score_matrix(group: str, runs: list[RunRecord], scores: dict[str, float],
                  tasks: list[str]) -> np.ndarray:
    by_task: dict[str, list[float]] = {task: [] for task in tasks}
    for run in runs:
        by_task[str(config_value(run, "env.id"))].append(scores[str(run.path)])
    counts = {task: len(values) for task, values in by_task.items()}
    if len(set(counts.values())) != 1 or 0 in counts.values():
        raise ReportError(f"group {group!r} has {counts} runs per env; the stratified "
                          "bootstrap needs the same number of runs (seeds) on every env")
    return np.array([by_task[task] for task in tasks], dtype=float).T  # (runs, tasks)


def iqm_band(name: str, series: list[dict[int, float]], reps: int = 1000
             ) -> dict[str, list[float]] | None:
    """The IQM over runs of one metric at the steps every run logged (each run a
    ``{step: value}``), with a stratified-bootstrap 95% band (runs resampled at each step);
    ``{"x", "y", "lo", "hi"}``, or None when the runs share no step. At most
    ``CURVE_POINTS`` steps (evenly strided, the last one kept)."""
    library, metrics = _rliable()
    common = sorted(set.intersection(*(set(s) for s in series))) if series else []
    if not common:
        return None
    stride = max(1, -(-len(common) // CURVE_POINTS))
    steps = common[::stride] if common[-1] in common[::stride] else [*common[::stride],
                                                                     common[-1]]
    scores = np.array([[s[step] for step in steps] for s in series],
                      dtype=float)[:, None, :]  # (runs, 1 task, steps)
    with _seeded(1) as state:
        point, interval = library.get_interval_estimates(
            {name: scores}, lambda x: np.array([metrics.aggregate_iqm(x[..., t])
                                                 for t in range(x.shape[-1])]),
            reps=reps, random_state=state)
    return {"x": steps, "y": point[name].tolist(), "lo": interval[name][0].tolist(),
            "hi": interval[name][1].tolist()}


def _curves(grouped: dict[str, list[RunRecord]], metric: str, reps: int
            ) -> dict[str, dict[str, list[float]]]:
    """Each group's :func:`iqm_band` of ``metric`` (its runs' train rows)."""
    out = {}
    for name, runs in grouped.items():
        band = iqm_band(name, [{row["step"]: row[metric] for row in run.phase("train")
                                if metric in row} for run in runs], reps)
        if band is not None:
            out[name] = band
    return out


@dataclass
class ScoreStats:
    """rliable's aggregates of groups' score matrices (each ``(runs, tasks)``): (point, lo,
    hi) of the IQM and the mean, ``P(X > Y)`` of each ordered pair, performance profiles
    (the fraction of runs above each τ in ``taus``: point, lo, hi)."""

    iqm: dict[str, tuple[float, float, float]]
    mean: dict[str, tuple[float, float, float]]
    improvement: dict[tuple[str, str], tuple[float, float, float]]
    taus: list[float]
    profiles: dict[str, tuple[list[float], list[float], list[float]]]


def score_stats(matrices: dict[str, np.ndarray], reps: int = REPS, *,
                pairs: bool | Sequence[tuple[str, str]] = True) -> ScoreStats:
    """IQM, mean, probability of improvement ``P(X > Y)`` (of every ordered pair, of the
    ``(X, Y)`` pairs listed, or none when ``pairs`` is False: each pair costs a bootstrap)
    and profiles of ``matrices`` (group → ``(runs, tasks)`` scores), with
    stratified-bootstrap 95% intervals, seeded."""
    library, metrics = _rliable()
    names = sorted(matrices)

    def aggregates(x: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x)])

    with _seeded(0) as state:
        point, interval = library.get_interval_estimates(matrices, aggregates, reps=reps,
                                                         random_state=state)
    iqm = {n: (float(point[n][0]), float(interval[n][0][0]), float(interval[n][1][0]))
           for n in names}
    mean = {n: (float(point[n][1]), float(interval[n][0][1]), float(interval[n][1][1]))
            for n in names}
    improvement = {}
    chosen = (pairs if not isinstance(pairs, bool) else
              [(a, b) for a in names for b in names if a != b] if pairs else [])
    ordered = {f"{a}\x00{b}": (matrices[a], matrices[b]) for a, b in chosen}
    if ordered:
        with _seeded(0) as state:
            p_point, p_interval = library.get_interval_estimates(
                ordered, metrics.probability_of_improvement, reps=reps, random_state=state)
        for key in ordered:
            a, b = key.split("\x00")
            low, high = np.ravel(p_interval[key])
            improvement[(a, b)] = (float(p_point[key]), float(low), float(high))
    every = np.concatenate([m.ravel() for m in matrices.values()])
    low, high = float(every.min()), float(every.max())
    taus = np.linspace(low, high if high > low else low + 1.0, 41)
    with _seeded(0) as state:
        p_point, p_interval = library.get_interval_estimates(
            matrices, lambda x: library.score_distributions(x, taus), reps=reps,
            random_state=state)
    profiles = {n: (p_point[n].tolist(), p_interval[n][0].tolist(), p_interval[n][1].tolist())
                for n in names}
    return ScoreStats(iqm, mean, improvement, taus.tolist(), profiles)


def compare(paths: list[Path], *, by: str = "algo.preset", metric: str = "success",
            curve_metric: str = "rollout/success", reps: int = REPS) -> Comparison:
    """Group the runs at ``paths`` by the config key ``by`` and compute the statistics."""
    runs = [load_run(path) for path in paths]
    grouped: dict[str, list[RunRecord]] = {}
    scores: dict[str, float] = {}
    skipped = []
    for run in runs:
        score = final_score(run, metric)
        if score is None:
            skipped.append(f"{run.path}: no held-out {metric!r} yet")
            continue
        scores[str(run.path)] = score
        grouped.setdefault(_group_key(config_value(run, by)), []).append(run)
    if not grouped:
        raise ReportError(f"none of the {len(runs)} runs has a held-out {metric!r} to compare"
                          + (f" ({skipped[0]})" if skipped else ""))
    tasks = sorted({str(config_value(run, "env.id")) for g in grouped.values() for run in g})
    names = sorted(grouped)
    matrices = {name: _score_matrix(name, grouped[name], scores, tasks) for name in names}
    stats = score_stats(matrices, reps)
    return Comparison(by, metric, curve_metric, names, tasks,
                      {n: [run.name for run in grouped[n]] for n in names}, matrices,
                      stats.iqm, stats.mean, stats.improvement, stats.taus, stats.profiles,
                      _curves(grouped, curve_metric, min(reps, 1000)), skipped, reps)


def _cell(value: tuple[float, float, float]) -> str:
    return f"{value[0]:.3f} [{value[1]:.3f}, {value[2]:.3f}]"


def markdown(result: Comparison) -> str:
    """The comparison as markdown tables (paste into a paper or a PR)."""
    lines = [f"Held-out {result.metric} after training, runs grouped by `{result.by}` "
             f"(tasks: {', '.join(result.tasks)}; 95% stratified-bootstrap intervals, "
             "rliable)", "",
             f"| {result.by} | runs | IQM [95% CI] | mean [95% CI] | per-run scores |",
             "|---|---|---|---|---|"]
    for name in result.groups:
        runs = result.scores[name]
        per_run = ", ".join(f"{v:.3f}" for v in runs.ravel())
        lines.append(f"| {name} | {runs.size} | {_cell(result.iqm[name])} | "
                     f"{_cell(result.mean[name])} | {per_run} |")
    if result.improvement:
        lines += ["", "Probability of improvement P(row > column) [95% CI]:", "",
                  "| | " + " | ".join(result.groups) + " |",
                  "|---|" + "---|" * len(result.groups)]
        for a in result.groups:
            cells = ["—" if a == b else _cell(result.improvement[(a, b)])
                     for b in result.groups]
            lines.append(f"| {a} | " + " | ".join(cells) + " |")
    for note in result.skipped:
        lines.append(f"\nskipped: {note}")
    return "\n".join(lines) + "\n"


def _figures(result: Comparison) -> list[dict[str, Any]]:
    out = []
    if result.curves:
        out.append(figures.band_figure(
            "curves", f"{result.curve_metric} (IQM over runs, 95% band)", "RL step",
            result.curve_metric, [{"name": name, **curve}
                                  for name, curve in result.curves.items()]))
    out.append(figures.profile_figure(result.taus, [
        {"name": n, "y": p[0], "lo": p[1], "hi": p[2]} for n, p in result.profiles.items()]))
    return out


def build_compare(result: Comparison) -> str:
    """The compare page of ``result``, as HTML text."""
    rows = [{"name": name, "runs": result.runs[name], "n": int(result.scores[name].size),
             "iqm": result.iqm[name], "mean": result.mean[name],
             "scores": result.scores[name].ravel().tolist()} for name in result.groups]
    data = {"figures": _figures(result)}
    generated = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return render("compare.html.j2", {
        "result": result, "rows": rows, "data": data, "figures": data["figures"],
        "generated": generated, "markdown": markdown(result), "reps": result.reps}, scripts=())


def write_compare(result: Comparison, out: Path) -> Path:
    return write_page(out, build_compare(result))
