"""The host side of one call: start the supervisor in a fresh working directory, feed it the
payload, read stdout/stderr/status with byte caps until it exits (killing the process group at
the wall limit plus a grace, as a backstop), make sure no process of the call outlives it, and
turn what happened into a :class:`~turnrl.sandbox.config.SandboxResult`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time

from turnrl.sandbox import cgroup, uids
from turnrl.sandbox.child.procs import _proc_pids, _stat_fields
from turnrl.sandbox.child.status import _STATUS_CAP, _parse_status
from turnrl.sandbox.config import SandboxConfig, SandboxError, SandboxResult
from turnrl.sandbox.isolation import _argv, _child_env, _payload

_shared_lock = threading.Lock()
_EXIT_GRACE_S = 0.5  # how long the host drains pipes still held open after the supervisor exited
# The supervisor kills the code (and its descendants) at wall_time_s after it starts; the host
# kills the whole process group this much later, as a backstop (a dead or stuck supervisor).
_HOST_GRACE_S = 2.0


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


def _run(code: str, config: SandboxConfig, python: str, mode: str,
         files: dict[str, str] | None = None) -> SandboxResult:
    workdir = tempfile.mkdtemp(prefix="turnrl-sandbox-")
    group = cgroup.create(config.memory_mb << 20)
    payload: dict = {}
    try:
        payload = _payload(code, config, python, mode, workdir,
                           group.procs if group is not None else None)
        payload["files"] = files or {}
        return _run_in(payload, config, python, mode, group)
    finally:
        _clean_up(workdir, group, payload.get("uid"), mode)


def _clean_up(workdir: str, group: cgroup.CallCgroup | None, uid: int | None, mode: str) -> None:
    """After a call: no process of its uid left, its files and cgroup gone, its uid free.
    Each step runs whatever the previous one did: nothing here raises on the host."""
    steps = []
    if uid is not None:
        steps.append(lambda: uids.kill_all(uid))  # a daemon the supervisor could not reach
    steps.append(lambda: _remove_tree(workdir))
    if group is not None:
        steps.append(group.remove)
    if uid is not None:
        if mode == "process":
            steps.append(lambda: _remove_leftovers(uid))
        steps.append(lambda: uids.release(uid))
    for step in steps:
        with contextlib.suppress(Exception):
            step()


def _run_in(payload: dict, config: SandboxConfig, python: str, mode: str,
            group: cgroup.CallCgroup | None) -> SandboxResult:
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
    if group is not None and group.oom_killed():
        info["oom"] = True
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


def _describe(info: dict, timed_out: bool, config: SandboxConfig, returncode: int) -> str | None:
    """The one-line ``error`` for the agent (None on success)."""
    if timed_out:
        return f"TimeoutError: code ran longer than {config.wall_time_s:g} s (wall-clock limit)"
    code = info.get("exit")
    if info.get("oom"):  # whichever process the kernel killed, the call went over its limit
        return (f"killed: memory limit ({config.memory_mb} MiB for the whole call, every "
                "process counted) exceeded")
    if not isinstance(code, int):
        return f"killed: the sandbox supervisor was killed (exit status {returncode})"
    if code < 0:
        return _describe_signal(-code, info, config)
    return None if code == 0 else f"exited with code {code}"


def _describe_signal(signum: int, info: dict, config: SandboxConfig) -> str:
    cpu_s = info.get("cpu_s")
    cpu_limit = math.ceil(config.cpu_time_s)
    over_cpu = isinstance(cpu_s, (int, float)) and cpu_s >= cpu_limit - 0.05
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and over_cpu):
        return f"killed: CPU time limit ({cpu_limit} s) exceeded"
    if signum == signal.SIGXFSZ:
        return f"killed: file size limit ({config.file_size_mb:g} MiB) exceeded"
    if signum == signal.SIGSEGV:
        return ("killed: stack overflow (SIGSEGV): recursion deeper than the stack "
                f"({_stack_mib()} MiB) or the memory limit ({config.memory_mb} MiB) allows, "
                "usually after sys.setrecursionlimit()")
    if signum == signal.SIGSYS:
        return "killed by signal SIGSYS: a system call from another ABI (i386 or x32) is denied"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    description = signal.strsignal(signum) or name
    return f"killed by signal {name} ({description})"


_SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue",
                "/var/crash", "/var/mail")  # where any uid may create files, as usually set up
_SCAN_DEPTH = 3  # plus every world-writable directory this many levels below "/"
_shared_found: list[list[str]] = []


def _world_writable_dirs() -> list[str]:
    """The usual shared directories and every world-writable directory within
    ``_SCAN_DEPTH`` levels of ``/`` (``/proc`` and ``/sys`` aside), found once per process;
    symlinks are never followed (``/var/lock`` is usually one to ``/run/lock``)."""
    with _shared_lock:
        if not _shared_found:
            found = {d for d in _SHARED_DIRS if os.path.isdir(d) and not os.path.islink(d)}
            level = ["/"]
            for _ in range(_SCAN_DEPTH):
                deeper = []
                for directory in level:
                    with contextlib.suppress(OSError), os.scandir(directory) as entries:
                        for entry in entries:
                            if entry.path in ("/proc", "/sys") or not entry.is_dir(
                                    follow_symlinks=False):
                                continue
                            deeper.append(entry.path)
                            with contextlib.suppress(OSError):
                                if entry.stat(follow_symlinks=False).st_mode & 0o002:
                                    found.add(entry.path)
                level = deeper
            _shared_found.append(sorted(found))
        return _shared_found[0]


def _remove_leftovers(uid: int) -> None:
    """Process mode as root: delete what the call's uid (used by no one else) left in every
    world-writable directory (:func:`_world_writable_dirs`) and in every world-writable
    directory below them (e.g. ``/tmp/ray/...``), on the same file system, never following
    symlinks (by then every process of the call is dead)."""
    todo = list(_world_writable_dirs())
    while todo:
        directory = todo.pop()
        try:
            device = os.lstat(directory).st_dev
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if info.st_uid == uid:
                    _remove_tree(entry.path)
                elif stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002 \
                        and info.st_dev == device:
                    todo.append(entry.path)  # others may write here: look inside


def _stack_mib() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    return soft >> 20 if soft != resource.RLIM_INFINITY else 0


def _remove_tree(path: str) -> None:
    """Delete a file or directory tree the code may have shaped: never through a symlink (the
    code can swap its working directory for one), at any depth (``rm -rf`` when Python's
    recursive ``rmtree`` cannot), even if it made parts unreadable (by then every process of
    the call is dead, so nothing races the ``chmod``). Never raises: a leftover must not turn
    into an error of the host."""
    if os.path.islink(path) or not os.path.isdir(path):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    with contextlib.suppress(Exception):
        shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):  # deeper than Python's recursion limit, or unreadable parts
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["rm", "-rf", "--one-file-system", "--", path], check=False,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
    if os.path.lexists(path):  # not root, and the code removed permissions: restore, retry
        directories = [path]
        while directories:
            directory = directories.pop()
            if os.path.islink(directory):
                continue
            with contextlib.suppress(OSError):
                os.chmod(directory, 0o700)
                with os.scandir(directory) as entries:
                    directories += [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        with contextlib.suppress(Exception):
            shutil.rmtree(path, ignore_errors=True)
