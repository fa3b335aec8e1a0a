"""The worker: the forked process that drops its privileges (uid, capabilities,
no_new_privs), sets its resource limits, refuses sockets, installs the system-call filter and
runs the code as ``__main__``. It reports ``ready`` (or ``setup_error``) on its pipe and closes
it before the code runs; an uncaught exception goes to the code's own stderr.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys

from .linux import (
    _CAP_VERSION_3,
    _PR_CAPBSET_DROP,
    _PR_SET_NO_NEW_PRIVS,
    _PR_SET_PDEATHSIG,
    _PR_SET_SECCOMP,
    _PR_SET_SECUREBITS,
    _SECBIT_NOROOT,
    _SECCOMP_MODE_FILTER,
    _libc,
    _prctl,
)
from .network import _child_block_network
from .status import _report

_PACKAGE_DIR = os.path.dirname(__file__)  # the frames a traceback leaves out


def _child_worker(payload: dict, supervisor: int, report_fd: int) -> None:
    import builtins
    import linecache
    import types

    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(signum, signal.SIG_DFL)
        _child_drop_privileges(payload)
        if payload["mode"] == "process":
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
            if os.getppid() != supervisor:
                os._exit(125)
        _child_set_limits(payload)
        if payload.get("cpus"):  # its share of the cores; the filter denies widening it
            os.sched_setaffinity(0, payload["cpus"])
        _child_block_network()
        for stream in (sys.stdout, sys.stderr):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(encoding="utf-8", errors="backslashreplace")
        _check_readable(os.path.dirname(os.__file__))
        _install_seccomp(bytes.fromhex(payload["seccomp"]))
    except BaseException as exc:
        _report(report_fd, setup_error=f"{type(exc).__name__}: {exc}")
        os._exit(125)

    code = payload["code"]
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    sys.argv = ["<code>"]
    sys.path.insert(0, os.getcwd())
    linecache.cache["<code>"] = (len(code), None, code.splitlines(True), "<code>")
    _cap_recursion(payload)
    _report(report_fd, ready=True)
    os.close(report_fd)  # the last trusted line: the code has no channel to the supervisor
    try:
        exec(compile(code, "<code>", "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:
        _write_traceback(exc, payload)
        if _is_stack_overflow(exc):
            # the host names a SIGSEGV as a stack overflow, as it does the C stack's own
            signal.signal(signal.SIGSEGV, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGSEGV)
        raise SystemExit(1) from None
    raise SystemExit(0)


_TRACEBACK_FRAMES = 50  # the innermost frames of an uncaught exception's traceback


def _write_traceback(exc: BaseException, payload: dict) -> None:
    """The code's uncaught exception on its own stderr (the program's text: the host's verdict
    never reads it), without the child package's frames and with at most the innermost
    ``_TRACEBACK_FRAMES`` frames (a million-frame recursion is summarised in a moment)."""
    import traceback

    try:
        report = traceback.TracebackException(type(exc), exc, exc.__traceback__,
                                              limit=-_TRACEBACK_FRAMES)
        frames = [frame for frame in report.stack
                  if os.path.dirname(frame.filename) != _PACKAGE_DIR]
        report.stack = traceback.StackSummary.from_list(frames)
        lines = list(report.format())
        explanation = _explain(exc, payload)
        if explanation:
            lines.append(explanation + "\n")
        sys.stderr.write("".join(lines))
    except BaseException:  # e.g. MemoryError again while formatting
        with contextlib.suppress(BaseException):
            sys.stderr.write(type(exc).__name__ + "\n")
    with contextlib.suppress(BaseException):
        sys.stderr.flush()


def _child_drop_privileges(payload: dict) -> None:
    """Root: switch to the call's uid (file-system uid too: the code never has root's file
    access). Then drop every capability (root, or root of the user namespace) and set
    no_new_privs, so nothing the code executes can regain privileges."""
    uid = payload["uid"]
    libc = _libc()
    privileged = uid is not None or _holds_capabilities()
    # first, while privileged (that also sets the floor the code cannot go below): the memory
    # cgroup's OOM killer takes the code before the supervisor
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as handle:
        handle.write("1000")
    if privileged:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last_cap = int(handle.read())
        for cap in range(last_cap + 1):
            _prctl(_PR_CAPBSET_DROP, cap)
        _prctl(_PR_SET_SECUREBITS, _SECBIT_NOROOT)
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    if privileged:
        _capset_zero(libc)
        if _holds_capabilities():
            raise OSError("capabilities are still held after dropping them")
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


def _check_readable(stdlib: str) -> None:
    """After the uid change: the standard library must still be importable."""
    try:
        os.listdir(stdlib)
    except OSError as exc:
        raise OSError(
            f"the sandbox uid cannot read the standard library at {stdlib} ({exc.strerror}); "
            "use isolation='namespace', or an interpreter every user can read "
            "(e.g. /usr/bin/python3, or `uv python install --install-dir /opt/python`) "
            "as SandboxConfig.python"
        ) from None


def _install_seccomp(program: bytes) -> None:
    """Load the host-built filter (:mod:`turnrl.sandbox.seccomp`); needs no_new_privs."""

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = Program(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = _libc()
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"seccomp filter: {os.strerror(code)}")


_BYTES_PER_FRAME = 2048  # what one level of recursion may cost, C stack aside
_capped: list[int] = []  # the depth asked for above the cap, if any


def _cap_recursion(payload: dict) -> None:
    """``sys.setrecursionlimit(n)`` above what ``memory_mb`` can hold (``memory //
    _BYTES_PER_FRAME`` levels) sets the cap instead, so a runaway recursion ends in a moment
    as a stack overflow rather than filling memory frame by frame until the wall clock."""
    real = sys.setrecursionlimit
    cap = max(1000, payload["limits"]["memory"] // _BYTES_PER_FRAME)

    def setrecursionlimit(limit: int, /) -> None:
        if limit > cap:
            _capped.append(limit)
            limit = cap
        real(limit)

    setrecursionlimit.__doc__ = real.__doc__
    sys.setrecursionlimit = setrecursionlimit


def _is_stack_overflow(exc: BaseException) -> bool:
    """Recursion past what the sandbox allows: a ``RecursionError`` at the capped limit, or
    CPython 3.11 could not allocate one more frame (the memory limit) and raised a bare
    ``SystemError``, or ``MemoryError`` with a traceback deeper than any program's."""
    if isinstance(exc, RecursionError) and _capped:
        return True
    if type(exc) is SystemError and str(exc) == "error return without exception set":
        return True
    if isinstance(exc, MemoryError):
        depth, tb = 0, exc.__traceback__
        while tb is not None and depth <= 100_000:
            depth, tb = depth + 1, tb.tb_next
        return depth > 100_000
    return False


def _explain(exc: BaseException, payload: dict) -> str | None:
    """A line after the traceback where CPython's own is misleading."""
    if _is_stack_overflow(exc):
        memory_mib = payload["limits"]["memory"] >> 20
        asked = f" (asked for {_capped[-1]})" if _capped else ""
        return (f"(sandbox) stack overflow: recursion deeper than memory_mb={memory_mib} "
                f"allows; sys.setrecursionlimit() is capped at "
                f"{max(1000, payload['limits']['memory'] // _BYTES_PER_FRAME)}{asked}")
    return None


def _holds_capabilities() -> bool:
    with open("/proc/self/status") as handle:
        fields = dict(line.split(":", 1) for line in handle if ":" in line)
    return any(int(fields[name].strip(), 16) for name in ("CapEff", "CapPrm"))


def _capset_zero(libc: ctypes.CDLL) -> None:
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint32) for n in ("effective", "permitted", "inheritable")]

    header, data = Header(_CAP_VERSION_3, 0), (Data * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capset: {os.strerror(code)}")


def _child_set_limits(payload: dict) -> None:
    limits = payload["limits"]
    processes = limits["processes"]
    if payload["nproc_relative"]:
        processes += _count_tasks(os.getuid())
    wanted = {
        resource.RLIMIT_CORE: (0, 0),
        resource.RLIMIT_CPU: (limits["cpu"], limits["cpu"] + 1),
        resource.RLIMIT_AS: (limits["memory"], limits["memory"]),
        resource.RLIMIT_FSIZE: (limits["file_size"], limits["file_size"]),
        resource.RLIMIT_NOFILE: (limits["open_files"], limits["open_files"]),
        resource.RLIMIT_NPROC: (processes, processes),
    }
    for kind, (soft, hard) in wanted.items():
        _, current_hard = resource.getrlimit(kind)
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        resource.setrlimit(kind, (soft, hard))


def _count_tasks(uid: int) -> int:
    """Processes + threads whose owner is ``uid`` (what RLIMIT_NPROC counts); a snapshot."""
    total = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    total += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                continue
    return total
