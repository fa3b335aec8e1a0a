"""``turnrl pretrain``: pretrain the built-in model on the procedural corpus
(:mod:`turnrl.pretrain`, ``docs/pretraining.md``).

``turnrl pretrain [CONFIG.yaml] [key=value ...]`` (default: the shipped recipe,
``configs/pretrain.yaml``), ``--resume RUN_DIR``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from turnrl.cli.common import AddParser, UsageError, config_epilog, split_config_args
from turnrl.config import PretrainConfig, load_config


def add_parser(add: AddParser) -> None:
    p = add("pretrain", help="pretrain the built-in model on the procedural corpus",
            description="Pretrain the built-in tiny model on an env-agnostic synthetic corpus "
            "(copying, lookup, listed commands, tool calls over random schemas, memory, "
            "arithmetic, counting). Default config: configs/pretrain.yaml, the shipped base's "
            "recipe. Writes runs/<name>/ with model/ (a Hugging Face model dir and its card).",
            epilog=config_epilog(PretrainConfig),
            formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("items", nargs="*", metavar="[CONFIG.yaml] [key.sub=value ...]")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a pretraining run from its "
                   "newest checkpoint")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl.io import suggest_path
    from turnrl.pretrain.launch import launch
    from turnrl.pretrain.probes import markdown

    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "config.yaml").is_file():
            raise UsageError(f"--resume {args.resume!r}: no config.yaml there"
                             f"{suggest_path(run_dir)}; give a pretraining run directory "
                             "such as runs/pretrain")
        cfg = load_config(run_dir / "config.yaml", args.items, schema=PretrainConfig)
    else:
        path, overrides = split_config_args(args.items, "pretrain.yaml")
        cfg = load_config(path, overrides, schema=PretrainConfig)
        run_dir = None
    result = launch(cfg, resume=run_dir)
    print(markdown({"probes": result.probes}))  # plain: a table never wraps
    minutes, seconds = divmod(round(result.wall_time_s), 60)
    Console().print(f"pretrained in {minutes} min {seconds} s; model: [bold]{result.model_dir}[/] "
                  f"(load it with model.path={result.model_dir})")
    return 0
