"""The ``turnrl`` command line: train, sft, eval, serve, status, envs, play, algos, init-model.

A user's mistake (bad config, unknown env, missing model dir, unreadable dataset) prints one
clear ``error:`` line and exits with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from turnrl.config.loading import default_config_path
from turnrl.console import set_verbosity, tolerate_any_encoding
from turnrl.io import DiskFullError
from turnrl.pretrain.command import PretrainUsageError
from turnrl.pretrain.command import add_parsers as add_pretrain_parsers
from turnrl.registry import UnknownNameError


class UsageError(ValueError):
    """A bad command-line argument."""


def split_config_args(items: Sequence[str]) -> tuple[Path, list[str]]:
    """``[CONFIG.yaml] [key=value ...]`` → (config path, overrides)."""
    items = list(items)
    if items and "=" not in items[0]:
        return Path(items.pop(0)), items
    return default_config_path(), items


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


def user_errors() -> tuple[type[BaseException], ...]:
    from turnrl.config import ConfigError
    from turnrl.envs.registry import EnvPluginError
    from turnrl.io import RunDirLocked
    from turnrl.models.chat import ChatTemplateError
    from turnrl.models.policy import ModelLoadError
    from turnrl.report import ReportError
    from turnrl.sweep import RecipeError
    from turnrl.train.checkpoint import CheckpointError
    from turnrl.train.sft import DatasetError

    return (ConfigError, ModelLoadError, DatasetError, ChatTemplateError, UnknownNameError,
            EnvPluginError, UsageError, CheckpointError, RunDirLocked, ReportError, RecipeError,
            PretrainUsageError)


# ---------------------------------------------------------------------- commands
def cmd_train(args: argparse.Namespace) -> int:
    from turnrl.config import load_config
    from turnrl.train.loop import AlarmStop, Interrupted, RolloutError, train

    if args.resume_from and not args.resume:
        raise UsageError(f"--resume-from {args.resume_from!r} needs --resume RUN_DIR (the run "
                         "whose checkpoint it names)")
    try:
        if args.resume:
            run_dir = Path(args.resume)
            if not (run_dir / "config.yaml").is_file():
                raise UsageError(f"--resume {args.resume!r}: no config.yaml there; give a run "
                                 "directory such as runs/default")
            cfg = load_config(run_dir / "config.yaml", args.items)
            result = train(cfg, resume=run_dir, resume_from=args.resume_from)
        else:
            path, overrides = split_config_args(args.items)
            result = train(load_config(path, overrides))
    except (RolloutError, AlarmStop) as error:  # the run started, then had to stop
        print(f"error: {error}", file=sys.stderr)
        return 1
    except Interrupted as stop:  # SIGINT/SIGTERM: a checkpoint was saved
        print(str(stop), file=sys.stderr)
        return 128 + stop.signum
    print_results(result.before, result.after, run_dir=result.run_dir,
                  wall_time_s=result.wall_time_s)
    if result.report is not None:
        Console().print(f"report: [bold]{result.report}[/] (open it in a browser)")
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    from turnrl.config import load_config
    from turnrl.train.setup import run_sft

    path, overrides = split_config_args(args.items)
    run, out, summary = run_sft(load_config(path, [*overrides, "sft.enabled=true"]))
    print_results(None, summary, run_dir=run.run_dir, wall_time_s=None,
                  labels=("", "after SFT"))
    Console().print(f"SFT model saved to [bold]{out}[/]")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
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
    checked = validate(cfg)
    check_inputs(cfg, resume=None)  # the model dir, before a run dir exists
    run = open_run(checked)
    summary = evaluate_run(run, 0, "held-out")
    run.close()
    print_results(None, summary, run_dir=run.run_dir, wall_time_s=None,
                  labels=("", str(args.model)))
    return 0


def eval_config(args: argparse.Namespace, target: Path | str) -> tuple[Path | None, list[str]]:
    """The config ``turnrl eval`` runs: a run dir's own resolved config (its env and kwargs,
    token budgets, evaluation settings), else the defaults; then the flags given, then the
    ``key=value`` overrides. Returns ``(config file or None, overrides)``."""
    import yaml

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


def model_target(model: str) -> Path | str:
    """A run dir's newest checkpoint, else ``model`` as given (a model dir, hub id, tiny)."""
    from turnrl.train.checkpoint import latest_checkpoint

    target = Path(model)
    if (target / "checkpoints").is_dir():
        checkpoint = latest_checkpoint(target)
        if checkpoint is None:
            raise UsageError(f"run {model!r} has no complete checkpoint yet")
        return checkpoint
    return model


def cmd_serve(args: argparse.Namespace) -> int:
    import signal
    import tempfile
    import time

    from turnrl.agents.protocol import Limits
    from turnrl.agents.server import ModelServer
    from turnrl.config import load_config
    from turnrl.config.checks import validate
    from turnrl.train.setup import check_inputs, load_model, model_source, setup_torch

    target = model_target(args.model)
    cfg = load_config(None, [f"model.path={target}", f"rollout.engine={args.engine}",
                             f"rollout.max_new_tokens={args.max_tokens}",
                             f"rollout.max_context_tokens={args.max_context_tokens}",
                             "sft.enabled=false"])
    validate(cfg)
    check_inputs(cfg, resume=None)
    with tempfile.TemporaryDirectory(prefix="turnrl-serve-") as scratch:
        device = setup_torch(cfg)
        model = load_model(cfg, model_source(cfg, Path(scratch)), device, fresh_lora=False)
        name = args.model_name or Path(str(args.model)).name or "policy"
        server = ModelServer(model.engine, model.tokenizer, model_name=name,
                             limits=Limits(max_tokens=args.max_tokens),
                             max_context_tokens=args.max_context_tokens, host=args.host,
                             port=args.port, open_access=True)
        try:
            server.start()
        except OSError as error:
            raise UsageError(str(error)) from None
        # Ctrl-C and SIGTERM stop it, even where the caller left SIGINT ignored (a shell's
        # background job does)
        previous = {sig: signal.signal(sig, _stop_serving)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        print(f"serving {args.model} as {name!r} at {server.url()} (Ctrl-C stops)", flush=True)
        try:  # wake up now and then: a signal the kernel gives another thread (the server's,
            # torch's) only sets a flag, which the main thread reads when it next runs
            while True:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            server.close()
            model.engine.close()
    print("stopped", flush=True)
    return 0


def _stop_serving(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def cmd_status(args: argparse.Namespace) -> int:
    from turnrl.train.status import status_report

    run_dir = Path(args.run)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: not a directory; pass a run dir, e.g. runs/default")
    try:
        Console().print(status_report(run_dir))
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from turnrl.report import expand_runs
    from turnrl.report.report import write_report

    paths = expand_runs(args.runs)
    out = Path(args.output) if args.output else None
    path = write_report(paths, out, max_episodes=args.max_episodes)
    print(f"report: {path} ({path.stat().st_size / 2**20:.1f} MiB; open it in a browser)")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from turnrl.report.show import show

    show(Path(args.run), Console(), step=args.step, episode=args.episode,
         evaluation=args.eval)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from turnrl.report import expand_runs
    from turnrl.report.compare import compare, markdown, write_compare

    result = compare(expand_runs(args.runs), by=args.by, metric=args.metric,
                     curve_metric=args.curve_metric)
    print(markdown(result), end="")
    path = write_compare(result, Path(args.output))
    print(f"\ncompare page: {path}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    import fnmatch

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


def cmd_envs(args: argparse.Namespace) -> int:
    from turnrl import envs

    table = Table(title="registered environments (any Gymnasium env: gym:<id>)")
    # cells are kept whole and the descriptions follow the table: in a description column a
    # narrow terminal (or a pipe, 80 columns) cut the ids to "arithmet…"
    for column in ("id", "max turns", "tools", "oracle", "state key", "privileged"):
        table.add_column(column, no_wrap=True)
    specs = {env_id: envs.spec(env_id) for env_id in envs.registered_ids()}
    for env_id, spec in specs.items():
        table.add_row(env_id, str(spec.max_turns), ", ".join(spec.tools) or "-",
                      _yes(spec.has_oracle), _yes(spec.has_state_key),
                      _yes(spec.has_privileged_info))
    console = Console()
    console.print(table)
    for env_id, spec in specs.items():
        console.print(f"[bold]{env_id}[/bold]: {escape(spec.description)}")
    return 0


def make_env_arg(args: argparse.Namespace) -> Any:
    """The env of ``args.env`` with its ``--kwarg`` arguments; a bad one is a usage error."""
    from turnrl import envs

    try:
        return envs.make(args.env, **parse_kwargs(args.kwarg or []))
    except (TypeError, ValueError) as error:
        if isinstance(error, UnknownNameError):
            raise
        raise UsageError(f"--kwarg for {args.env!r}: {error}") from None


def cmd_check_env(args: argparse.Namespace) -> int:
    from turnrl.envs import EnvCheckError, check_env

    env = make_env_arg(args)
    try:
        check_env(env, seeds=range(args.seeds))
    except EnvCheckError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        env.close()
    spec = env.spec
    has = [name for name, on in (("an oracle", spec.has_oracle), ("tools", bool(spec.tools)),
                                 ("state keys", spec.has_state_key),
                                 ("privileged info", spec.has_privileged_info)) if on]
    print(f"{args.env}: follows the env contract on seeds 0-{args.seeds - 1} (reset, step, "
          f"close, episodes end within max_turns={spec.max_turns}, same seed -> same episode"
          + (f"; checked: {', '.join(has)}" if has else "") + ")")
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    from turnrl.envs.play import play

    env = make_env_arg(args)
    try:
        play(env, seed=args.seed, oracle=args.oracle)
    except ValueError as error:
        raise UsageError(str(error)) from None
    return 0


def parse_kwargs(items: Sequence[str]) -> dict:
    """``["key=value", ...]`` → dict, values parsed as YAML scalars (``max_size=5`` → 5)."""
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--kwarg {item!r}: expected key=value, e.g. --kwarg max_size=5")
        out[key] = yaml.safe_load(value)
    return out


def cmd_algos(args: argparse.Namespace) -> int:
    from turnrl.algos import ADVANTAGES, AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES, PRESETS

    console = Console()
    columns = ("advantage", "policy loss", "aggregation", "kl / entropy")
    rows = [(name, (_with_kwargs(p.advantage, p.adv_kwargs),
                    _with_kwargs(p.policy_loss, p.loss_kwargs), p.loss_agg,
                    f"{p.kl_estimator} x {p.kl_coef:g} / {p.entropy_coef:g}"), p.paper)
            for name, p in sorted(PRESETS.items())]
    title = "algorithm presets (override any key: algo.<key>=...)"
    if console.width >= 140:  # one table row per preset
        table = Table(title=title)
        for column in ("preset", *columns, "paper"):
            table.add_column(column, overflow="fold")
        for name, cells, paper in rows:
            table.add_row(name, *cells, paper)
        console.print(table)
    else:  # narrower: a block per preset, nothing cut mid-word
        console.print(f"[bold]{title}[/]")
        for name, cells, paper in rows:
            console.print(f"\n[bold]{name}[/]  {paper}", soft_wrap=False)
            for column, cell in zip(columns, cells, strict=True):
                console.print(f"  {column:<13}{cell}")
        console.print()
    for kind, registry in (("advantages", ADVANTAGES), ("policy losses", POLICY_LOSSES),
                           ("aggregations", AGGREGATIONS), ("KL estimators", KL_ESTIMATORS)):
        console.print(f"[bold]{kind}[/]: {', '.join(registry.names())}")
    return 0


def _with_kwargs(name: str, kwargs: dict) -> str:
    return f"{name}({', '.join(f'{k}={v}' for k, v in kwargs.items())})" if kwargs else name


def cmd_init_model(args: argparse.Namespace) -> int:
    from turnrl.config import TinyConfig
    from turnrl.models.base import write_builtin

    cfg = TinyConfig(**{name: getattr(args, name) for name in TinyConfig.model_fields})
    if not args.random and cfg != TinyConfig():
        raise UsageError("the shape options (--hidden-size, ...) shape the random init: add "
                         "--random, or drop them to write the pretrained base")
    name = "tiny-random" if args.random else "tiny"
    path = write_builtin(name, Path(args.path), cfg)
    what = "randomly initialised tiny model" if args.random else "pretrained base model"
    Console().print(f"{what} written to [bold]{path}[/] (load it with model.path={path})")
    return 0


def _yes(flag: bool) -> str:
    return "yes" if flag else "-"


def print_results(before: dict[str, float] | None, after: dict[str, float] | None, *,
                  run_dir: Path, wall_time_s: float | None,
                  labels: tuple[str, str] = ("after SFT (before RL)", "after RL")) -> None:
    """The before/after table: success, pass@k and reward with 95% intervals."""
    table = Table(title=f"evaluation on held-out seeds ({run_dir})")
    table.add_column("metric")
    columns = [(name, s) for name, s in zip(labels, (before, after), strict=True)
               if s is not None]
    for name, _ in columns:
        table.add_column(name, justify="right")
    if not columns:
        return
    keys = ["success", *sorted(k for k in columns[0][1] if k.startswith("pass@")
                               and not k.endswith(("_lo", "_hi"))), "reward", "turns"]
    for key in keys:
        table.add_row(key, *(_with_interval(s, key) for _, s in columns))
    for key in ("tokens", "episodes"):
        table.add_row(key, *(f"{s.get(key, float('nan')):.2f}".rstrip("0").rstrip(".")
                             for _, s in columns))
    console = Console()
    console.print(table)
    if before is not None and after is not None:
        gain = 100 * (after["success"] - before["success"])
        console.print(f"success change: [bold]{gain:+.1f}[/] percentage points")
    if wall_time_s is not None:
        console.print(f"wall time: {wall_time_s:.0f} s")


def _with_interval(summary: dict[str, float], key: str) -> str:
    lo, hi = summary.get(f"{key}_lo"), summary.get(f"{key}_hi")
    value = summary.get(key, float("nan"))
    return f"{value:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None \
        else f"{value:.3f}"


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turnrl", description="Multi-turn RL for language-model agents.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    loudness = common.add_mutually_exclusive_group()
    loudness.add_argument("-q", "--quiet", action="store_true",
                          help="no progress output (warnings, errors and results still print)")
    common.add_argument("--import", dest="imports", action="append", metavar="MODULE",
                        help="import MODULE first (a module of yours that calls "
                        "turnrl.envs.register), e.g. --import my_envs; repeatable; train, sft "
                        "and eval pass it on as env.imports")
    loudness.add_argument("-v", "--verbose", action="store_true",
                          help="also show what the libraries print (transformers' progress "
                          "bars, deprecation warnings, Ray's notices)")

    def add(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kwargs)

    config_epilog = _config_epilog()
    p = add("train", help="SFT warm start, RL, evaluation (the whole job)",
                       description="Train with a YAML config (default: configs/default.yaml) "
                       "and dotted overrides, e.g. `turnrl train algo.preset=rloo "
                       "train.steps=50`. Writes runs/<name>/.",
                       epilog=config_epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("items", nargs="*", metavar="[CONFIG.yaml] [key.sub=value ...]")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its newest checkpoint")
    p.add_argument("--resume-from", metavar="CHECKPOINT",
                   help="with --resume: continue from this checkpoint instead (step_N, N or "
                   "its directory; newer checkpoints are deleted), e.g. when the newest is "
                   "corrupt")
    p.set_defaults(fn=cmd_train)

    p = add("sft", help="supervised fine-tuning only (oracle demos or JSONL)",
                       description="Run the SFT stage of a config, save runs/<name>/sft_model "
                       "and evaluate it.", epilog=config_epilog,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("items", nargs="*", metavar="[CONFIG.yaml] [key.sub=value ...]")
    p.set_defaults(fn=cmd_sft)

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
    p.set_defaults(fn=cmd_eval)

    p = add("serve", help="serve a run or model on an OpenAI-compatible endpoint",
                       description="Serve /v1/chat/completions, /v1/completions and /v1/models "
                       "on HOST:PORT with the run's newest checkpoint (or a model dir, hub id "
                       "or 'tiny'): for evaluation, demos, or pointing an agent at it.")
    p.add_argument("model", metavar="RUN_OR_MODEL",
                   help="a run dir (its newest checkpoint), a model dir, a hub id, 'tiny' (the "
                   "built-in base) or 'tiny-random'")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: a free one)")
    p.add_argument("--engine", choices=("hf", "vllm"), default="hf", help="sampling engine")
    p.add_argument("--model-name", help="the model id clients use (default: the dir's name)")
    p.add_argument("--max-tokens", type=int, default=256,
                   help="most new tokens per call (larger requests are clamped)")
    p.add_argument("--max-context-tokens", type=int, default=2048,
                   help="longest prompt plus reply")
    p.set_defaults(fn=cmd_serve)

    p = add("status", help="where a run stands: step, timings, Ray workers",
                       description="Read RUN/metrics.jsonl (live or finished) and show the "
                       "newest step: reward, timings and, on Ray, each rollout worker's "
                       "throughput and busy time, queue depth, staleness and restarts.")
    p.add_argument("run", metavar="RUN", help="a run dir, e.g. runs/default")
    p.set_defaults(fn=cmd_status)

    p = add("report", help="an HTML report of runs: curves, evals, trajectories",
                       description="Write one self-contained HTML file (no network needed) "
                       "with the runs' learning curves, alarms, timings, held-out "
                       "evaluations, a trajectory browser over samples/ (conversation, "
                       "per-turn rewards and advantages, tokens coloured by mask, advantage, "
                       "log-prob, entropy), and each run's config and machine.")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="run dirs (or a glob, or a directory of runs such as runs/)")
    p.add_argument("-o", "--output", help="the HTML file (default: RUN/report.html)")
    from turnrl.report.report import MAX_EPISODES

    p.add_argument("--max-episodes", type=int, default=MAX_EPISODES,
                   help="most sampled episodes embedded per run, spread over its steps "
                   f"(default {MAX_EPISODES})")
    p.set_defaults(fn=cmd_report)

    p = add("show", help="print a run's episodes: transcripts, rewards, advantages",
            description="Print the episodes a step kept in samples/ (the newest by default) "
            "and one episode's transcript: each reply with its turn's reward and mean "
            "advantage, and its tool calls. --eval: an evaluation's episodes.")
    p.add_argument("run", metavar="RUN", help="a run dir, e.g. runs/default")
    p.add_argument("--step", type=int, help="the RL step (or with --eval, the evaluation's "
                   "step: 0 before RL); default the newest")
    p.add_argument("--episode", type=int, default=0, help="which episode's transcript (default 0)")
    p.add_argument("--eval", action="store_true", help="an evaluation's episodes")
    p.set_defaults(fn=cmd_show)

    p = add("compare", help="compare groups of runs across seeds (IQM, P(improve))",
                       description="Group runs by a config key (seeds pooled) and report the "
                       "interquartile mean of their held-out score with stratified-bootstrap "
                       "95%% intervals, the probability of improvement of each pair, "
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
    p.set_defaults(fn=cmd_compare)

    p = add("sweep", help="run a recipe: a grid of overrides x seeds, with statistics",
            description="Run every cell of a recipe (recipes/*.yaml: a base config, arms and "
            "a grid of config values) on every seed, as turnrl processes, at most --jobs at "
            "once. Runs that differ only after SFT share its start. Resumable: a run with a "
            "record is done, an unfinished one continues from its checkpoint. Writes "
            "results.md/.json/.png: per cell the held-out score after SFT and after RL (IQM "
            "and mean with stratified-bootstrap 95%% intervals, rliable), the gain, and the "
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
    p.set_defaults(fn=cmd_sweep)

    p = add("envs", help="list registered environments")
    p.set_defaults(fn=cmd_envs)

    p = add("play", help="play an env in the terminal (or watch its oracle)",
                       description="Play one episode: type an action per turn (an empty line "
                       "quits), or --oracle to watch the env's oracle play it.")
    p.add_argument("env", help="env id, e.g. frozenlake-v0 (see `turnrl envs`)")
    p.add_argument("--seed", type=int, default=0, help="reset seed (default 0)")
    p.add_argument("--oracle", action="store_true", help="let the oracle choose the actions")
    p.add_argument("--kwarg", action="append", metavar="KEY=VALUE",
                   help="env constructor argument, repeatable (e.g. --kwarg max_size=5)")
    p.set_defaults(fn=cmd_play)

    p = add("check-env", help="check an env against the env contract (check_env)",
            description="Build ENV (with --kwarg arguments; --import your module first) and "
            "run turnrl.envs.check_env on it: reset/step/close, types, episodes ending within "
            "max_turns, same seed -> same episode, the oracle and the capabilities its spec "
            "declares. Exit status 1 with the first problem.")
    p.add_argument("env", help="env id, e.g. my-maze-v0")
    p.add_argument("--kwarg", action="append", metavar="KEY=VALUE",
                   help="constructor argument, repeatable")
    p.add_argument("--seeds", type=int, default=3, help="seeds to probe (default 3)")
    p.set_defaults(fn=cmd_check_env)

    p = add("algos", help="list algorithm presets and registered functions",
                       description="Each preset is a bundle of registry keys (docs/algorithms.md)."
                       " Use one with algo.preset=NAME and override any key, e.g. "
                       "algo.loss_agg=token_mean.")
    p.set_defaults(fn=cmd_algos)

    p = add("init-model", help="write the built-in base model (or its random init) to a "
            "directory", description="Write the built-in base (model.path=tiny: a small "
            "Llama-architecture model with a character-level ChatML tokenizer, pretrained by "
            "`turnrl pretrain`) in the Hugging Face format; --random writes the random init "
            "instead (model.path=tiny-random), of the shape the options give.")
    p.add_argument("path", help="output directory")
    p.add_argument("--random", action="store_true", help="the random init (tiny-random), not "
                   "the pretrained base")
    from turnrl.config import TinyConfig

    for name, info in TinyConfig.model_fields.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=info.default,
                       help=f"{info.description} (default {info.default})")
    p.set_defaults(fn=cmd_init_model)
    from turnrl.config import PretrainConfig, config_help

    add_pretrain_parsers(add, "config keys:\n" + config_help(PretrainConfig))
    return parser


def _config_epilog() -> str:
    from turnrl.config import config_help

    return "config keys:\n" + config_help()


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
    except user_errors() as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except DiskFullError as error:  # what was being written, where, and how to go on
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `turnrl play ... | head`: the reader left, nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 141


if __name__ == "__main__":
    sys.exit(main())
