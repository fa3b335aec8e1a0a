"""What several ``turnrl`` commands share: the usage error and how an error is printed, the
user's mistakes that end a command with one ``error:`` line (:func:`user_errors`), the config
arguments ``[CONFIG.yaml] [key=value ...]`` and their ``--help`` epilog, the run-dir lookup
(:func:`model_target`), an env built from ``--kwarg`` arguments, and the before/after table.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from turnrl.config import Config, ConfigError, config_help, default_config_path
from turnrl.registry import UnknownNameError

AddParser = Callable[..., argparse.ArgumentParser]
"""``add(name, **kwargs)``: a subparser of ``turnrl`` with the common options (``--quiet``,
``--verbose``, ``--import``); each command module's ``add_parser`` calls it."""


class UsageError(ValueError):
    """A bad command-line argument."""


def print_error(error: BaseException) -> None:
    """``error: ...`` on stderr: how every command reports what went wrong."""
    print(f"error: {error}", file=sys.stderr)


def user_errors() -> tuple[type[BaseException], ...]:
    """The errors that are a user's mistake: one ``error:`` line, exit status 2, no traceback.
    Imported here, when a command runs, not when the parser is built: most of them come with
    the heavy modules (torch, transformers) that only some commands need."""
    from turnrl.envs.registry import EnvPluginError
    from turnrl.io import RunDirLocked
    from turnrl.models.chat import ChatTemplateError
    from turnrl.models.policy import ModelLoadError
    from turnrl.report import ReportError
    from turnrl.sweep import RecipeError
    from turnrl.train.checkpoint import CheckpointError
    from turnrl.train.sft import DatasetError

    return (ConfigError, ModelLoadError, DatasetError, ChatTemplateError, UnknownNameError,
            EnvPluginError, UsageError, CheckpointError, RunDirLocked, ReportError, RecipeError)


def split_config_args(items: Sequence[str], default: str = "default.yaml"
                      ) -> tuple[Path, list[str]]:
    """``[CONFIG.yaml] [key=value ...]`` → (config path, overrides); without a file, the
    ``default`` config (:func:`~turnrl.config.default_config_path`)."""
    items = list(items)
    if items and "=" not in items[0]:
        return Path(items.pop(0)), items
    return default_config_path(default), items


@functools.cache
class WrappingFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help at the terminal's width (``COLUMNS``, else 80 when not a terminal):
    descriptions and epilogs keep their line breaks and indentation, and a line longer
    than the width wraps under its own indentation."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        lines = []
        for line in text.splitlines():
            lead = indent + line[:len(line) - len(line.lstrip())]
            lines.append(textwrap.fill(line.strip(), width, initial_indent=lead,
                                       subsequent_indent=lead, break_long_words=False,
                                       break_on_hyphens=False) if line.strip() else "")
        return "\n".join(lines)


def config_epilog(schema: type[BaseModel] = Config) -> str:
    """The ``--help`` epilog of a command that takes a config: every key of ``schema``."""
    return "config keys:\n" + config_help(schema)


def model_target(model: str) -> Path | str:
    """A run dir's newest checkpoint (named on stderr: a run still training may have newer
    steps to come), else ``model`` as given (a model dir, hub id, tiny); a path here that
    does not exist is a usage error naming the closest name there."""
    from turnrl.console import verbosity
    from turnrl.io import looks_local, suggest_path
    from turnrl.train.checkpoint import checkpoint_step, latest_checkpoint

    target = Path(model)
    if not target.exists() and looks_local(model):
        raise UsageError(f"{model!r} does not exist (no such run or model dir)"
                         f"{suggest_path(target)}")
    if (target / "checkpoints").is_dir():
        checkpoint = latest_checkpoint(target)
        if checkpoint is None:
            raise UsageError(f"run {model!r} has no complete checkpoint yet")
        if verbosity() != "quiet":
            print(f"using {checkpoint} (the run's newest checkpoint, RL step "
                  f"{checkpoint_step(checkpoint)})", file=sys.stderr, flush=True)
        return checkpoint
    return model


def make_env_arg(args: argparse.Namespace) -> Any:
    """The env of ``args.env`` with its ``--kwarg`` arguments; a bad one is a usage error."""
    from turnrl import envs

    try:
        return envs.make(args.env, **parse_kwargs(args.kwarg or []))
    except (TypeError, ValueError) as error:
        if isinstance(error, UnknownNameError):
            raise
        raise UsageError(f"--kwarg for {args.env!r}: {error}") from None


def parse_kwargs(items: Sequence[str]) -> dict:
    """``["key=value", ...]`` → dict, values parsed as YAML scalars (``max_size=5`` → 5)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--kwarg {item!r}: expected key=value, e.g. --kwarg max_size=5")
        out[key] = yaml.safe_load(value)
    return out


def print_results(before: dict[str, float] | None, after: dict[str, float] | None, *,
                  run_dir: Path, wall_time_s: float | None,
                  labels: tuple[str, str] = ("after SFT (before RL)", "after RL")) -> None:
    """The before/after table: success, pass@k and reward with 95% intervals."""
    table = Table(title="evaluation on held-out seeds")
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
    # a multi-agent run: the outcome rates against each evaluation opponent
    for key in sorted(k for k in columns[0][1] if k.startswith("vs_")
                      and not k.endswith("/success")):
        table.add_row(key, *(f"{s[key]:.3f}" if key in s else "-" for _, s in columns))
    console = Console()
    console.print(table)
    console.print(f"run dir: {run_dir}", soft_wrap=True, highlight=False)  # never cut
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
