"""The sandbox's child program: the supervisor and the worker (see :mod:`turnrl.sandbox`).

Everything here runs in the sandbox interpreter (``python -I -c _CHILD_COMMAND``, see
:mod:`turnrl.sandbox.isolation`), which loads this file as a standalone module: only the
standard library, no turnrl import. The host imports it too, for the status-pipe parser and the
``/proc`` helpers both sides use.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import resource
import signal
import sys
import time
from typing import Any

_STATUS_CAP = 65_536  # bytes of status-pipe JSON the host keeps
_PROBE_ARG = "--turnrl-sandbox-probe"

# Linux constants (include/uapi/linux/{prctl,mount,capability,securebits}.h).
_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_SECBIT_NOROOT = 0x1 | 0x2  # NOROOT | NOROOT_LOCKED: uid 0 gains no capabilities on execve
_CAP_VERSION_3 = 0x20080522
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND, _MS_REC = 32, 1024, 2048, 4096, 16384
_MS_RELATIME = 1 << 21
_STATVFS_TO_MS = {  # statvfs f_flag bit -> mount flag, for remounts that must keep locked flags
    getattr(os, name, 0): flag  # the ST_* names are Linux-only; 0 entries are never set
    for name, flag in (
        ("ST_NOSUID", _MS_NOSUID),
        ("ST_NODEV", _MS_NODEV),
        ("ST_NOEXEC", _MS_NOEXEC),
        ("ST_NOATIME", _MS_NOATIME),
        ("ST_NODIRATIME", _MS_NODIRATIME),
        ("ST_RELATIME", _MS_RELATIME),
    )
}


class _Watchdog(Exception):
    pass


def _report(fd: int, **fields: Any) -> None:
    with contextlib.suppress(OSError, TypeError, ValueError):
        os.write(fd, (json.dumps(fields) + "\n").encode())


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int) -> None:
    if _libc().prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl({option}, {arg}): {os.strerror(code)}")


def _child_main() -> None:
    """The supervisor: set up, fork the worker, supervise it.

    Two pipes carry JSON lines. The *status* pipe goes to the host and only the supervisor
    writes it (the worker closes it before anything else), so the host can trust it. The
    *worker* pipe goes from the worker to the supervisor: its first line (``ready`` or
    ``setup_error``) is written before the code runs and is trusted; later lines (the uncaught
    exception) could be forged by the code and only ever become the error text.
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
            _child_setup_namespace(payload)
        else:
            _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        os.chdir(payload["workdir"])
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


def _child_setup_namespace(payload: dict) -> None:
    """PID 1 of the new namespaces: private tmpfs for /tmp and the workdir, the host's ttys,
    message queues and ``/run`` hidden, the interpreter exposed to the call's uid, every other
    mount read-only.

    A *cover* is a tmpfs mounted over a directory: ``/tmp`` and ``/dev/shm`` (writable, private),
    ``/dev/pts``, ``/dev/mqueue`` and ``/run`` (empty, read-only), and, when the worker changes
    uid, every topmost directory the uid could not traverse on the way to a directory the
    interpreter needs (e.g. ``/root``). The needed directories under a cover (the interpreter's
    prefix, its ``sys.path``) are bind-mounted back at their own paths through ``O_PATH``
    descriptors opened before the covers, so ``sys.executable`` and every import path stay
    valid while the rest of the covered directory (root's home) is not there at all.
    """
    workdir, size = payload["workdir"], payload["tmpfs_bytes"]
    options = f"size={size},mode=1777"
    writable = {"/tmp", "/proc"}
    covers = {path: options for path in ("/tmp", "/dev/shm") if _is_real_dir(path)}
    covers.update((path, "size=4k,mode=755") for path in _HIDDEN if _is_real_dir(path))
    needed = _interpreter_dirs()
    if payload["uid"] is not None:
        covers.update((path, "size=4k,mode=755") for path in _closed_ancestors(needed))
    exposed = {}
    for path in needed:
        cover = next((a for a in _ancestors(path) if a in covers and a != path), None)
        if cover is not None:
            exposed[path] = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    covers = {p: o for p, o in covers.items()  # a cover inside another one is gone with it
              if not any(p.startswith(q.rstrip("/") + "/") for q in covers if q != p)}
    for path in sorted(covers, key=len):
        _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, covers[path])
    writable.update(p for p in ("/tmp", "/dev/shm") if p in covers)
    for path, fd in sorted(exposed.items()):
        _make_dirs(path)
        _mount(f"/proc/self/fd/{fd}", path, "", _MS_BIND | _MS_REC, None)
        os.close(fd)
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    if not any(workdir == w or workdir.startswith(w + "/") for w in writable):
        _mount("tmpfs", workdir, "tmpfs", _MS_NOSUID | _MS_NODEV, options)  # hides the host's
        writable.add(workdir)
    for mount_point in _mount_points():
        if mount_point in writable or any(mount_point.startswith(w + "/") for w in writable):
            continue
        try:
            flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
            vfs_flags = os.statvfs(mount_point).f_flag
            flags |= sum(ms for st, ms in _STATVFS_TO_MS.items() if vfs_flags & st)
            _mount("none", mount_point, "", flags, None)
        except OSError:
            pass  # best effort: a mount that cannot be remounted stays as it was


_HIDDEN = ("/dev/pts", "/dev/mqueue", "/run")  # the host's ttys, POSIX queues, daemon sockets


def _is_real_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _interpreter_dirs() -> list[str]:
    """The directories this interpreter needs to run and import: its prefixes, the directory
    of ``sys.executable`` (and of what it links to), and ``sys.path``; outermost only."""
    executable = sys.executable
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  os.path.dirname(executable), os.path.dirname(os.path.realpath(executable))}
    candidates.update(p if os.path.isdir(p) else os.path.dirname(p) for p in sys.path if p)
    dirs = sorted({os.path.realpath(p) for p in candidates if p and os.path.isdir(p)})
    return [d for d in dirs if not any(d.startswith(o.rstrip("/") + "/") for o in dirs if o != d)]


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/", "/a", "/a/b", "/a/b/c"]``."""
    parts = path.strip("/").split("/")
    return ["/"] + ["/" + "/".join(parts[: i + 1]) for i in range(len(parts)) if parts[0]]


def _closed_ancestors(paths: list[str]) -> set[str]:
    """For each path, its topmost proper ancestor that a uid with no groups cannot traverse
    (no ``o+x``), e.g. ``/root`` (mode 0700) for an interpreter under ``/root/.pyenv``."""
    closed = set()
    for path in paths:
        for ancestor in _ancestors(path)[1:-1]:
            if not os.stat(ancestor).st_mode & 0o001:
                closed.add(ancestor)
                break
    return closed


def _make_dirs(path: str) -> None:
    """``mkdir -p`` with mode 0755 whatever the umask (inside a cover's fresh tmpfs)."""
    missing = [a for a in _ancestors(path) if not os.path.isdir(a)]
    for directory in missing:
        os.mkdir(directory)
        os.chmod(directory, 0o755)


def _mount(source: str, target: str, fstype: str, flags: int, data: str | None) -> None:
    encoded = data.encode() if data is not None else None
    result = _libc().mount(source.encode(), target.encode(), fstype.encode(), flags, encoded)
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {fstype or 'remount'} on {target}: {os.strerror(code)}")


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
        fields = [line.split() for line in handle]
    points = [f[4] for f in fields if len(f) > 4]
    # mountinfo escapes space, tab, newline and backslash as octal (\040 ...)
    return [p.encode().decode("unicode_escape") if "\\" in p else p for p in points]


def _child_worker(payload: dict, supervisor: int, report_fd: int) -> None:
    import builtins
    import linecache
    import traceback
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
    _report(report_fd, ready=True)
    try:
        exec(compile(code, "<code>", "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:
        try:  # the traceback without this file's frames (the exec call, the socket block)
            report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
            frames = [frame for frame in report.stack if frame.filename != __file__]
            report.stack = traceback.StackSummary.from_list(frames)
            sys.stderr.write("".join(report.format()))
            summary = "".join(report.format_exception_only()).strip().splitlines()[-1]
        except BaseException:  # e.g. MemoryError again while formatting
            summary = type(exc).__name__
            sys.stderr.write(summary + "\n")
        _report(report_fd, exception=_explain(exc, summary, payload)[:1000])
        raise SystemExit(1) from None
    raise SystemExit(0)


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


def _explain(exc: BaseException, summary: str, payload: dict) -> str:
    """The error line for an uncaught exception, where CPython's own is misleading."""
    if type(exc) is SystemError and str(exc) == "error return without exception set":
        # CPython 3.11 could not allocate a frame (the memory limit) and set no MemoryError
        memory_mib = payload["limits"]["memory"] >> 20
        return (f"MemoryError: recursion ran out of memory (memory_mb={memory_mib}); "
                "CPython reported it as 'SystemError: error return without exception set'")
    return summary


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


def _child_block_network() -> None:
    """Python-level refusal with a clear message, in front of the seccomp filter (the real
    barrier, which answers a bare ``EACCES``): creating a socket of any family through
    ``socket.socket`` or ``_socket.socket``, ``connect``/``bind``, a ``socketpair`` other than
    ``AF_UNIX`` streams and name lookups raise ``PermissionError: [Errno 13] sockets are
    disabled in the sandbox (AF_UNIX): ...``. Sockets on existing descriptors (``socketpair``,
    ``fromfd``, asyncio's self-pipe) still work. The C type under the patch and ctypes bypass
    it and get the kernel's ``EACCES``."""
    import _socket
    import socket
    import types

    # socket.py calls the real _socket (e.g. _socket.socket.__init__) at call time, so the code's
    # ``import _socket`` gets a copy of the module with the refusing names instead
    raw = types.ModuleType("_socket", _socket.__doc__)
    raw.__dict__.update(_socket.__dict__)
    refusing_raw = _refusing_socket_type(_socket.socket)
    raw.__dict__.update(socket=refusing_raw, SocketType=refusing_raw,
                        socketpair=_checked_socketpair(_socket.socketpair))
    sys.modules["_socket"] = raw
    vars(socket).update(socket=_refusing_socket_type(socket.socket),  # socketpair, accept too
                        socketpair=_checked_socketpair(socket.socketpair))
    for name in (
        "create_connection",
        "create_server",
        "getaddrinfo",
        "gethostbyname",
        "gethostbyname_ex",
        "gethostbyaddr",
        "getnameinfo",
    ):
        setattr(socket, name, _refusing_call(name))
        if hasattr(raw, name):
            setattr(raw, name, _refusing_call(name))


def _socket_refusal(what: str) -> PermissionError:
    """The one error every refused socket operation raises (``what``: family or call)."""
    return PermissionError(errno.EACCES, f"sockets are disabled in the sandbox ({what}): no "
                           "network access and no host sockets; only socket.socketpair() of "
                           "AF_UNIX streams works")


def _family_name(family: int) -> str:
    import socket

    try:
        return socket.AddressFamily(socket.AF_INET if family == -1 else family).name
    except ValueError:
        return f"address family {family}"


def _kind_name(kind: int) -> str:
    import socket

    try:
        return socket.SocketKind(kind & 0xF).name  # without SOCK_NONBLOCK / SOCK_CLOEXEC
    except ValueError:
        return f"type {kind}"


def _refusing_socket_type(base: Any) -> Any:
    """A subclass of ``base`` that wraps existing descriptors only and never connects/binds."""

    def __init__(self: Any, family: int = -1, type: int = -1, proto: int = -1,
                 fileno: Any = None) -> None:
        if fileno is None:
            raise _socket_refusal(_family_name(family))
        base.__init__(self, family, type, proto, fileno)

    def connect(self: Any, *_args: Any) -> None:
        raise _socket_refusal(f"connect on {_family_name(self.family)}")

    def bind(self: Any, *_args: Any) -> None:
        raise _socket_refusal(f"bind on {_family_name(self.family)}")

    methods = {"__init__": __init__, "connect": connect, "bind": bind, "__slots__": ()}
    return type(base.__name__, (base,), methods)


def _checked_socketpair(real: Any) -> Any:
    """``real`` (``socketpair``) for ``AF_UNIX`` streams only, the pairs the filter allows."""
    import socket

    def socketpair(family: Any = None, type: int = socket.SOCK_STREAM, proto: int = 0) -> Any:
        family = socket.AF_UNIX if family is None else family
        if family != socket.AF_UNIX or type & 0xF != socket.SOCK_STREAM:
            raise _socket_refusal(f"socketpair of {_family_name(family)} {_kind_name(type)}")
        return real(family, type, proto)

    return socketpair


def _refusing_call(name: str) -> Any:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise _socket_refusal(name)

    return refuse


def _child_supervise(worker: int, report_fd: int, payload: dict) -> None:
    """Reap the worker (and, as PID 1 or subreaper, every orphan); report; kill the rest."""
    status_fd = payload["status_fd"]

    def on_alarm(_signum: int, _frame: Any) -> None:
        raise _Watchdog

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, payload["wall_time_s"])
    exit_code: int | None = None
    cpu_s = 0.0
    later = b""
    try:
        first, later = _read_first_line(report_fd)
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
    exception = _parse_status(later + _read_available(report_fd)).get("exception")
    if isinstance(exception, str):
        _report(status_fd, exception=exception[:1000])
    if exit_code is not None:
        _report(status_fd, exit=exit_code, cpu_s=round(cpu_s, 3))
    os._exit(0)  # in namespace mode the kernel now kills everything left in the namespace


def _read_first_line(fd: int) -> tuple[bytes, bytes]:
    """Block until the first line (or EOF); return it and whatever followed it."""
    data = b""
    while b"\n" not in data and len(data) < _STATUS_CAP:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    first, _, rest = data.partition(b"\n")
    return first, rest


def _read_available(fd: int) -> bytes:
    """What the worker pipe holds now, without blocking (its writers may still be alive)."""
    os.set_blocking(fd, False)
    data = b""
    while len(data) < _STATUS_CAP:
        try:
            chunk = os.read(fd, 65_536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data[:_STATUS_CAP]


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


def _parse_status(data: bytes) -> dict:
    """Merge the JSON lines of the status pipe; later lines win. Untrusted: junk is skipped."""
    info: dict = {}
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            fields = json.loads(line)
        except (ValueError, RecursionError):  # e.g. the code wrote "[" * 5000 to its pipe
            continue
        if isinstance(fields, dict):
            info.update(fields)
    return info
