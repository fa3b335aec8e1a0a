"""``turnrl eval``: a run (as it was trained) or a model dir evaluated on held-out seeds."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import yaml

from turnrl.cli.common import AddParser, UsageError, model_target, print_results


def add_parser(add: AddParser) -> None:
    p = add("eval", help="evaluate a run or model dir on an env",
                       description="Success rate, mean reward, mean turns and pass@k with 95% "
                       "confidence intervals on held-out seeds. A run is evaluated as it was "
                       "trained (its config.yaml: env, env kwargs, token budgets, evaluation "
                       "settings); flags and key=value overrides change that, e.g. `turnrl "
                       "eval runs/default eval.episodes=512 env.kwargs.hole_prob=0.2`.")
    p.add_argument("model", metavar="RUN_OR_MODEL",
                   help="a run dir (its newest checkpoint), a model dir, a hub id, 'tiny' (the "
                   "built-in base) or 'tiny-random'")
    p.add_argument("items", nargs="*", metavar="key.sub=value",
                   help="config overrides, as for `turnrl train`")
    p.add_argument("--env", help="env id, e.g. frozenlake-v0 (default: the run's; needed for "
                   "a model that is not a run)")
    p.add_argument("--episodes", type=int, help="number of held-out tasks (eval.episodes)")
    p.add_argument("--samples", type=int,
                   help="episodes per task, for pass@k (eval.samples_per_task)")
    p.add_argument("--pass-k", type=int, nargs="*", help="k values for pass@k (<= --samples)")
    p.add_argument("--temperature", type=float, help="0 for greedy (eval.temperature)")
    p.add_argument("--seed-start", type=int, help="first held-out seed (env.eval_seed_start)")
    p.add_argument("--out-dir", default="runs", help="where the eval run dir is written")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl.config import load_config
    from turnrl.config.checks import validate
    from turnrl.models.files import read_config
    from turnrl.train.setup import check_inputs, evaluate_run, open_run

    target = model_target(args.model)
    base, overrides = eval_config(args, target)
    cfg = load_config(base, overrides)
    limit = getattr(read_config(str(target)) if Path(target).is_dir() else None,
                    "max_position_embeddings", None)
    if isinstance(limit, int) and limit < cfg.rollout.max_context_tokens:  # a short model
        cfg = load_config(base, [*overrides, f"rollout.max_context_tokens={limit}"])
    players = Path(args.model) / "players"  # a multi-agent run's frozen start, if it has one
    if "frozen" in cfg.multi.eval_opponents and not (players / "start").is_dir():
        kept = [o for o in cfg.multi.eval_opponents if o != "frozen"] or ["random"]
        print(f"note: {args.model} has no frozen start (players/start): evaluating against "
              f"{', '.join(kept)}", file=sys.stderr)
        cfg = load_config(base, [*overrides, f"multi.eval_opponents=[{','.join(kept)}]"])
    checked = validate(cfg)
    check_inputs(cfg, resume=None)  # the model dir, before a run dir exists
    run = open_run(checked)
    try:
        if run.players is not None:
            run.players.adopt(players)
        summary = evaluate_run(run, 0, "held-out")
    except BaseException:  # interrupted or failed: no half-written eval dir is left behind
        run.close()
        shutil.rmtree(run.run_dir, ignore_errors=True)
        raise
    run.close()
    print_results(None, summary, run_dir=run.run_dir, wall_time_s=None,
                  labels=("", str(args.model)))
    return 0


def eval_config(args: argparse.Namespace, target: Path | str) -> tuple[Path | None, list[str]]:
    """The config ``turnrl eval`` runs: a run dir's own resolved config (its env and kwargs,
    token budgets, evaluation settings), else the defaults; then the flags given, then the
    ``key=value`` overrides. Returns ``(config file or None, overrides)``."""

    run_config = Path(args.model) / "config.yaml"
    base = run_config if Path(args.model).is_dir() and run_config.is_file() else None
    if base is None and args.env is None:
        raise UsageError(f"{args.model!r} is not a run directory (no config.yaml): say which "
                         "env to evaluate on with --env, e.g. --env frozenlake-v0")
    trained_on = (yaml.safe_load(base.read_text()) or {}).get("env", {}).get("id") \
        if base is not None else None
    env = args.env or trained_on
    overrides = [f"model.path={target}", "model.lora.enabled=false", "sft.enabled=false",
                 "log.report=false", f"run.name=eval-{re.sub(r'[^A-Za-z0-9_.:-]', '_', env)}",
                 f"run.out_dir={args.out_dir}", f"env.id={env}"]
    flags = {"eval.episodes": args.episodes, "eval.samples_per_task": args.samples,
             "eval.temperature": args.temperature, "env.eval_seed_start": args.seed_start,
             "eval.pass_k": f"[{','.join(map(str, args.pass_k))}]" if args.pass_k else None}
    overrides += [f"{key}={value}" for key, value in flags.items() if value is not None]
    return base, [*overrides, *args.items]
