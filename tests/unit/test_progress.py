"""What a run prints as it goes: a bar on a terminal (80 columns wide at most), one plain
line per RL step otherwise, nothing under --quiet; the libraries quiet unless --verbose."""

from __future__ import annotations

import io
import logging
import re

import pytest
from rich.console import Console

from turnrl import console
from turnrl.train.progress import LINES_PER_STAGE, Progress


@pytest.fixture(autouse=True)
def _normal_verbosity():
    yield
    console._VERBOSITY[0] = "normal"


def lines_of(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line]


def test_off_a_terminal_each_rl_step_is_one_line_and_other_stages_a_few(capsys):
    progress = Progress(enabled=True, console=Console(file=io.StringIO()))  # not a terminal
    assert progress.mode == "lines"
    with progress.task("RL", 3, every_step=True) as advance:
        for step in range(3):
            advance(f"reward 0.{step}00")
    rl = lines_of(capsys)
    assert [line.split(" (")[0] for line in rl] == ["RL 1/3 reward 0.000", "RL 2/3 reward 0.100",
                                                    "RL 3/3 reward 0.200"]
    with progress.task("eval (before RL)", 256) as advance:
        for _ in range(256):
            advance("")
    evals = lines_of(capsys)
    assert len(evals) <= LINES_PER_STAGE + 1 and evals[-1] == "eval (before RL) 256/256"
    progress.note("eval (before RL): success 0.152")
    assert lines_of(capsys) == ["eval (before RL): success 0.152"]


def test_log_progress_false_still_prints_a_line_per_step(capsys):
    progress = Progress(enabled=False, console=Console(file=io.StringIO(), force_terminal=True))
    assert progress.mode == "lines"


def test_the_bar_keeps_to_80_columns():
    out = io.StringIO()
    progress = Progress(console=Console(file=out, force_terminal=True, width=80))
    assert progress.mode == "bar"
    with progress.task("RL", 30, every_step=True) as advance:
        for _ in range(3):
            advance("reward 0.250 success 0.312")
    visible = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line)  # without the terminal codes
               for line in out.getvalue().replace("\r", "\n").split("\n")]
    assert any("3/30" in line and "reward 0.250 success 0.312" in line for line in visible)
    assert max(len(line) for line in visible) <= 80


def test_quiet_prints_nothing_but_the_libraries_are_quiet_by_default(capsys):
    console.set_verbosity("quiet")
    progress = Progress(console=Console(file=io.StringIO(), force_terminal=True))
    assert progress.mode == "quiet"
    with progress.task("RL", 2, every_step=True) as advance:
        advance("reward 1")
    progress.note("news")
    assert capsys.readouterr().err == ""
    from transformers.utils import logging as transformers_logging

    assert not transformers_logging.is_progress_bar_enabled()
    assert logging.getLogger(console.RAY_AUTH_LOGGER).level == logging.ERROR


def test_ray_notice_is_held_back_and_other_stderr_lines_pass(capfd):
    """What C++ writes to fd 2 inside the block: the known Ray notice is dropped, the rest
    comes out after the block; --verbose holds nothing back."""
    import os

    notice = (b"[2026-12-04 22:52:27,493 E 1 1] core_worker.cc:2465: Actor with class name: "
              b"'RolloutWorker' and ID: 'ab' has constructor arguments in the object store "
              b"and max_restarts > 0. If the arguments ...\n")
    with console.held_back_stderr(console.RAY_ACTOR_NOTICE):
        os.write(2, notice)
        os.write(2, b"a real error line\n")
    assert capfd.readouterr().err == "a real error line\n"
    console.set_verbosity("verbose")
    with console.held_back_stderr(console.RAY_ACTOR_NOTICE):
        os.write(2, notice)
    assert "core_worker.cc" in capfd.readouterr().err
