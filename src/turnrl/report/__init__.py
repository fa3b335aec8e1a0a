"""Reports of runs: ``turnrl report`` (one run's curves, evaluations and trajectories) and
``turnrl compare`` (runs grouped by a config key, with statistics across seeds)."""

from turnrl.report.runs import ReportError, RunRecord, expand_runs, load_run

__all__ = ["ReportError", "RunRecord", "expand_runs", "load_run"]
