"""``turnrl algos``: the algorithm presets and the registered functions."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from turnrl.cli.common import AddParser


def add_parser(add: AddParser) -> None:
    p = add("algos", help="list algorithm presets and registered functions",
                       description="Each preset is a bundle of registry keys (docs/algorithms.md)."
                       " Use one with algo.preset=NAME and override any key, e.g. "
                       "algo.loss_agg=token_mean.")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
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
