"""``turnrl report``: one self-contained HTML report of runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from turnrl.cli.common import AddParser
from turnrl.report.report import MAX_EPISODES


def add_parser(add: AddParser) -> None:
    p = add("report", help="an HTML report of runs: curves, evals, trajectories",
                       description="Write one self-contained HTML file (no network needed) "
                       "with the runs' learning curves, alarms, timings, held-out "
                       "evaluations, a trajectory browser over samples/ (conversation, "
                       "per-turn rewards and advantages, tokens coloured by mask, advantage, "
                       "log-prob, entropy), and each run's config and machine.")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="run dirs (or a glob, or a directory of runs such as runs/)")
    p.add_argument("-o", "--output", help="the HTML file (default: RUN/report.html)")

    p.add_argument("--max-episodes", type=int, default=MAX_EPISODES,
                   help="most sampled episodes embedded per run, spread over its steps "
                   f"(default {MAX_EPISODES})")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl.report import expand_runs
    from turnrl.report.report import write_report

    paths = expand_runs(args.runs)
    out = Path(args.output) if args.output else None
    path = write_report(paths, out, max_episodes=args.max_episodes)
    print(f"report: {path} ({path.stat().st_size / 2**20:.1f} MiB; open it in a browser)")
    return 0
