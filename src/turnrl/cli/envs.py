"""``turnrl envs``: the registered environments."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from turnrl.cli.common import AddParser


def add_parser(add: AddParser) -> None:
    p = add("envs", help="list registered environments")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from turnrl import envs

    table = Table(title="registered environments (any Gymnasium env: gym:<id>)")
    # "turns" is spec.max_turns (all agents' together in a multi-agent env, whose agents are
    # named after the table); cells are kept whole and the descriptions follow the table: in
    # a description column a narrow terminal (or a pipe, 80 columns) cut the ids to
    # "arithmet…"; a long tool list (swe-v0's eight) wraps in its own cell instead
    for column in ("id", "turns", "tools", "oracle", "state key", "privileged"):
        table.add_column(column, no_wrap=column != "tools")
    specs = {env_id: envs.spec(env_id) for env_id in envs.registered_ids()}
    for env_id, spec in specs.items():
        table.add_row(env_id, str(spec.max_turns), ", ".join(spec.tools) or "-",
                      _yes(spec.has_oracle), _yes(spec.has_state_key),
                      _yes(spec.has_privileged_info))
    console = Console()
    console.print(table)
    for env_id, spec in specs.items():
        agents = f" Agents: {', '.join(spec.agents)}." if spec.agents else ""
        console.print(f"[bold]{env_id}[/bold]: {escape(spec.description + agents)}")
    return 0


def _yes(flag: bool) -> str:
    return "yes" if flag else "-"
