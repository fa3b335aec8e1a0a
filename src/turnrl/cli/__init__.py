"""The ``turnrl`` command line: :func:`main` and the parser assembled from one module per
command (``turnrl train | sft | eval | serve | status | report | show | compare | sweep |
envs | play | check-env | algos | init-model | pretrain | probe``).

Each command module holds its parser (``add_parser(add)``) and its body (``run(args)``);
:mod:`turnrl.cli.common` holds what several commands share. A command's body imports the
heavy parts it needs (torch, transformers, the trainer) when it runs: the parser of every
command is built on each call, and ``turnrl envs`` should not wait for what ``turnrl train``
loads. Nothing in turnrl imports this package.

A user's mistake (bad config, unknown env, missing model dir, unreadable dataset) prints one
clear ``error:`` line and exits with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from turnrl.cli import (
    algos,
    check_env,
    common,
    compare,
    doctor,
    envs,
    evaluate,
    init_model,
    play,
    pretrain,
    probe,
    report,
    serve,
    sft,
    show,
    status,
    sweep,
    train,
)
from turnrl.console import set_verbosity, tolerate_any_encoding
from turnrl.io import RunWriteError

__all__ = ["build_parser", "main"]

# in the order `turnrl --help` lists them
COMMANDS = (train, sft, evaluate, serve, status, doctor, report, show, compare, sweep, envs,
            play, check_env, algos, init_model, pretrain, probe)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turnrl", description="Multi-turn RL for language-model agents.",
        formatter_class=common.WrappingFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common_options = argparse.ArgumentParser(add_help=False)
    loudness = common_options.add_mutually_exclusive_group()
    loudness.add_argument("-q", "--quiet", action="store_true",
                          help="no progress output (warnings, errors and results still print)")
    common_options.add_argument("--import", dest="imports", action="append", metavar="MODULE",
                                help="import MODULE first (a module of yours that calls "
                                "turnrl.envs.register), e.g. --import my_envs; repeatable; "
                                "train, sft and eval pass it on as env.imports")
    loudness.add_argument("-v", "--verbose", action="store_true",
                          help="also show what the libraries print (transformers' progress "
                          "bars, deprecation warnings, Ray's notices)")

    def add(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        kwargs["formatter_class"] = common.WrappingFormatter  # at the terminal's width
        return sub.add_parser(name, parents=[common_options], **kwargs)

    for command in COMMANDS:
        command.add_parser(add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    tolerate_any_encoding()  # e.g. `turnrl play` under an ASCII locale: escape, never crash
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    set_verbosity("quiet" if args.quiet else "verbose" if args.verbose else "normal")
    if args.imports and hasattr(args, "items"):  # Ray workers import them too
        args.items = [*args.items, f"env.imports=[{','.join(args.imports)}]"]
    # key=value overrides may follow options (`turnrl eval RUN --episodes 8 eval.temperature=0`)
    if extra and hasattr(args, "items") and all("=" in e and not e.startswith("-")
                                                  for e in extra):
        args.items = [*args.items, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if args.imports:
            from turnrl.envs import import_modules

            import_modules(args.imports)
        code = int(args.fn(args))
        sys.stdout.flush()  # a closed pipe shows here, not as a traceback at exit
        return code
    except common.user_errors() as error:
        common.print_error(error)
        return 2
    except RunWriteError as error:  # what was being written, where, why, and how to go on
        common.print_error(error)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `turnrl play ... | head`: the reader left, nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 141
