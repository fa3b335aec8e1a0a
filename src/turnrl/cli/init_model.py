"""``turnrl init-model``: the built-in base model (or its random init) written to a directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from turnrl.cli.common import AddParser, UsageError
from turnrl.config import TinyConfig


def add_parser(add: AddParser) -> None:
    p = add("init-model", help="write the built-in base model (or its random init) to a "
            "directory", description="Write the built-in base (model.path=tiny: a small "
            "Llama-architecture model with a character-level ChatML tokenizer, pretrained by "
            "`turnrl pretrain`) in the Hugging Face format; --random writes the random init "
            "instead (model.path=tiny-random), of the shape the options give.")
    p.add_argument("path", help="output directory")
    p.add_argument("--random", action="store_true", help="the random init (tiny-random), not "
                   "the pretrained base")

    for name, info in TinyConfig.model_fields.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=info.default,
                       help=f"{info.description} (default {info.default})")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
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
