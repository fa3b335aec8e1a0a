"""``turnrl show``: a run's kept episodes and one transcript, in the terminal."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from turnrl.cli.common import AddParser


def add_parser(add: AddParser) -> None:
    p = add("show", help="print a run's episodes: transcripts, rewards, advantages",
            description="Print the episodes a step kept in samples/ (the newest by default) "
            "and one episode's transcript: each reply with its turn's reward and mean "
            "advantage, and its tool calls. --eval: an evaluation's episodes.")
    p.add_argument("run", metavar="RUN", help="a run dir, e.g. runs/default")
    p.add_argument("--step", type=int, help="the RL step (or with --eval, the evaluation's "
                   "step: 0 before RL); default the newest")
    p.add_argument("--episode", type=int, default=0, help="which episode's transcript (default 0)")
    p.add_argument("--eval", action="store_true", help="an evaluation's episodes")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl.report.show import show

    show(Path(args.run), Console(), step=args.step, episode=args.episode,
         evaluation=args.eval)
    return 0
