"""The processes of a call, read from ``/proc``: every descendant of the supervisor frozen and
killed in process mode (a fork bomb cannot outrun it), and the ``stat`` fields the host reads.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time


def _kill_descendants() -> None:
    """Process mode: kill every descendant (as child subreaper, orphans are re-parented to us).

    Descendants are first frozen with SIGSTOP, round after round until no new one appears (a
    stopped process cannot fork, so a fork bomb cannot outrun this), then killed and reaped.
    """
    me = str(os.getpid())
    frozen: set[str] = set()
    for _ in range(1000):
        fresh = _descendants(me) - frozen
        if not fresh:
            break
        _signal_all(fresh, signal.SIGSTOP)
        frozen |= fresh
    _signal_all(frozen, signal.SIGKILL)
    for _ in range(1000):  # stragglers: re-parented after the first sweep
        _reap_children()
        left = _descendants(me)
        if not left:
            return
        _signal_all(left, signal.SIGKILL)
        time.sleep(0.001)


def _descendants(root: str) -> set[str]:
    children: dict[str, list[str]] = {}
    for pid in _proc_pids():
        parent = _parent_of(pid)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal_all(pids: set[str], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(int(pid), signum)


def _reap_children() -> None:
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _proc_pids() -> list[str]:
    return [entry for entry in os.listdir("/proc") if entry.isdigit()]


def _parent_of(pid: str) -> str | None:
    fields = _stat_fields(pid)
    return fields[1] if len(fields) > 1 else None


def _stat_fields(pid: str) -> list[str]:
    """``/proc/PID/stat`` after the command name: state, ppid, pgrp, ... ([] if gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return []
    return stat.rsplit(b")", 1)[-1].decode(errors="replace").split()
