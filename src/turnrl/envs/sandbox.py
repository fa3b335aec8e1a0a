"""Run untrusted Python code from an agent in a contained child process.

Used by tool-integrated-reasoning envs (the agent calls ``python(code)``): each call runs the
code in a fresh interpreter and returns a :class:`SandboxResult` whose ``observation()`` is the
text the agent sees::

    >>> result = run_python("print(6 * 7)")
    >>> result.stdout, result.exit_code, result.error
    ('42\\n', 0, None)
    >>> run_python("import time; time.sleep(60)", wall_time_s=1.0).observation()
    'TimeoutError: code ran longer than 1 s (wall-clock limit)'

How a call runs::

    host ─Popen, new session─▶ [unshare: namespace mode] ─▶ python -I (supervisor: this file)
                                                               └─fork─▶ worker: drop privileges,
                                                                        setrlimit, exec(code)

- The host starts a fresh ``python -I`` interpreter (never a fork of the host) in a new session
  and process group, in a fresh temporary directory (deleted afterwards), with a scrubbed
  environment: only ``PATH``, ``LANG``/``LC_ALL``, ``HOME``/``TMPDIR`` (= the working
  directory) and ``OMP/OPENBLAS/MKL_NUM_THREADS=1``. The code and the limits travel on stdin,
  which is then replaced by ``/dev/null``. The interpreter loads this file (standard library
  only) as the *supervisor*, which forks the *worker*: it drops privileges, sets the limits
  below, patches ``socket`` and runs the code as ``__main__`` (file name ``<code>``; traceback
  frames of this file are hidden). The code's parent is the supervisor, never the host.
- The supervisor reaps the worker and reports, on a pipe only it writes, the exit status, the
  uncaught exception and the CPU time. At ``wall_time_s`` after it started (interpreter start-up
  is not charged) it kills the worker and all its descendants. The host reads stdout/stderr with
  a byte cap (its memory stays bounded whatever the code prints), kills the whole process group
  with ``SIGKILL`` when the call ends, waits until no process of it is running, and is itself
  the backstop: it kills the group ``_HOST_GRACE_S`` (2 s) after the wall limit.

Limits (:class:`SandboxConfig`, defaults in brackets), set with ``setrlimit`` in the worker and
inherited by everything it starts:

====================  ==================  =================================================
knob [default]        mechanism           what the code sees at the limit
====================  ==================  =================================================
``wall_time_s`` [5]   supervisor timer    ``TimeoutError: code ran longer than 5 s ...``
``cpu_time_s`` [5]    ``RLIMIT_CPU``      ``killed: CPU time limit (5 s) exceeded`` (SIGXCPU;
                                          SIGKILL a second later if SIGXCPU is ignored)
``memory_mb`` [256]   ``RLIMIT_AS``       ``MemoryError`` (per process; address space, not
                                          RSS: each thread reserves an 8 MiB stack; torch
                                          needs several GiB of address space to import)
``file_size_mb`` [1]  ``RLIMIT_FSIZE``    ``OSError: [Errno 27] File too large``
``max_open_files``    ``RLIMIT_NOFILE``   ``OSError: [Errno 24] Too many open files``
[32]
``max_processes``     ``RLIMIT_NPROC``    ``BlockingIOError`` / ``can't start new thread``
[32]                                      (processes *and threads*, the main one included)
``max_output_bytes``  host read cap       per stream: the first and last halves are kept,
[16384]                                   ``... [N bytes truncated] ...`` in between
``tmpfs_mb`` [64]     tmpfs ``size=``     ``OSError: [Errno 28] No space left on device``
                                          (namespace mode: the private ``/tmp``/workdir)
====================  ==================  =================================================

``memory_mb`` and ``cpu_time_s`` are per process, so up to ``max_processes`` processes may use
``max_processes * memory_mb`` together; only cgroups (root) could cap the sum.

Isolation (``SandboxConfig.isolation``; ``"auto"`` picks ``"namespace"`` when a probe call
works on this host, else ``"process"``; ``SandboxResult.isolation`` says which ran):

- ``"namespace"``: the supervisor runs under ``unshare(1)`` in new PID, mount, network and IPC
  namespaces, plus a user namespace when the host is not root (needs unprivileged user
  namespaces; Docker's default seccomp profile forbids them). Enforced by the kernel: no
  network (only a down loopback, whatever the code calls); the code sees and can signal only
  its own processes (its parent is PID 1 of the namespace, which ignores signals from inside,
  and ``/proc`` shows only the namespace); every process in the namespace, daemonised or not,
  dies with the supervisor; ``/tmp`` (with the working directory) and ``/dev/shm`` are private
  tmpfs mounts of ``tmpfs_mb`` that vanish with the namespace; every other mount is remounted
  read-only (best effort, mount by mount), so writing to the repository fails with ``EROFS``
  and writing to the host's ``/tmp`` lands in the private one.
- ``"process"``: the fallback. Enforced: the limits, the scrubbed environment, the fresh working
  directory, the process-group kill, and descendants: the supervisor is a child *subreaper*, so
  orphans (double-forked, ``setsid`` daemons) are re-parented to it, and it freezes
  (``SIGSTOP``) then kills every descendant when the code ends or times out. Not enforced: the
  network block is a Python-level patch only (``socket.socket`` refuses every family but
  ``AF_UNIX``; ``create_connection``, ``getaddrinfo`` and other lookups raise
  ``PermissionError``), bypassed by ``_socket`` or ``ctypes``; files outside the working
  directory (the host's ``/tmp`` and RAM-backed ``/dev/shm``, the repository) are writable
  wherever the code's uid may write, with only ``file_size_mb`` per file, and they stay after
  the call. A non-root host shares its uid with the code, which can therefore ``kill(2)`` or
  ptrace the host and its processes by pid, ``kill(-1)`` all of them, read ``/proc/<host
  pid>/environ``, or kill the supervisor (reported as ``killed: the sandbox supervisor was
  killed``; its daemons may then survive): none of this can be refused without namespaces or
  root.

Privileges. In every mode the worker ends with no capabilities and ``no_new_privs`` set. As
root it also switches to a fresh uid per call (``1900000000 + n``; how is probed once per
interpreter), so ``RLIMIT_NPROC``, which the kernel never enforces for root, counts only this
call's processes and threads, and the code can signal no process of root's. If that uid cannot
read the interpreter (e.g. under ``/root``), the worker keeps *file-system* uid 0: files are
read and written as their root owner could, without capabilities (in process mode the
repository is writable), and programs it executes lose it. If uids cannot be changed at all (a
container that maps only uid 0) the worker stays uid 0: ``RLIMIT_NPROC`` is not enforced and,
in process mode, the code can signal the host. As a normal user in namespace mode
``RLIMIT_NPROC`` counts per user namespace, i.e. per call; in process mode it is the user's
current number of tasks plus ``max_processes`` (racy: shared with the user's other processes).

``observation()`` is stdout, then stderr (the traceback), then the ``error`` line unless stderr
already ends with it, or ``(no output)``. Output is decoded as UTF-8 with U+FFFD for invalid
bytes and NULs; the code's own ``print`` uses ``errors="backslashreplace"``. Failures of the
sandbox itself (no interpreter, a broken ``unshare``, a platform other than Linux) raise
:class:`SandboxError`; nothing the code does raises on the host.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import json
import math
import os
import resource
import signal
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import selectors
    import subprocess

# The sandbox child loads this file too (see _CHILD_COMMAND), so modules only the host needs
# (subprocess, selectors, shutil, tempfile) are imported inside the functions that use them.

ISOLATION_MODES = ("auto", "namespace", "process")
NO_OUTPUT = "(no output)"
CHILD_PATH = "/usr/local/bin:/usr/bin:/bin"
# Per-call uids for root hosts: far above any uid a distribution or container runtime allocates.
SANDBOX_UID_BASE = 1_900_000_000
SANDBOX_UID_SPAN = 100_000_000
_STATUS_CAP = 65_536  # bytes of status-pipe JSON the host keeps
_EXIT_GRACE_S = 0.5  # how long the host drains pipes still held open after the supervisor exited
# The supervisor kills the code (and its descendants) at wall_time_s after it starts; the host
# kills the whole process group this much later, as a backstop (a dead or stuck supervisor).
_HOST_GRACE_S = 2.0
_PROBE_ARG = "--turnrl-sandbox-probe"
# The child imports this file under another name (cached bytecode, no turnrl package import)
# and calls _child_main(); argv: [-c, this file, WORKDIR | _PROBE_ARG].
_CHILD_COMMAND = (
    "import importlib.util as u, sys\n"
    "spec = u.spec_from_file_location('_turnrl_sandbox_child', sys.argv[1])\n"
    "module = sys.modules[spec.name] = u.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "sys.argv[2:] == [module._PROBE_ARG] or module._child_main()\n"
)

# Linux constants (include/uapi/linux/{prctl,mount,capability,securebits}.h).
_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_SECBIT_NOROOT = 0x1 | 0x2  # NOROOT | NOROOT_LOCKED: uid 0 gains no capabilities on execve
_SECBIT_NO_SETUID_FIXUP = 0x4 | 0x8  # keep capabilities across setresuid (locked)
_CAP_VERSION_3 = 0x20080522
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND = 32, 1024, 2048, 4096
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


class SandboxError(RuntimeError):
    """The sandbox itself could not run code: a problem of the host setup, never of the code."""


@dataclass(frozen=True)
class SandboxConfig:
    """Limits of one sandboxed call; see the module docstring for what each one enforces.

    Sizes are MiB (2**20 bytes). ``cpu_time_s`` is rounded up to whole seconds
    (``RLIMIT_CPU`` granularity). ``python`` is the interpreter to run (default: the host's
    ``sys.executable``, so the code sees the same installed packages).
    """

    wall_time_s: float = 5.0  # wall clock from the supervisor's start; then everything is killed
    cpu_time_s: float = 5.0  # RLIMIT_CPU per process (SIGXCPU, SIGKILL one second later)
    memory_mb: int = 256  # RLIMIT_AS per process (address space; MemoryError)
    file_size_mb: float = 1.0  # RLIMIT_FSIZE: largest file the code can write
    max_open_files: int = 32  # RLIMIT_NOFILE per process
    max_processes: int = 32  # RLIMIT_NPROC: processes + threads of the call, main one included
    max_output_bytes: int = 16_384  # per stream; beyond it the middle is cut with a marker
    tmpfs_mb: int = 64  # namespace mode: size of the private /tmp (holds the workdir), /dev/shm
    isolation: str = "auto"  # "auto" | "namespace" | "process"
    python: str | None = None  # interpreter; None: the host's sys.executable

    def __post_init__(self) -> None:
        for name, minimum in (("wall_time_s", 0.01), ("cpu_time_s", 0.01), ("file_size_mb", 0.0)):
            _check_number(name, getattr(self, name), minimum, is_int=False)
        for name, minimum in (
            ("memory_mb", 32),
            ("max_open_files", 8),
            ("max_processes", 1),
            ("max_output_bytes", 64),
            ("tmpfs_mb", 1),
        ):
            _check_number(name, getattr(self, name), minimum, is_int=True)
        if self.isolation not in ISOLATION_MODES:
            raise ValueError(
                f"SandboxConfig.isolation must be one of {ISOLATION_MODES}, "
                f"got {self.isolation!r}; use 'auto' unless a test needs a specific mode"
            )
        if self.python is not None and not (isinstance(self.python, str) and self.python):
            raise ValueError(
                f"SandboxConfig.python must be a path to a Python interpreter or None "
                f"(the host's sys.executable), got {self.python!r}"
            )


def _check_number(name: str, value: Any, minimum: float, *, is_int: bool) -> None:
    kinds = (int,) if is_int else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value >= minimum:
        kind = "an int" if is_int else "a number"
        default = getattr(SandboxConfig, name)
        raise ValueError(
            f"SandboxConfig.{name} must be {kind} >= {minimum:g}, got {value!r}; "
            f"e.g. {name}={default!r} (the default)"
        )
    if not is_int and not math.isfinite(value):
        raise ValueError(f"SandboxConfig.{name} must be finite, got {value!r}")


@dataclass(frozen=True)
class SandboxResult:
    """What one call produced.

    ``exit_code``: the code's exit status (``SystemExit`` codes modulo 256, 1 after an uncaught
    exception), ``-N`` when killed by signal N, ``None`` when it never finished (wall-clock
    timeout, or the supervisor was killed). ``error``: one line for the agent, ``None`` on
    success. ``truncated``: stdout or stderr exceeded ``max_output_bytes``. ``isolation``:
    the mode that ran the code, ``"namespace"`` or ``"process"``.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    error: str | None
    duration_s: float
    truncated: bool
    isolation: str = "process"

    @property
    def ok(self) -> bool:
        return self.error is None

    def observation(self) -> str:
        """The text an agent sees: stdout, stderr, then ``error`` unless stderr ends with it."""
        parts = [text.rstrip("\n") for text in (self.stdout, self.stderr) if text.strip()]
        if self.error is not None and not self.stderr.rstrip().endswith(self.error):
            parts.append(self.error)
        return "\n".join(parts) if parts else NO_OUTPUT


class Sandbox:
    """Runs code under one :class:`SandboxConfig`; thread-safe, one child process per call.

    ``Sandbox(wall_time_s=2.0)`` is shorthand for ``Sandbox(SandboxConfig(wall_time_s=2.0))``.
    """

    def __init__(self, config: SandboxConfig | None = None, **limits: Any) -> None:
        config = config if config is not None else SandboxConfig()
        if limits:
            try:
                config = replace(config, **limits)
            except TypeError as exc:
                fields = sorted(SandboxConfig.__dataclass_fields__)
                raise TypeError(
                    f"Sandbox: unknown limit in {sorted(limits)}; known: {fields}"
                ) from exc
        if not sys.platform.startswith("linux"):
            raise SandboxError(
                f"Sandbox: needs Linux (prctl, /proc, setrlimit), this is {sys.platform!r}; "
                "run code-executing envs on a Linux host or container"
            )
        self.config = config
        self.python = config.python or sys.executable
        if not self.python:
            raise SandboxError("Sandbox: sys.executable is empty; set SandboxConfig.python")
        self._isolation: str | None = None

    @property
    def isolation(self) -> str:
        """The resolved mode, ``"namespace"`` or ``"process"`` (probed once on first use)."""
        if self._isolation is None:
            wanted = self.config.isolation
            available = wanted != "process" and namespace_isolation_available(self.python)
            if wanted == "namespace" and not available:
                raise SandboxError(
                    "Sandbox: isolation='namespace' needs unshare(1) with PID/mount/network "
                    "namespaces (and unprivileged user namespaces when not root), which do not "
                    "work here; use isolation='auto' or 'process'"
                )
            self._isolation = "namespace" if available else "process"
        return self._isolation

    def run(self, code: str) -> SandboxResult:
        """Run ``code`` as a script and return what happened; never raises for the code's sake."""
        if not isinstance(code, str):
            raise TypeError(f"Sandbox.run: code must be a str, got {type(code).__name__}")
        return _run(code, self.config, self.python, self.isolation)


def run_python(code: str, config: SandboxConfig | None = None, **limits: Any) -> SandboxResult:
    """One-shot ``Sandbox(config, **limits).run(code)``."""
    return Sandbox(config, **limits).run(code)


# -- host side -------------------------------------------------------------------------------

_namespace_lock = threading.Lock()
_uid_lock = threading.Lock()
_namespace_ok: dict[str, bool] = {}
_uid_modes: dict[str, str] = {}
_uid_counter = itertools.count()


def namespace_isolation_available(python: str | None = None) -> bool:
    """Whether ``isolation="namespace"`` works on this host (runs one probe call, cached)."""
    python = python or sys.executable
    with _namespace_lock:
        if python not in _namespace_ok:
            _namespace_ok[python] = _probe_namespace(python)
        return _namespace_ok[python]


def _probe_namespace(python: str) -> bool:
    import shutil

    if not sys.platform.startswith("linux") or shutil.which("unshare", path=CHILD_PATH) is None:
        return False
    config = SandboxConfig(wall_time_s=10.0, cpu_time_s=10.0, isolation="namespace")
    try:
        result = _run("import socket\nprint('ok')", config, python, "namespace")
    except (SandboxError, OSError):
        return False
    return result.error is None and result.stdout == "ok\n"


def _uid_mode(python: str) -> str:
    """Root only: how the worker can change uid (probed once per interpreter, cached).

    ``"full"``: a fresh uid can start ``python`` and load this file, so the worker becomes that
    uid entirely. ``"fs_root"``: the uid can be set but cannot read the interpreter (e.g. under
    ``/root``), so the worker keeps file-system uid 0. ``"none"``: uids cannot be changed here
    (e.g. a container's user namespace maps only uid 0); the worker stays uid 0 without
    capabilities and ``RLIMIT_NPROC`` is not enforced.
    """
    import subprocess

    with _uid_lock:
        if python not in _uid_modes:
            uid = _next_sandbox_uid()
            try:
                done = subprocess.run(
                    [python, "-I", "-c", _CHILD_COMMAND, os.path.abspath(__file__), _PROBE_ARG],
                    user=uid,
                    group=uid,
                    extra_groups=[],
                    cwd="/",
                    env={"PATH": CHILD_PATH},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=30,
                    check=False,
                )
                _uid_modes[python] = "full" if done.returncode == 0 else "fs_root"
            except PermissionError as exc:  # EACCES: the exec failed, so the uid change worked
                _uid_modes[python] = "fs_root" if exc.errno == errno.EACCES else "none"
            except (OSError, subprocess.SubprocessError):
                _uid_modes[python] = "none"
        return _uid_modes[python]


def _next_sandbox_uid() -> int:
    return SANDBOX_UID_BASE + (os.getpid() * 4096 + next(_uid_counter)) % SANDBOX_UID_SPAN


class _Capture:
    """Keeps the first ``cap // 2`` and the last ``cap - cap // 2`` bytes of a stream."""

    def __init__(self, cap: int) -> None:
        self.head_cap, self.tail_cap = cap // 2, cap - cap // 2
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        if not self.dropped:
            return _decode(bytes(self.head + self.tail))
        marker = f"\n... [{self.dropped} bytes truncated] ...\n"
        return _decode(bytes(self.head)) + marker + _decode(bytes(self.tail))


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def _child_env(workdir: str) -> dict[str, str]:
    env = {"PATH": CHILD_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    env.update(HOME=workdir, TMPDIR=workdir)
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _payload(code: str, config: SandboxConfig, python: str, mode: str, workdir: str) -> dict:
    uid_mode = _uid_mode(python) if os.geteuid() == 0 else "none"
    uid = _next_sandbox_uid() if uid_mode != "none" else None
    if uid is not None:
        nproc, nproc_relative = config.max_processes, False  # a fresh uid: only this call counts
    elif mode == "namespace":
        nproc, nproc_relative = config.max_processes + 2, False  # + unshare and the supervisor
    else:
        nproc, nproc_relative = config.max_processes, True  # on top of the user's current tasks
    return {
        "code": code,
        "mode": mode,
        "workdir": workdir,
        "uid": uid,
        "keep_fs_root": uid_mode == "fs_root",
        "wall_time_s": config.wall_time_s,
        "tmpfs_bytes": config.tmpfs_mb << 20,
        "limits": {
            "cpu": math.ceil(config.cpu_time_s),
            "memory": config.memory_mb << 20,
            "file_size": int(config.file_size_mb * (1 << 20)),
            "open_files": config.max_open_files,
            "processes": nproc,
        },
        "nproc_relative": nproc_relative,
    }


def _argv(python: str, mode: str, workdir: str) -> list[str]:
    import shutil

    script = [python, "-I", "-c", _CHILD_COMMAND, os.path.abspath(__file__), workdir]
    if mode == "process":
        return script
    unshare = shutil.which("unshare", path=CHILD_PATH) or "unshare"
    flags = ["--fork", "--kill-child", "--pid", "--mount-proc", "--net", "--ipc"]
    if os.geteuid() != 0:
        flags = ["--user", "--map-root-user", *flags]
    return [unshare, *flags, "--", *script]


def _run(code: str, config: SandboxConfig, python: str, mode: str) -> SandboxResult:
    import tempfile

    workdir = tempfile.mkdtemp(prefix="turnrl-sandbox-")
    try:
        payload = _payload(code, config, python, mode, workdir)
        return _run_in(payload, config, python, mode)
    finally:
        _remove_tree(workdir)


def _run_in(payload: dict, config: SandboxConfig, python: str, mode: str) -> SandboxResult:
    import subprocess

    status_read, status_write = os.pipe()
    payload["status_fd"] = status_write
    argv = _argv(python, mode, payload["workdir"])
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=payload["workdir"],
            env=_child_env(payload["workdir"]),
            start_new_session=True,
            pass_fds=(status_write,),
        )
    except OSError as exc:
        os.close(status_read)
        raise SandboxError(
            f"Sandbox: could not start {argv[0]!r}: {exc}; check SandboxConfig.python"
        ) from exc
    finally:
        os.close(status_write)
    out, err = _Capture(config.max_output_bytes), _Capture(config.max_output_bytes)
    status = _Capture(2 * _STATUS_CAP)
    try:
        stdin_data = json.dumps(payload).encode()
        deadline = start + config.wall_time_s + _HOST_GRACE_S
        host_killed = _pump(proc, stdin_data, {status_read: status}, out, err, deadline)
    finally:
        _kill_group(proc)
        proc.wait()
        _drain_and_close(proc, {status_read: status}, out, err)
        _wait_group_gone(proc.pid)
    duration = time.monotonic() - start
    info = _parse_status(bytes(status.head))
    timed_out = host_killed or bool(info.get("watchdog"))
    if "setup_error" in info or (not timed_out and "started" not in info):
        detail = info.get("setup_error") or err.text().strip()[-2000:] or "no output"
        raise SandboxError(
            f"Sandbox: the {mode} sandbox failed to start (exit status {proc.returncode}): {detail}"
        )
    exit_code = None if timed_out else info.get("exit")
    return SandboxResult(
        stdout=out.text(),
        stderr=err.text(),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        timed_out=timed_out,
        error=_describe(info, timed_out, config, proc.returncode),
        duration_s=duration,
        truncated=bool(out.dropped or err.dropped),
        isolation=mode,
    )


def _has_exited(pid: int) -> bool:
    """True once ``pid`` has exited, *without* reaping it, so its pid (our process-group id)
    cannot be reused before :func:`_kill_group` runs."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _pump(
    proc: subprocess.Popen,
    stdin_data: bytes,
    extra: dict[int, _Capture],
    out: _Capture,
    err: _Capture,
    deadline: float,
) -> bool:
    """Feed stdin and read every pipe with caps until the child exits; True on timeout."""
    import selectors

    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    sinks = {proc.stdout.fileno(): out, proc.stderr.fileno(): err, **extra}
    pending = memoryview(stdin_data)
    with selectors.DefaultSelector() as selector:
        for fd in sinks:
            selector.register(fd, selectors.EVENT_READ)
        os.set_blocking(proc.stdin.fileno(), False)
        selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
        exited_at: float | None = None
        while True:
            now = time.monotonic()
            readers = [key.fd for key in selector.get_map().values() if key.fd in sinks]
            if exited_at is None and _has_exited(proc.pid):
                exited_at = now
            if exited_at is not None and (not readers or now - exited_at > _EXIT_GRACE_S):
                return False  # done, or pipes still held open by a process that escaped
            if now >= deadline:
                return exited_at is None
            wait = min(deadline - now, 0.05 if readers else 0.005)
            for key, _ in selector.select(wait):
                if key.fd in sinks:
                    data = _read(key.fd)
                    if data:
                        sinks[key.fd].feed(data)
                    else:
                        selector.unregister(key.fd)
                else:
                    pending = _write_stdin(proc, selector, pending)


def _read(fd: int) -> bytes:
    """One chunk from a pipe that select() reported readable; b"" means EOF (or a dead pipe)."""
    try:
        return os.read(fd, 65_536)
    except OSError:
        return b""


def _write_stdin(proc: subprocess.Popen, selector: selectors.BaseSelector, pending: memoryview):
    assert proc.stdin is not None
    try:
        written = os.write(proc.stdin.fileno(), pending[:65_536])
    except BlockingIOError:
        return pending
    except OSError:  # the child died before reading everything
        written = len(pending)
    pending = pending[written:]
    if not pending:
        selector.unregister(proc.stdin.fileno())
        proc.stdin.close()
    return pending


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the call's process group (its id is the unreaped child's pid, so it is ours)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _wait_group_gone(pgid: int, timeout_s: float = 2.0) -> None:
    """Wait (briefly) until no process of the killed group is still running, so none outlives
    the call. Zombies do not count: an orphaned one is reaped by init in its own time."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        if not _running_in_group(pgid):
            return
        time.sleep(0.002)


def _running_in_group(pgid: int) -> bool:
    for pid in _proc_pids():
        fields = _stat_fields(pid)
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _drain_and_close(
    proc: subprocess.Popen, extra: dict[int, _Capture], out: _Capture, err: _Capture
) -> None:
    """After the kill: read what is left in the pipes (briefly), then close everything."""
    import selectors

    assert proc.stdout is not None and proc.stderr is not None
    sinks = {proc.stdout.fileno(): out, proc.stderr.fileno(): err, **extra}
    end = time.monotonic() + 0.2
    with selectors.DefaultSelector() as selector:
        for fd in sinks:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map() and time.monotonic() < end:
            for key, _ in selector.select(max(0.0, end - time.monotonic())):
                data = _read(key.fd)
                if data:
                    sinks[key.fd].feed(data)
                else:
                    selector.unregister(key.fd)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    for fd in extra:
        os.close(fd)


def _parse_status(data: bytes) -> dict:
    """Merge the JSON lines of the status pipe; later lines win. Untrusted: junk is skipped."""
    info: dict = {}
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            fields = json.loads(line)
        except ValueError:
            continue
        if isinstance(fields, dict):
            info.update(fields)
    return info


def _describe(info: dict, timed_out: bool, config: SandboxConfig, returncode: int) -> str | None:
    """The one-line ``error`` for the agent (None on success)."""
    if timed_out:
        return f"TimeoutError: code ran longer than {config.wall_time_s:g} s (wall-clock limit)"
    code = info.get("exit")
    if not isinstance(code, int):
        return f"killed: the sandbox supervisor was killed (exit status {returncode})"
    if code < 0:
        return _describe_signal(-code, info, config)
    exception = info.get("exception")
    if isinstance(exception, str) and code != 0:
        return exception
    return None if code == 0 else f"exited with code {code}"


def _describe_signal(signum: int, info: dict, config: SandboxConfig) -> str:
    cpu_s = info.get("cpu_s")
    cpu_limit = math.ceil(config.cpu_time_s)
    over_cpu = isinstance(cpu_s, (int, float)) and cpu_s >= cpu_limit - 0.05
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and over_cpu):
        return f"killed: CPU time limit ({cpu_limit} s) exceeded"
    if signum == signal.SIGXFSZ:
        return f"killed: file size limit ({config.file_size_mb:g} MiB) exceeded"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    description = signal.strsignal(signum) or name
    return f"killed by signal {name} ({description})"


def _remove_tree(path: str) -> None:
    """Delete the working directory, even if the code made parts of it unreadable (by then every
    process of the call is dead, so nothing races the ``chmod``; symlinks are never followed).
    Never raises: a leftover directory must not turn into an error of the host."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):  # not root, and the code removed permissions: restore, retry
        directories = [path]
        while directories:
            directory = directories.pop()
            with contextlib.suppress(OSError):
                os.chmod(directory, 0o700)
                with os.scandir(directory) as entries:
                    directories += [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        shutil.rmtree(path, ignore_errors=True)


# -- child side: the supervisor and the worker ------------------------------------------------
# Everything below runs in the sandbox interpreter (`python -I -c _CHILD_COMMAND`), which loads
# this file as a standalone module: only the standard library, no turnrl import.


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
        if payload["mode"] == "namespace":
            _child_setup_namespace(payload)
        else:
            _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        os.chdir(payload["workdir"])
        if payload["uid"] is not None and not payload["keep_fs_root"]:
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
    """PID 1 of the new namespaces: private tmpfs for /tmp and the workdir, the rest read-only."""
    workdir, size = payload["workdir"], payload["tmpfs_bytes"]
    options = f"size={size},mode=1777"
    writable = {"/tmp", "/proc"}
    _mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, options)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, options)
        writable.add("/dev/shm")
    if os.path.isdir(workdir):  # the host's workdir is not under /tmp: hide it under a tmpfs
        _mount("tmpfs", workdir, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
        writable.add(workdir)
    os.makedirs(workdir, mode=0o700, exist_ok=True)
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
        _report(report_fd, exception=summary[:1000])
        raise SystemExit(1) from None
    raise SystemExit(0)


def _child_drop_privileges(payload: dict) -> None:
    """Root: switch to the call's uid. Then drop every capability (root, or root of the user
    namespace) and set no_new_privs, so nothing the code executes can regain privileges."""
    uid, keep_fs_root = payload["uid"], payload["keep_fs_root"]
    libc = _libc()
    privileged = uid is not None or _holds_capabilities()
    if privileged:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last_cap = int(handle.read())
        for cap in range(last_cap + 1):
            _prctl(_PR_CAPBSET_DROP, cap)
        _prctl(
            _PR_SET_SECUREBITS, _SECBIT_NOROOT | (_SECBIT_NO_SETUID_FIXUP if keep_fs_root else 0)
        )
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        if keep_fs_root:  # read the interpreter's files as root would (see the module docstring)
            libc.setfsuid(0)
            libc.setfsgid(0)
            if libc.setfsuid(-1) != 0:  # an invalid id changes nothing and returns the current
                raise OSError("setfsuid(0) failed")
    if privileged:
        _capset_zero(libc)
        if _holds_capabilities():
            raise OSError("capabilities are still held after dropping them")
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


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
    """Python-level block: ``socket.socket`` refuses every family but AF_UNIX (``socketpair``,
    asyncio's self-pipe and ``accept``/``fromfd`` on existing descriptors still work) and name
    lookups raise PermissionError. ``_socket``/ctypes bypass it; namespace mode does not care."""
    import _socket
    import socket

    message = "network access is disabled in the sandbox"

    class NoNetworkSocket(socket.socket):
        def __init__(self, family: int = -1, type: int = -1, proto: int = -1, fileno: Any = None):
            if fileno is None and family != socket.AF_UNIX:
                raise PermissionError(13, message)
            super().__init__(family, type, proto, fileno)

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise PermissionError(13, message)

    socket.socket = NoNetworkSocket  # module-level lookups (socketpair, accept) get it too
    for name in (
        "create_connection",
        "create_server",
        "getaddrinfo",
        "gethostbyname",
        "gethostbyname_ex",
        "gethostbyaddr",
        "getnameinfo",
    ):
        setattr(socket, name, refuse)
        if hasattr(_socket, name):
            setattr(_socket, name, refuse)


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
