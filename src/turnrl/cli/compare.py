"""``turnrl compare``: groups of runs across seeds (IQM, probability of improvement)."""

from __future__ import annotations

import argparse
from pathlib import Path

from turnrl.cli.common import AddParser


def add_parser(add: AddParser) -> None:
    p = add("compare", help="compare groups of runs across seeds (IQM, P(improve))",
                       description="Group runs by a config key (seeds pooled) and report the "
                       "interquartile mean of their held-out score with stratified-bootstrap "
                       "95% intervals, the probability of improvement of each pair, "
                       "performance profiles and learning curves with bands (rliable). A "
                       "markdown table goes to stdout; the page to --output.")
    p.add_argument("runs", nargs="+", metavar="RUN_OR_GLOB",
                   help="run dirs, globs (quoted: 'runs/sweep-*') or directories of runs")
    p.add_argument("--by", default="algo.preset",
                   help="the config key whose value names a group (default algo.preset)")
    p.add_argument("--metric", default="success",
                   help="the held-out score compared (an eval.json key; default success)")
    p.add_argument("--curve-metric", default="rollout/success",
                   help="the training metric of the learning curves (default rollout/success)")
    p.add_argument("-o", "--output", default="compare.html",
                   help="the HTML file (default compare.html)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl.report import expand_runs
    from turnrl.report.compare import compare, markdown, write_compare

    result = compare(expand_runs(args.runs), by=args.by, metric=args.metric,
                     curve_metric=args.curve_metric)
    print(markdown(result), end="")
    path = write_compare(result, Path(args.output))
    print(f"\ncompare page: {path}")
    return 0
