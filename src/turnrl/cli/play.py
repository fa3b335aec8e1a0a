"""``turnrl play``: one episode of an env played in the terminal (or watched)."""

from __future__ import annotations

import argparse

from turnrl.cli.common import AddParser, UsageError, make_env_arg


def add_parser(add: AddParser) -> None:
    p = add("play", help="play an env in the terminal (or watch its oracle)",
                       description="Play one episode: type an action per turn (an empty line "
                       "quits), or --oracle to watch the env's oracle play it.")
    p.add_argument("env", help="env id, e.g. frozenlake-v0 (see `turnrl envs`)")
    p.add_argument("--seed", type=int, default=0, help="reset seed (default 0)")
    p.add_argument("--oracle", action="store_true", help="let the oracle choose the actions")
    p.add_argument("--kwarg", action="append", metavar="KEY=VALUE",
                   help="env constructor argument, repeatable (e.g. --kwarg max_size=5)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl.envs.play import play

    env = make_env_arg(args)
    try:
        play(env, seed=args.seed, oracle=args.oracle)
    except ValueError as error:
        raise UsageError(str(error)) from None
    return 0
