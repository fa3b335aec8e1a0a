"""``turnrl doctor``: why a run did not learn, from what it recorded."""

from __future__ import annotations

import argparse
from pathlib import Path

from turnrl.cli.common import AddParser, UsageError

MARKS = {"problem": "[red]x[/red]", "note": "[yellow]![/yellow]", "ok": "[green]ok[/green]"}


def add_parser(add: AddParser) -> None:
    p = add("doctor", help="why a run did not learn, and which setting to change",
            description="Read a run dir (config.yaml, metrics.jsonl, its held-out episodes) "
            "and check, in the order a run goes: the model (the random init?), whether SFT "
            "fitted (its loss against the oracle's floor) and had something to train, "
            "whether the SFT model's replies are valid actions (shown beside the oracle's), "
            "whether RL groups had any reward spread, the reply and context budgets, and "
            "held-out success before and after RL. Each problem names the config key to "
            "change.")
    p.add_argument("run", metavar="RUN", help="a run dir, e.g. runs/default")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from turnrl.io import suggest_path
    from turnrl.train.doctor import as_json, diagnose

    run_dir = Path(args.run)
    if not (run_dir / "metrics.jsonl").is_file():
        raise UsageError(f"{run_dir}: not a run dir (no metrics.jsonl){suggest_path(run_dir)}; "
                         "pass one, e.g. runs/default")
    findings = diagnose(run_dir)
    if args.json:
        print(as_json(findings))
        return 0
    console = Console(highlight=False)
    problems = [f for f in findings if f.level == "problem"]
    console.print(f"turnrl doctor {run_dir}: {len(problems)} problem(s)"
                  + (f", first: {problems[0].check}" if problems else ""))
    for f in findings:
        console.print(f"{MARKS[f.level]} {f.check}: {escape(f.summary)}")
        if f.fix:
            console.print(f"   change: {escape(f.fix)}")
        if f.examples:
            table = Table("task", "the model's first reply", "the oracle's", box=None,
                          padding=(0, 1))
            for task, reply, oracle in f.examples:
                table.add_row(escape(task), escape(repr(reply)), escape(repr(oracle)))
            console.print(table)
    return 0
