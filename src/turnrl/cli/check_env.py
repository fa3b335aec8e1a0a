"""``turnrl check-env``: an env checked against the env contract (``check_env``)."""

from __future__ import annotations

import argparse

from turnrl.cli.common import AddParser, make_env_arg, print_error


def add_parser(add: AddParser) -> None:
    p = add("check-env", help="check an env against the env contract (check_env)",
            description="Build ENV (with --kwarg arguments; --import your module first) and "
            "run turnrl.envs.check_env on it: reset/step/close, types, episodes ending within "
            "max_turns, same seed -> same episode, the oracle and the capabilities its spec "
            "declares (a multi-agent env: turnrl.envs.multi.check_multi_env). Exit status 1 "
            "with the first problem.")
    p.add_argument("env", help="env id, e.g. my-maze-v0")
    p.add_argument("--kwarg", action="append", metavar="KEY=VALUE",
                   help="constructor argument, repeatable")
    p.add_argument("--seeds", type=int, default=3, help="seeds to probe (default 3)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl.envs import EnvCheckError, check_env
    from turnrl.envs.multi import check_multi_env

    env = make_env_arg(args)
    try:
        if env.spec.agents:
            check_multi_env(env, seeds=range(args.seeds))
        else:
            check_env(env, seeds=range(args.seeds))
    except EnvCheckError as error:
        print_error(error)
        return 1
    finally:
        env.close()
    spec = env.spec
    has = [name for name, on in (("an oracle", spec.has_oracle), ("tools", bool(spec.tools)),
                                 ("state keys", spec.has_state_key),
                                 ("privileged info", spec.has_privileged_info)) if on]
    which = f"the multi-agent contract (agents {', '.join(spec.agents)})" if spec.agents \
        else "the env contract"
    print(f"{args.env}: follows {which} on seeds 0-{args.seeds - 1} (reset, step, "
          f"close, episodes end within max_turns={spec.max_turns}, same seed -> same episode"
          + (f"; checked: {', '.join(has)}" if has else "") + ")")
    return 0
