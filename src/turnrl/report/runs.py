"""Reading run directories for reports: metrics, evaluations, config, provenance, samples.

A run directory (``runs/<name>/``) holds ``config.yaml`` (the resolved config),
``metrics.jsonl`` (one row per logged step: ``step``, ``phase``, ``time`` and the metrics),
``eval.json`` once the run finished, ``meta.json`` (``turnrl.train.meta``) and
``samples/step_<n>.jsonl``. A run still in progress can be read: a half-written last
metrics line is skipped.
"""

from __future__ import annotations

import glob
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from turnrl.io import suggest_path

__all__ = ["ReportError", "RunRecord", "config_value", "expand_runs", "load_run",
           "sample_files"]


class ReportError(ValueError):
    """A path or key given to ``turnrl report`` / ``turnrl compare`` that cannot be used."""


@dataclass
class RunRecord:
    """One run directory, read."""

    path: Path
    name: str
    config: dict[str, Any]
    rows: list[dict[str, Any]]  # metrics.jsonl, in order
    evaluation: dict[str, Any] | None  # eval.json's before/after/wall_time_s
    sessions: list[dict[str, Any]] = field(default_factory=list)  # meta.json
    sample_steps: list[int] = field(default_factory=list)  # steps with samples/, ascending

    def phase(self, phase: str) -> list[dict[str, Any]]:
        """The rows of ``phase`` (``sft``, ``train``, ``eval``, ``alarm``), one per step: a
        rollback re-runs steps, and the later row of a step replaces the earlier; a later
        row with none of the earlier one's metrics (a separate policy's SFT step, logged
        after main's: ``policy/<name>/sft/*``) joins it instead."""
        latest: dict[int, dict[str, Any]] = {}
        for row in self.rows:
            if row.get("phase") == phase:
                earlier = latest.pop(row["step"], None)  # the latest one, in step order
                if earlier is not None and not (set(earlier) & set(row)) - {
                        "step", "phase", "time"}:
                    row = {**earlier, **row}
                latest[row["step"]] = row
        return sorted(latest.values(), key=lambda row: row["step"])

    def samples_path(self, step: int) -> Path:
        return self.path / "samples" / f"step_{step}.jsonl"


def _read_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as error:
            if number == len(lines):  # being written right now
                break
            raise ReportError(f"{path}:{number}: not a JSON line ({error}); the metrics "
                              "file is damaged") from None
    return rows


def load_run(path: str | Path) -> RunRecord:
    """Read the run directory ``path``; a clear :class:`ReportError` if it is not one."""
    run_dir = Path(path)
    if not run_dir.is_dir():
        raise ReportError(f"{str(path)!r}: no such run directory{suggest_path(run_dir)}; give "
                          "one such as runs/default")
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        raise ReportError(f"{str(path)!r}: not a run directory (no metrics.jsonl); give one "
                          "that `turnrl train` wrote, such as runs/default")
    config_file = run_dir / "config.yaml"
    config = (yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
              if config_file.is_file() else {})
    evaluation = None
    if (run_dir / "eval.json").is_file():
        evaluation = json.loads((run_dir / "eval.json").read_text(encoding="utf-8"))
        evaluation.pop("config", None)
    sessions: list[dict[str, Any]] = []
    if (run_dir / "meta.json").is_file():
        sessions = json.loads((run_dir / "meta.json").read_text(encoding="utf-8")).get(
            "sessions", [])
    return RunRecord(run_dir, run_dir.name, config, _read_rows(metrics), evaluation,
                     sessions, sorted(sample_files(run_dir, "step")))


def sample_files(run_dir: Path, kind: str) -> dict[int, Path]:
    """``samples/<kind>_<n>.jsonl`` by ``n``: a step's (``step``) or an evaluation's
    (``eval``) episodes."""
    return {int(m.group(1)): p for p in (run_dir / "samples").glob(f"{kind}_*.jsonl")
            if (m := re.fullmatch(rf"{kind}_(\d+)\.jsonl", p.name))}


def expand_runs(items: list[str]) -> list[Path]:
    """Run directories from command-line items: a run dir, a glob (quoted, so the shell
    leaves it), or a directory of run dirs such as ``runs/``. Order kept, duplicates once."""
    found: list[Path] = []
    for item in items:
        matches = sorted(glob.glob(item)) if glob.has_magic(item) else [item]
        if not matches:
            raise ReportError(f"{item!r}: matches no run directory")
        for match in map(Path, matches):
            if match.is_dir() and not (match / "metrics.jsonl").exists():
                children = sorted(p for p in match.iterdir() if (p / "metrics.jsonl").is_file())
                if children:
                    found.extend(children)
                    continue
            found.append(match)
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return [next(p for p in found if p.resolve() == u) for u in unique]


def config_value(run: RunRecord, key: str) -> Any:
    """The value of the dotted config ``key`` (``algo.preset``) in ``run``'s config."""
    node: Any = run.config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            known = ", ".join(sorted(node)) if isinstance(node, dict) else ""
            raise ReportError(f"{run.path}: config has no key {key!r} (at {part!r}"
                              + (f"; there: {known}" if known else "") + ")")
        node = node[part]
    return node
