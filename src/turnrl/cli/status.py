"""``turnrl status``: where a run stands (its newest step, timings, Ray workers)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from turnrl.cli.common import AddParser, UsageError


def add_parser(add: AddParser) -> None:
    p = add("status", help="where a run stands: step, timings, Ray workers",
            description="Read RUN/metrics.jsonl (live or finished) and show the newest step: "
            "reward, timings and, on Ray, each rollout worker's throughput and busy time, "
            "queue depth, staleness and restarts.")
    p.add_argument("run", metavar="RUN", help="a run dir, e.g. runs/default")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl.io import suggest_path
    from turnrl.train.status import status_report

    run_dir = Path(args.run)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: not a directory{suggest_path(run_dir)}; pass a run dir, "
                         "e.g. runs/default")
    try:
        Console().print(status_report(run_dir))
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    return 0
