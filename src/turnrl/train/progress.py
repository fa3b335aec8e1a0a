"""A rich progress display for the stages of a run (SFT, eval, RL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress


class Progress:
    """``with progress.task("RL", total) as advance: advance("reward 0.5")`` per step."""

    def __init__(self, *, enabled: bool = True, console: Console | None = None) -> None:
        self.enabled = enabled
        self.console = console or Console(stderr=True)

    @contextmanager
    def task(self, name: str, total: int | None, *,
             completed: int = 0) -> Iterator[Callable[[str], None]]:
        if not self.enabled:
            yield lambda _status: None
            return
        columns = [SpinnerColumn(), TextColumn(f"[bold]{name:<16}"), BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                   TextColumn("{task.fields[status]}")]
        with RichProgress(*columns, console=self.console, transient=False) as bar:
            task_id = bar.add_task(name, total=total, completed=completed, status="")

            def advance(status: str) -> None:
                bar.update(task_id, advance=1, status=status)

            yield advance
