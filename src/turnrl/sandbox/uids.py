"""Per-call uids of a root host: unique across every turnrl process on the machine while a
call runs, and nothing left running as one after its call.

A uid is claimed with a POSIX record lock on byte ``uid - SANDBOX_UID_BASE`` of one root-only
lock file (``/run/turnrl-sandbox-uids.lock``, or under ``/var/lock`` or the temp directory), so
two host processes never hand the same uid to concurrent calls (a shared uid would let one
call read the other's files, signal it and share its ``RLIMIT_NPROC`` count). Record locks
belong to the process and die with it, also by SIGKILL; one descriptor stays open for the
process's lifetime (closing any descriptor of the file would drop all of its locks), and the
threads of one process are kept apart by an in-process set. A uid that some process still
runs as (a daemon of a host that was killed mid-call) is skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import signal
import threading
import time

SANDBOX_UID_BASE = 1_900_000_000
SANDBOX_UID_SPAN = 100_000_000
_LOCK_DIRS = ("/run", "/var/lock", "/tmp")
_LOCK_NAME = "turnrl-sandbox-uids.lock"

_lock = threading.Lock()  # guards _in_use and the lock calls
_fd_lock = threading.Lock()
_counter = itertools.count()
_in_use: set[int] = set()
_lock_fd: list[int] = []


def claim() -> int:
    """A uid no other call (of any turnrl process here) holds and no process runs as."""
    fd = _lock_file()
    start = os.getpid() * 4096 + next(_counter)
    with _lock:
        for offset in range(SANDBOX_UID_SPAN):
            index = (start + offset) % SANDBOX_UID_SPAN
            uid = SANDBOX_UID_BASE + index
            if uid in _in_use:
                continue
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, index)
            except OSError:
                continue  # another host process's call holds it
            if processes_of(uid):
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, index)
                continue
            _in_use.add(uid)
            return uid
    raise RuntimeError("no free sandbox uid")  # 10^8 uids: unreachable in practice


def release(uid: int) -> None:
    """Give ``uid`` back (after every process of its call is gone)."""
    with _lock:
        _in_use.discard(uid)
        with contextlib.suppress(OSError):
            fcntl.lockf(_lock_file(), fcntl.LOCK_UN, 1, uid - SANDBOX_UID_BASE)


def processes_of(uid: int) -> list[int]:
    """Pids whose real uid is ``uid`` (a snapshot of ``/proc``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as handle:
                for line in handle:
                    if line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid:
                            found.append(int(entry))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return found


def kill_all(uid: int, timeout_s: float = 2.0) -> None:
    """SIGSTOP then SIGKILL every process running as ``uid`` until none is left: the backstop
    for a daemon that slipped past the supervisor (e.g. the supervisor was OOM-killed)."""
    end = time.monotonic() + timeout_s
    while (pids := processes_of(uid)) and time.monotonic() < end:
        for signum in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signum)
        time.sleep(0.005)


def _lock_file() -> int:
    with _fd_lock:
        if not _lock_fd:
            _lock_fd.append(_open_lock_file())
        return _lock_fd[0]


def _lock_file_path() -> str:
    """Where this process's lock file is (opened on first use)."""
    return os.readlink(f"/proc/self/fd/{_lock_file()}")


def _open_lock_file() -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    for directory in _LOCK_DIRS:
        if not os.path.isdir(directory):
            continue
        try:
            fd = os.open(os.path.join(directory, _LOCK_NAME), flags, 0o600)
        except OSError:
            continue
        if os.fstat(fd).st_uid == 0:
            return fd
        os.close(fd)  # someone else's file (e.g. made by a non-root user in /tmp): not ours
    raise OSError("no directory for the sandbox's uid lock file (tried /run, /var/lock, /tmp)")
