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
    p.add_argument("--as", dest="agent", metavar="AGENT",
                   help="a multi-agent env: the agent you play (without it, --opponent plays "
                   "every agent)")
    p.add_argument("--opponent", default="oracle", choices=("oracle", "random"),
                   help="a multi-agent env: how the other agents play (default oracle)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl.envs.multi import play_terminal
    from turnrl.envs.play import play

    env = make_env_arg(args)
    try:
        if env.spec.agents:
            play_terminal(env, seed=args.seed, human=None if args.oracle else args.agent,
                          opponent="oracle" if args.oracle else args.opponent)
        elif args.agent is not None:
            raise ValueError(f"--as {args.agent!r}: {env.spec.id} is an env of one agent")
        else:
            play(env, seed=args.seed, oracle=args.oracle)
    except ValueError as error:
        raise UsageError(str(error)) from None
    finally:
        env.close()
    return 0
