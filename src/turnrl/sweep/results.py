"""A sweep's results table (``results.md``, ``results.json``) and plot (``results.png``),
computed from its run records with the statistics of ``turnrl compare`` (rliable).

Per cell (seeds pooled): the held-out ``metric`` after SFT (the start RL had) and after RL,
the interquartile mean and mean after RL with stratified-bootstrap 95% intervals, the mean
gain (after − before, per seed) with its interval, on how many seeds RL beat its start, and
the median RL wall time. With a ``target``, also how many runs reached it (the training
success's 3-step moving average ≥ target) and the median samples and seconds that took.
Then the probability of improvement ``P(row > column)`` of every pair of cells.
"""

from __future__ import annotations

import json
import statistics
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from turnrl.io import atomic_write_text
from turnrl.report.compare import iqm_band, score_stats

__all__ = ["CellResult", "summarize", "time_to_target", "write_results"]


class CellResult:
    """One cell's records, as the table reads them."""

    def __init__(self, name: str, records: list[dict[str, Any]], metric: str) -> None:
        self.name, self.records, self.metric = name, records, metric
        self.seeds = [record["seed"] for record in records]
        self.before = np.array([float(r["before"][metric]) for r in records])
        self.after = np.array([float(r["after"][metric]) for r in records])

    @property
    def gain(self) -> np.ndarray:
        return self.after - self.before

    @property
    def wins(self) -> int:
        return int((self.gain > 0).sum())


def time_to_target(curve: dict[str, list[float]], target: float, window: int = 3
                   ) -> tuple[float, float] | None:
    """``(episodes, seconds)`` when the ``window``-step moving average of training success
    first reached ``target``, or None if it never did."""
    success = curve["success"]
    for end in range(window, len(success) + 1):
        if sum(success[end - window:end]) / window >= target:
            return curve["episodes"][end - 1], curve["time"][end - 1]
    return None


def _cells(records: dict[str, dict[str, Any]], order: list[str], metric: str
           ) -> list[CellResult]:
    by_cell: dict[str, list[dict[str, Any]]] = {}
    for record in records.values():
        by_cell.setdefault(record["cell"], []).append(record)
    names = [n for n in order if n in by_cell] + sorted(set(by_cell) - set(order))
    return [CellResult(n, sorted(by_cell[n], key=lambda r: r["seed"]), metric) for n in names]


def _ci(value: tuple[float, float, float]) -> str:
    return f"{value[0]:.3f} [{value[1]:.3f}, {value[2]:.3f}]"


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.0f}" if values else "—"


def summarize(records: dict[str, dict[str, Any]], *, order: list[str], metric: str,
              target: float | None = None, pairs: bool = True) -> dict[str, Any]:
    """The table's numbers (also ``results.json``'s ``cells``): per cell and per pair."""
    cells = _cells(records, order, metric)
    if not cells:
        return {"metric": metric, "cells": [], "improvement": {}}
    after = score_stats({c.name: c.after[:, None] for c in cells}, pairs=pairs)
    gains = score_stats({c.name: c.gain[:, None] for c in cells}, pairs=False)
    rows = []
    for cell in cells:
        row: dict[str, Any] = {
            "cell": cell.name, "seeds": cell.seeds, "before": cell.before.tolist(),
            "after": cell.after.tolist(), "before_mean": float(cell.before.mean()),
            "iqm": after.iqm[cell.name], "mean": after.mean[cell.name],
            "gain": gains.mean[cell.name], "wins": cell.wins,
            "wall_time_s": statistics.median(r["wall_time_s"] or 0.0 for r in cell.records),
            "alarms": sorted({a for r in cell.records for a in r.get("alarms", [])})}
        if target is not None:
            reached = [t for r in cell.records
                       if (t := time_to_target(r["curve"], target)) is not None]
            row["target"] = {"reached": len(reached),
                             "episodes": [e for e, _ in reached],
                             "seconds": [s for _, s in reached]}
        rows.append(row)
    return {"metric": metric, "target": target, "cells": rows,
            "improvement": {f"{a} > {b}": v for (a, b), v in after.improvement.items()}}


def _markdown(summary: dict[str, Any], header: list[str]) -> str:
    metric, target = summary["metric"], summary.get("target")
    lines = [*header, "",
             f"Held-out {metric} per cell over seeds: after SFT (RL's start), after RL (IQM "
             "and mean, 95% stratified-bootstrap intervals), the gain after − before (mean, "
             "95% interval), seeds where RL beat its start, median RL wall time.", ""]
    head = "| cell | seeds | after SFT | after RL: IQM | after RL: mean | gain | RL > SFT | RL s |"
    rule = "|---|---|---|---|---|---|---|---|"
    if target is not None:
        head += f" reached {target:g} | episodes to it | s to it |"
        rule += "---|---|---|"
    lines += [head, rule]
    for row in summary["cells"]:
        n = len(row["seeds"])
        line = (f"| {row['cell']} | {n} | {row['before_mean']:.3f} | {_ci(row['iqm'])} | "
                f"{_ci(row['mean'])} | {row['gain'][0]:+.3f} [{row['gain'][1]:+.3f}, "
                f"{row['gain'][2]:+.3f}] | {row['wins']}/{n} | {row['wall_time_s']:.0f} |")
        if target is not None:
            t = row["target"]
            line += (f" {t['reached']}/{n} | {_median(t['episodes'])} | "
                     f"{_median(t['seconds'])} |")
        lines.append(line)
    lines += ["", "Per seed (after SFT → after RL):", ""]
    for row in summary["cells"]:
        per_seed = zip(row["seeds"], row["before"], row["after"], strict=True)
        pairs = ", ".join(f"s{s}: {b:.3f} → {a:.3f}" for s, b, a in per_seed)
        alarms = f" (alarms: {', '.join(row['alarms'])})" if row["alarms"] else ""
        lines.append(f"- {row['cell']}: {pairs}{alarms}")
    names = [row["cell"] for row in summary["cells"]]
    if summary["improvement"]:
        lines += ["", "Probability of improvement P(row > column) of the held-out "
                  f"{metric} after RL [95% CI]:", "",
                  "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for a in names:
            cells = ["—" if a == b else _ci(summary["improvement"][f"{a} > {b}"])
                     for b in names]
            lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _plot(records: dict[str, dict[str, Any]], summary: dict[str, Any], path: Path,
          curve_x: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = summary["cells"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2),
                                      gridspec_kw={"width_ratios": [3, 2]})
    for index, row in enumerate(cells):
        colour = f"C{index % 10}"
        runs = [r for r in records.values() if r["cell"] == row["cell"]]
        if curve_x == "step":
            series = [dict(zip(r["curve"]["step"], r["curve"]["success"], strict=True))
                      for r in runs]
            band = iqm_band(row["cell"], series)
            if band is not None:
                left.plot(band["x"], band["y"], color=colour, label=row["cell"])
                left.fill_between(band["x"], band["lo"], band["hi"], color=colour, alpha=0.15)
        else:  # each run's own curve against samples or seconds
            for number, r in enumerate(runs):
                left.plot(r["curve"][curve_x], r["curve"]["success"], color=colour,
                          alpha=0.6, label=row["cell"] if number == 0 else None)
        y = len(cells) - 1 - index
        right.plot(row["after"], [y + 0.12] * len(row["after"]), "o", color=colour, alpha=0.6)
        right.plot(row["before"], [y - 0.12] * len(row["before"]), "x", color="grey", alpha=0.7)
        point, low, high = row["iqm"]
        right.errorbar([point], [y], xerr=[[point - low], [high - point]], fmt="s",
                       color=colour, capsize=4)
    left.set_xlabel({"step": "RL step", "time": "seconds", "episodes": "episodes"}[curve_x])
    left.set_ylabel("training success" + (" (IQM over seeds, 95% band)"
                                         if curve_x == "step" else ""))
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    right.set_yticks(range(len(cells)), [row["cell"] for row in reversed(cells)], fontsize=8)
    right.set_xlabel(f"held-out {summary['metric']}: x after SFT, o after RL, ■ IQM [95% CI]")
    right.grid(alpha=0.3)
    fig.suptitle(textwrap.fill(title, 150), fontsize=9)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def write_results(records: dict[str, dict[str, Any]], results: Path, *, order: list[str],
                  metric: str, header: list[str], target: float | None = None,
                  curve_x: str = "step", title: str = "") -> Path:
    """``results.md``, ``results.json`` (the summary) and ``results.png`` under ``results``;
    returns the markdown's path."""
    summary = summarize(records, order=order, metric=metric, target=target)
    results.mkdir(parents=True, exist_ok=True)
    atomic_write_text(results / "results.json", json.dumps(summary, indent=1) + "\n")
    text = _markdown(summary, header)
    if summary["cells"]:
        _plot(records, summary, results / "results.png", curve_x, title)
        text += "\n![results](results.png)\n"
    atomic_write_text(results / "results.md", text)
    return results / "results.md"
