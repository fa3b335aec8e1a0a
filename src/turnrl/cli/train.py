"""``turnrl train``: the whole job (SFT warm start, RL, evaluation), or ``--resume``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from turnrl.cli.common import (
    AddParser,
    UsageError,
    config_epilog,
    print_error,
    print_results,
    split_config_args,
)


def add_parser(add: AddParser) -> None:
    p = add("train", help="SFT warm start, RL, evaluation (the whole job)",
                       description="Train with a YAML config (default: configs/default.yaml) "
                       "and dotted overrides, e.g. `turnrl train algo.preset=rloo "
                       "train.steps=50`. Writes runs/<name>/.",
                       epilog=config_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("items", nargs="*", metavar="[CONFIG.yaml] [key.sub=value ...]")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its newest checkpoint")
    p.add_argument("--resume-from", metavar="CHECKPOINT",
                   help="with --resume: continue from this checkpoint instead (step_N, N or "
                   "its directory; newer checkpoints are deleted), e.g. when the newest is "
                   "corrupt")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl.config import load_config
    from turnrl.io import suggest_path
    from turnrl.train.loop import AlarmStop, Interrupted, RolloutError, train

    if args.resume_from and not args.resume:
        raise UsageError(f"--resume-from {args.resume_from!r} needs --resume RUN_DIR (the run "
                         "whose checkpoint it names)")
    try:
        if args.resume:
            run_dir = Path(args.resume)
            if not (run_dir / "config.yaml").is_file():
                raise UsageError(f"--resume {args.resume!r}: no config.yaml there"
                                 f"{suggest_path(run_dir)}; give a run directory such as "
                                 "runs/default")
            cfg = load_config(run_dir / "config.yaml", args.items)
            result = train(cfg, resume=run_dir, resume_from=args.resume_from)
        else:
            path, overrides = split_config_args(args.items)
            result = train(load_config(path, overrides))
    except (RolloutError, AlarmStop) as error:  # the run started, then had to stop
        print_error(error)
        return 1
    except Interrupted as stop:  # SIGINT/SIGTERM: a checkpoint was saved
        print(str(stop), file=sys.stderr)
        return 128 + stop.signum
    print_results(result.before, result.after, run_dir=result.run_dir,
                  wall_time_s=result.wall_time_s)
    if result.report is not None:
        Console().print(f"report: [bold]{result.report}[/] (open it in a browser)")
    return 0
