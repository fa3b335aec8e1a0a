"""``turnrl sft``: the SFT stage of a config alone, its model saved and evaluated."""

from __future__ import annotations

import argparse

from rich.console import Console

from turnrl.cli.common import AddParser, config_epilog, print_results, split_config_args


def add_parser(add: AddParser) -> None:
    p = add("sft", help="supervised fine-tuning only (oracle demos or JSONL)",
                       description="Run the SFT stage of a config, save runs/<name>/sft_model "
                       "and evaluate it.", epilog=config_epilog(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("items", nargs="*", metavar="[CONFIG.yaml] [key.sub=value ...]")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl.config import load_config
    from turnrl.train.sft_stage import run_sft

    path, overrides = split_config_args(args.items)
    run, out, summary = run_sft(load_config(path, [*overrides, "sft.enabled=true"]))
    print_results(None, summary, run_dir=run.run_dir, wall_time_s=None,
                  labels=("", "after SFT"))
    Console().print(f"SFT model saved to [bold]{out}[/]")
    return 0
