"""``turnrl sweep``: a recipe's grid of overrides x seeds, run and summarised."""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path

from turnrl.cli.common import AddParser


def add_parser(add: AddParser) -> None:
    p = add("sweep", help="run a recipe: a grid of overrides x seeds, with statistics",
            description="Run every cell of a recipe (recipes/*.yaml: a base config, arms and "
            "a grid of config values) on every seed, as turnrl processes, at most --jobs at "
            "once. Runs that differ only after SFT share its start. Resumable: a run with a "
            "record is done, an unfinished one continues from its checkpoint. Writes "
            "results.md/.json/.png: per cell the held-out score after SFT and after RL (IQM "
            "and mean with stratified-bootstrap 95% intervals, rliable), the gain, and the "
            "probability of improvement of each pair. key=value overrides apply to every run.")
    p.add_argument("recipe", metavar="RECIPE", help="the recipe file, e.g. recipes/credit.yaml")
    p.add_argument("items", nargs="*", metavar="key=value",
                   help="overrides for every run (part of each run's identity)")
    p.add_argument("--jobs", type=positive_int,
                   help="most runs at once (default: the recipe's jobs)")
    p.add_argument("--threads", type=positive_int, metavar="N",
                   help="run.threads of each process (default: cpus // jobs); not part of a "
                   "run's identity, e.g. --jobs 1 --threads 1 leaves a core for other work")
    p.add_argument("--out", help="run directories and logs (default sweeps/<recipe name>)")
    p.add_argument("--results", help="records and the table (default: the recipe's results, "
                   "else the --out directory)")
    p.add_argument("--seeds", type=seed_list, metavar="S[,S...]",
                   help="only these seeds, e.g. 0,1")
    p.add_argument("--cell", action="append", dest="cells", metavar="PATTERN",
                   help="only the cells whose names match (a shell pattern such as 'dense*'; "
                   "repeat for more)")
    p.add_argument("--dry-run", action="store_true", help="list the runs and exit")
    p.add_argument("--summary-only", action="store_true",
                   help="re-write the table from the records; run nothing")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:

    from turnrl.sweep import load_recipe, plan_runs, read_records, run_sweep, write_results
    from turnrl.train.meta import code_commit

    recipe = load_recipe(args.recipe)
    runs = plan_runs(recipe, list(args.items))
    order = list(dict.fromkeys(run.cell.name for run in runs))
    if args.seeds is not None:
        runs = [run for run in runs if run.seed in args.seeds]
    if args.cells:
        runs = [run for run in runs if any(fnmatch.fnmatch(run.cell.name, pattern)
                                           for pattern in args.cells)]
    out = Path(args.out or Path("sweeps") / recipe.name)
    results = Path(args.results or (recipe.path.parent / recipe.results if recipe.results
                                    else out))
    if args.dry_run:
        for run in runs:
            shared = f"  (SFT start {run.sft_key})" if run.sft_key else ""
            print(f"{run.name}: {' '.join(run.overrides)}{shared}")
        print(f"{len(runs)} runs; records in {results / 'records'}, run dirs in {out / 'runs'}")
        return 0
    outcome = None
    if not args.summary_only:
        commit, dirty = code_commit()
        git = f"{commit}{'+changes' if dirty else ''}" if commit else None
        outcome = run_sweep(recipe, runs, out=out, results=results,
                            jobs=args.jobs or recipe.jobs, threads=args.threads, git=git)
    records = read_records(results)
    if records:
        table = write_results(records, results, order=order, metric=recipe.metric,
                              header=recipe.describe(), target=recipe.target,
                              curve_x=recipe.curve_x, title=recipe.claim or recipe.name)
        print(table.read_text(encoding="utf-8"))
        print(f"results: {table} ({len(records)} runs)")
    else:
        print(f"no run has finished yet: no records in {results / 'records'}")
    if outcome is None:
        return 0
    for name, why in outcome.failed.items():
        print(f"failed: {name}: {why}", file=sys.stderr)
    if outcome.interrupted:
        return 130
    return 1 if outcome.failed else 0


def seed_list(text: str) -> list[int]:
    """``0,1,4`` → [0, 1, 4] (argparse type of ``turnrl sweep --seeds``)."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of "
                                         "integer seeds, e.g. 0,1,2") from None


def positive_int(text: str) -> int:
    """argparse type of counts such as ``turnrl sweep --jobs`` / ``--threads``."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer, e.g. 1")
    return value
