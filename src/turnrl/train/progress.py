"""How a run shows its progress (SFT, evaluations, RL steps), on stderr.

Three ways, chosen once per run (:func:`progress_mode`):

- ``bar``: a rich bar per stage (``log.progress=true`` on a terminal): name, bar, done of
  total, elapsed and remaining time, and a short status (``reward 0.250 success 0.312``);
  alarms are printed as warnings above it, never appended to it, so it keeps its width at
  80 columns;
- ``lines``: one plain line per RL step (``RL 3/30 reward 0.250 success 0.312 6.2 s``), and
  at most :data:`LINES_PER_STAGE` lines for SFT and each evaluation, when stderr is not a
  terminal (nohup, Slurm, CI) or with ``log.progress=false``;
- ``quiet``: nothing (``--quiet``); warnings and errors still print.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress

from turnrl.console import verbosity

__all__ = ["LINES_PER_STAGE", "Progress", "progress_mode"]

Mode = Literal["bar", "lines", "quiet"]
LINES_PER_STAGE = 10  # lines mode: the most lines of an SFT stage or an evaluation


def progress_mode(enabled: bool, console: Console) -> Mode:
    """``quiet`` under ``--quiet``; a bar when ``enabled`` (``log.progress``) on a terminal;
    else plain lines."""
    if verbosity() == "quiet":
        return "quiet"
    return "bar" if enabled and console.is_terminal else "lines"


class Progress:
    """``with progress.task("RL", total, every_step=True) as advance: advance("reward 0.5")``
    once per unit done (a step, an episode)."""

    def __init__(self, *, enabled: bool = True, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.mode = progress_mode(enabled, self.console)

    @contextmanager
    def task(self, name: str, total: int | None, *, completed: int = 0,
             every_step: bool = False) -> Iterator[Callable[[str], None]]:
        """A stage of ``total`` units; ``every_step``: in lines mode, a line per unit (RL
        steps) rather than at most :data:`LINES_PER_STAGE`."""
        if self.mode == "quiet":
            yield lambda _status: None
        elif self.mode == "lines":
            yield self._lines(name, total, completed, every_step)
        else:
            columns = [SpinnerColumn(), TextColumn(f"[bold]{name[:18]:<18}"),
                       BarColumn(bar_width=None), MofNCompleteColumn(), TimeElapsedColumn(),
                       TimeRemainingColumn(), TextColumn("{task.fields[status]}")]
            with RichProgress(*columns, console=self.console, transient=False,
                              expand=False) as bar:
                task_id = bar.add_task(name, total=total, completed=completed, status="")

                def advance(status: str) -> None:
                    bar.update(task_id, advance=1, status=status)

                yield advance

    def warn(self, text: str) -> None:
        """``warning: text`` on stderr, in every mode, on one line (no wrapping: a log file
        keeps it whole for grep)."""
        self.console.print(f"[yellow]warning[/yellow]: {escape(text)}", soft_wrap=True)

    def note(self, text: str) -> None:
        """One line of news (an evaluation's result), unless quiet."""
        if self.mode != "quiet":
            print(text, file=sys.stderr, flush=True)

    def _lines(self, name: str, total: int | None, completed: int,
               every_step: bool) -> Callable[[str], None]:
        done, start = completed, time.perf_counter()
        stride = 1 if every_step or not total else max(1, -(-total // LINES_PER_STAGE))

        def advance(status: str) -> None:
            nonlocal done, start
            done += 1
            if done % stride and done != total:
                return
            took = time.perf_counter() - start
            start = time.perf_counter()
            of = f"{done}/{total}" if total else str(done)
            per = f" ({took:.1f} s)" if every_step else ""
            print(f"{name} {of} {status}{per}".rstrip(), file=sys.stderr, flush=True)

        return advance
