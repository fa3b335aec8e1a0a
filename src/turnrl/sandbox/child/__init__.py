"""The sandbox's child program: the supervisor and the worker (see :mod:`turnrl.sandbox`).

Everything here runs in the sandbox interpreter (``python -I -c _CHILD_COMMAND``, see
:mod:`turnrl.sandbox.isolation`), which loads this package by its path under another name:
only the standard library, its modules import each other relatively, no turnrl import. The
supervisor imports every module of it before it sets anything up (after the mount view and
the uid change the package's directory may be out of reach). The host imports it too, for the
status-pipe parser and the ``/proc`` helpers both sides use.

This module is the supervisor (:func:`_child_main`, :func:`_child_supervise`); the others:
:mod:`.status` (the pipes' JSON lines), :mod:`.linux` (constants and ``prctl``),
:mod:`.mounts` (namespace mode's mount view), :mod:`.worker` (privileges, limits, the filter,
the code run), :mod:`.network` (sockets refused) and :mod:`.procs` (descendants in ``/proc``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from .linux import _PR_SET_CHILD_SUBREAPER, _libc, _prctl
from .mounts import _child_setup_namespace
from .procs import _kill_descendants
from .status import _parse_status, _read_first_line, _report
from .worker import _child_worker

_PROBE_ARG = "--turnrl-sandbox-probe"


class _Watchdog(Exception):
    pass


def _child_main() -> None:
    """The supervisor: set up, fork the worker, supervise it.

    Two pipes carry JSON lines. The *status* pipe goes to the host and only the supervisor
    writes it (the worker closes it before anything else), so the host can trust it. The
    *worker* pipe goes from the worker to the supervisor: its one line (``ready`` or
    ``setup_error``) is written before the code runs, and the worker closes it before the
    code runs, so nothing the code does reaches the supervisor or the host but its exit
    status (and its stdout/stderr, which the verdict never reads).
    """
    payload = json.loads(sys.stdin.buffer.read())
    status_fd = payload["status_fd"]
    os.set_inheritable(status_fd, False)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _report(status_fd, started=True)
    try:
        if payload["cgroup_procs"] is not None:  # first: everything forked later is counted
            with open(payload["cgroup_procs"], "w") as handle:
                handle.write("0")
        if payload["mode"] == "namespace":
            _unshare_cgroup()  # after joining: the call's cgroup is the root of what it sees
            _child_setup_namespace(payload)
        else:
            _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        os.chdir(payload["workdir"])
        _write_files(payload.get("files") or {}, payload["uid"])
        if payload["uid"] is not None:
            os.chown(payload["workdir"], payload["uid"], payload["uid"])
    except Exception as exc:
        _report(status_fd, setup_error=f"{type(exc).__name__}: {exc}")
        os._exit(125)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, signal.SIG_IGN)
    supervisor = os.getpid()
    worker_read, worker_write = os.pipe()
    worker = os.fork()
    if worker == 0:
        os.close(status_fd)
        os.close(worker_read)
        _child_worker(payload, supervisor, worker_write)  # never returns
    os.close(worker_write)
    _child_supervise(worker, worker_read, payload)


def _write_files(files: dict, uid: int | None) -> None:
    """The caller's files (checked on the host: relative, no ``..``), owned by the call's uid."""
    for path, text in files.items():
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        if uid is not None:
            for part in [path] + [os.path.join(*path.split("/")[:i])
                                  for i in range(1, path.count("/") + 1)]:
                os.chown(part, uid, uid)


def _unshare_cgroup() -> None:
    """A cgroup namespace rooted at the cgroup the supervisor is in now (the call's own):
    ``/proc/self/cgroup`` shows ``/`` and no path of the host's cgroup tree (``/sys`` is not
    in the minimal root at all)."""
    import ctypes

    if _libc().unshare(_CLONE_NEWCGROUP) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"unshare(CLONE_NEWCGROUP): {os.strerror(code)}")


_CLONE_NEWCGROUP = 0x02000000


def _child_supervise(worker: int, report_fd: int, payload: dict) -> None:
    """Reap the worker (and, as PID 1 or subreaper, every orphan); report; kill the rest."""
    status_fd = payload["status_fd"]

    def on_alarm(_signum: int, _frame: Any) -> None:
        raise _Watchdog

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, payload["wall_time_s"])
    exit_code: int | None = None
    cpu_s = 0.0
    try:
        first, _ = _read_first_line(report_fd)
        setup = _parse_status(first)
        if "setup_error" in setup or "ready" not in setup:
            error = setup.get("setup_error", "the worker died during setup")
            _report(status_fd, setup_error=f"worker: {error}")
        while True:
            try:
                pid, wait_status, usage = os.wait4(-1, 0)
            except ChildProcessError:
                break
            if pid == worker:
                exit_code = os.waitstatus_to_exitcode(wait_status)
                cpu_s = usage.ru_utime + usage.ru_stime
                break
        signal.setitimer(signal.ITIMER_REAL, 0)
    except _Watchdog:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _report(status_fd, watchdog=True)
    if payload["mode"] == "process":
        _kill_descendants()
    if exit_code is not None:
        _report(status_fd, exit=exit_code, cpu_s=round(cpu_s, 3))
    os._exit(0)  # in namespace mode the kernel now kills everything left in the namespace
