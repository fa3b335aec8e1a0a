"""``turnrl status RUN``: where a (live or finished) run stands, from its ``metrics.jsonl``.

Reads the newest training record and shows the step, reward and timings, and for runs on
Ray the ``perf/`` metrics of the workers: each rollout worker's episodes/s, sampled tokens/s
and busy fraction, the queue of groups in flight, the staleness histogram of the last batch,
dropped stale groups, the learner's wait for data and the worker restarts.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from rich.console import Group
from rich.table import Table

WORKER_KEY = re.compile(r"perf/(rollout-\d+)/(\w+)")


def last_train_record(run_dir: Path) -> dict | None:
    """The newest ``phase == "train"`` record of ``run_dir/metrics.jsonl`` (None if none);
    a half-written last line (a live run) is skipped."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no metrics.jsonl; pass a run dir (runs/<name>)")
    last = None
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("phase") == "train":
            last = record
    return last


def _finished(run_dir: Path) -> str | None:
    """How a finished run ended (its ``eval.json``), or None while it runs."""
    try:
        summary = json.loads((run_dir / "eval.json").read_text())
    except (OSError, ValueError):
        return None
    before, after = summary.get("before") or {}, summary.get("after") or {}
    said = [f"{summary.get('wall_time_s', 0):.0f} s"]
    if "success" in after:
        said.append(f"held-out success {before['success']:.3f} -> {after['success']:.3f}"
                    if "success" in before else f"held-out success {after['success']:.3f}")
    return ", ".join(said) + " (report.html has the rest)"


def status_report(run_dir: Path) -> Group:
    """Rich tables of the run's newest step (see the module docstring)."""
    record = last_train_record(run_dir)
    if record is None:
        return Group(f"{run_dir}: no RL step logged yet (SFT or the first rollout running)")
    age = time.time() - (run_dir / "metrics.jsonl").stat().st_mtime
    heading = f"{run_dir.name}: step {record['step']} (last record {age:.0f} s ago)"
    overview = Table(show_header=False)
    finished = _finished(run_dir)
    for key, label in (("reward/mean", "reward"), ("rollout/success", "success"),
                       ("perf/step_s", "step s"), ("perf/rollout_s", "rollout s"),
                       ("perf/update_s", "update s"), ("perf/learner_wait_s", "learner wait s"),
                       ("perf/policy_version", "policy version"),
                       ("perf/episodes_per_s", "episodes/s"),
                       ("perf/in_flight_groups", "groups in flight"),
                       ("perf/ready_groups", "groups ready"),
                       ("perf/dropped_stale", "dropped stale groups"),
                       ("perf/worker_restarts", "worker restarts")):
        if key in record:
            overview.add_row(label, f"{record[key]:.3f}".rstrip("0").rstrip("."))
    parts: list = [overview]
    staleness = {int(k.rsplit("_", 1)[1]): v for k, v in record.items()
                 if re.fullmatch(r"perf/staleness_\d+", k)}
    if staleness:
        hist = Table(title="staleness of the last batch (groups)")
        hist.add_column("updates behind")
        hist.add_column("groups")
        for lag in sorted(staleness):
            hist.add_row(str(lag), f"{staleness[lag]:.0f}")
        parts.append(hist)
    workers: dict[str, dict[str, float]] = {}
    for key, value in record.items():
        if match := WORKER_KEY.fullmatch(key):
            workers.setdefault(match[1], {})[match[2]] = value
    if workers:
        table = Table(title="rollout workers (since the previous step)")
        for column in ("worker", "episodes/s", "tokens/s", "busy"):
            table.add_column(column)
        for name in sorted(workers, key=lambda n: int(n.split("-")[1])):
            w = workers[name]
            table.add_row(name, f"{w.get('episodes_per_s', 0):.2f}",
                          f"{w.get('tokens_per_s', 0):.0f}", f"{w.get('busy_frac', 0):.0%}")
        parts.append(table)
    parts.insert(0, heading if finished is None else
                 f"{run_dir.name} finished after step {record['step']}: {finished}")
    return Group(*parts)
