"""Plotly figures (as JSON-ready dicts: ``{"data": [...], "layout": {...}}``) for the pages.

The page draws them with plotly.js, which it inlines (``plotly.offline.get_plotlyjs``), so
nothing is fetched. Runs get one colour each (:data:`COLOURS`), the series of a panel one
dash style each; alarms are triangles along the bottom of every RL-step panel (hover: which
alarm) and rollbacks red dashed lines.
"""

from __future__ import annotations

from typing import Any

from turnrl.report import curves as c
from turnrl.report.runs import RunRecord

__all__ = ["COLOURS", "band_figure", "learning_curves", "pass_at_k_figure",
           "profile_figure", "timing_figure"]

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]
DASHES = ["solid", "dot", "dash", "longdash", "dashdot"]


def colour(i: int) -> str:
    return COLOURS[i % len(COLOURS)]


def _layout(title: str, x_title: str, y_title: str = "", **extra: Any) -> dict[str, Any]:
    """A panel's layout: the title at the left (the toolbar stands upright at the right edge,
    shown on hover, so it never covers the title), the legend below."""
    return {"title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
            "height": 300, "margin": {"l": 50, "r": 36, "t": 36, "b": 40},
            "modebar": {"orientation": "v"},
            "xaxis": {"title": {"text": x_title}, "zeroline": False},
            "yaxis": {"title": {"text": y_title}, "zeroline": False},
            "legend": {"orientation": "h", "y": -0.25, "font": {"size": 11}},
            "hovermode": "x unified", "template": "plotly_white", **extra}


def integer_ticks(layout: dict[str, Any], steps: list[int]) -> None:
    """Step axes tick at whole steps only: a spacing of 1, 2, 5, 10, 20, ... giving at most
    10 ticks over ``steps``."""
    span = max(steps, default=1) - min(steps, default=0)
    dtick = next(d for d in (m * 10 ** e for e in range(9) for m in (1, 2, 5))
                 if span / d <= 10)
    layout["xaxis"].update({"tick0": 0, "dtick": dtick, "tickformat": "d"})


def _markers(runs: list[RunRecord], layout: dict[str, Any]) -> list[dict[str, Any]]:
    """Alarm triangles (on a hidden second y axis, at its bottom) and rollback lines."""
    traces, shapes = [], []
    for i, run in enumerate(runs):
        events = c.alarm_events(run)
        if events:
            traces.append({"type": "scatter", "mode": "markers", "yaxis": "y2",
                           "x": [step for step, _ in events], "y": [0.02] * len(events),
                           "marker": {"symbol": "triangle-up", "size": 9, "color": colour(i),
                                      "line": {"color": "#c00", "width": 1}},
                           "name": f"{run.name}: alarms", "legendgroup": run.name,
                           "text": [", ".join(names) for _, names in events],
                           "hovertemplate": "alarm at step %{x}: %{text}<extra></extra>"})
        for step, back_to in c.rollbacks(run):
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": step,
                           "x1": step, "y0": 0, "y1": 1,
                           "line": {"color": "#c00", "width": 1, "dash": "dash"},
                           "label": {"text": f"rollback → {back_to}", "font": {"size": 10},
                                     "textposition": "end"}})
    if traces:
        layout["yaxis2"] = {"overlaying": "y", "range": [0, 1], "visible": False,
                            "fixedrange": True}
    if shapes:
        layout["shapes"] = shapes
    return traces


def learning_curves(runs: list[RunRecord]) -> list[dict[str, Any]]:
    """One figure per panel of :func:`~turnrl.report.curves.panels` that has data:
    ``{"key", "title", "figure"}``."""
    figures = []
    for panel in c.panels(runs):
        data = []
        for i, run in enumerate(runs):
            for j, series in enumerate(panel.series):
                points = c.curve(run, series)
                if not points.x:
                    continue
                name = series.label if len(runs) == 1 else f"{run.name}: {series.label}"
                trace: dict[str, Any] = {
                    "type": "scatter", "mode": "lines+markers" if series.interval
                    or len(points.x) < 3 else "lines", "x": points.x, "y": points.y,
                    "name": name, "legendgroup": run.name,
                    "line": {"color": colour(i), "dash": DASHES[j % len(DASHES)], "width": 1.6}}
                if series.interval:
                    trace["error_y"] = {"type": "data", "symmetric": False,
                                        "array": [h - y for h, y in zip(points.hi, points.y,
                                                                        strict=True)],
                                        "arrayminus": [y - lo for y, lo in zip(
                                            points.y, points.lo, strict=True)]}
                    trace["marker"] = {"size": 7, "color": colour(i)}
                data.append(trace)
        if not data or (panel.if_nonzero and not any(any(t["y"]) for t in data)):
            continue
        layout = _layout(panel.title, panel.x_title)
        integer_ticks(layout, [x for trace in data for x in trace["x"]])
        if panel.x_title == "RL step":
            data.extend(_markers(runs, layout))
        figures.append({"key": panel.key, "title": panel.title,
                        "figure": {"data": data, "layout": layout}})
    return figures


def timing_figure(runs: list[RunRecord]) -> dict[str, Any] | None:
    """Stacked seconds per RL step (sampling, update) and per held-out evaluation."""
    data: list[dict[str, Any]] = []
    for i, run in enumerate(runs):
        t = c.timings(run)
        prefix = "" if len(runs) == 1 else f"{run.name}: "
        for key, label, pattern in (("rollout", "rollout", ""), ("update", "update", ".")):
            if t["steps"]:  # the update hatched, so the legend tells them apart too
                data.append({"type": "bar", "x": t["steps"], "y": t[key],
                             "name": prefix + label, "marker": {
                                 "color": colour(i), "pattern": {
                                     "shape": pattern, "fillmode": "replace",
                                     "bgcolor": "white", "fgcolor": colour(i), "size": 6}},
                             "offsetgroup": str(i), "legendgroup": run.name})
        if t["eval_steps"]:
            data.append({"type": "bar", "x": t["eval_steps"], "y": t["eval"],
                         "name": prefix + "held-out eval", "offsetgroup": f"e{i}",
                         "marker": {"color": colour(i), "pattern": {"shape": "/"},
                                    "opacity": 0.4}, "legendgroup": run.name})
    if not data:
        return None
    layout = _layout("Time per step (s)", "RL step", "seconds", barmode="relative")
    integer_ticks(layout, [x for trace in data for x in trace["x"]])
    return {"key": "timing", "title": "Time per step", "figure": {"data": data,
                                                                 "layout": layout}}


def pass_at_k_figure(runs: list[RunRecord]) -> dict[str, Any] | None:
    """pass@k against k for every evaluation that recorded two or more k."""
    data = []
    for i, run in enumerate(runs):
        for j, entry in enumerate(c.pass_at_k(run)):
            data.append({"type": "scatter", "mode": "lines+markers", "x": entry["k"],
                         "y": entry["value"],
                         "name": entry["label"] if len(runs) == 1 else
                         f"{run.name}: {entry['label']}",
                         "line": {"color": colour(i), "dash": DASHES[j % len(DASHES)]},
                         "error_y": {"type": "data", "symmetric": False,
                                     "array": [h - v for h, v in zip(entry["hi"],
                                                                     entry["value"],
                                                                     strict=True)],
                                     "arrayminus": [v - lo for v, lo in zip(
                                         entry["value"], entry["lo"], strict=True)]}})
    if not data:
        return None
    layout = _layout("pass@k (held-out)", "k", "pass@k")
    layout["xaxis"]["type"] = "log"
    return {"key": "pass_at_k", "title": "pass@k", "figure": {"data": data, "layout": layout}}


def band_figure(key: str, title: str, x_title: str, y_title: str,
                lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Lines with shaded bands: each of ``lines`` is ``{"name", "x", "y", "lo", "hi"}``."""
    data: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        fill = colour(i)
        red, green, blue = (int(fill[k:k + 2], 16) for k in (1, 3, 5))
        data.append({"type": "scatter", "mode": "lines", "x": line["x"] + line["x"][::-1],
                     "y": line["hi"] + line["lo"][::-1], "fill": "toself",
                     "fillcolor": f"rgba({red},{green},{blue},0.18)", "line": {"width": 0},
                     "hoverinfo": "skip", "showlegend": False, "legendgroup": line["name"]})
        data.append({"type": "scatter", "mode": "lines", "x": line["x"], "y": line["y"],
                     "name": line["name"], "legendgroup": line["name"],
                     "line": {"color": fill, "width": 2}})
    return {"key": key, "title": title,
            "figure": {"data": data, "layout": _layout(title, x_title, y_title)}}


def profile_figure(thresholds: list[float], profiles: list[dict[str, Any]]) -> dict[str, Any]:
    """Performance profiles: the fraction of runs scoring above each threshold (with
    bands), one line per group."""
    lines = [{"name": p["name"], "x": thresholds, "y": p["y"], "lo": p["lo"], "hi": p["hi"]}
             for p in profiles]
    figure = band_figure("profile", "Performance profile", "score τ",
                         "fraction of runs with score > τ", lines)
    figure["figure"]["layout"]["hovermode"] = "closest"
    return figure
