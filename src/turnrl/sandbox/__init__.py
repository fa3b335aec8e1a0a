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

    host ─Popen, new session─▶ [unshare: namespace mode] ─▶ python -I (supervisor: child/)
                                                               └─fork─▶ worker: drop privileges,
                                                                        setrlimit, exec(code)

- The host starts a fresh ``python -I`` interpreter (never a fork of the host) in a new session
  and process group, in a fresh temporary directory (deleted afterwards), with a scrubbed
  environment: only ``PATH``, ``LANG``/``LC_ALL``, ``HOME``/``TMPDIR`` (= the working
  directory) and ``OMP/OPENBLAS/MKL_NUM_THREADS=1``. The code and the limits travel on stdin,
  which is then replaced by ``/dev/null``. The interpreter loads the ``child`` package (standard
  library only) as the *supervisor*, which forks the *worker*: it drops privileges, sets the limits
  below, patches ``socket`` and runs the code as ``__main__`` (file name ``<code>``; traceback
  frames of the ``child`` package are hidden). The code's parent is the supervisor, never the host.
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
``memory_mb`` [256]   memory cgroup and   the whole call (cgroup): ``killed: memory limit``;
                      ``RLIMIT_AS``       one process (address space, not RSS: each thread
                                          reserves an 8 MiB stack; torch needs several GiB
                                          of address space to import): ``MemoryError``
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

``memory_mb`` caps the *whole call* where the host can make cgroups (root on most machines;
:mod:`~turnrl.sandbox.cgroup`): every process of the call is counted together, and going over
is reported as ``killed: memory limit (256 MiB for the whole call, every process counted)
exceeded`` whichever process the kernel killed. ``RLIMIT_AS`` still applies per process (one
big allocation gets ``MemoryError``). Without cgroups (``turnrl.sandbox.cgroup.available()``
is False) only the per-process limit holds, so the call may use up to
``max_processes * memory_mb``. ``cpu_time_s`` is per process.

Every worker installs a seccomp filter (:mod:`~turnrl.sandbox.seccomp`) before the code runs,
in both modes: no ``socket(2)`` of any family (so no network and no host ``AF_UNIX`` socket,
by path or abstract name; ``socketpair`` of ``AF_UNIX`` streams still works, and with it
asyncio and multiprocessing pipes), no new namespaces (``unshare``, ``setns``, ``clone`` with
``CLONE_NEW*``), no ``io_uring``, ``ptrace``, cross-process memory, keyrings, ``bpf``,
``perf_event_open``, ``userfaultfd``, mounts, System V IPC, POSIX message queues or
``TIOCSTI``; system calls of another ABI (i386, x32) kill the process (``SIGSYS``). On a CPU
without a syscall table (not x86_64 or aarch64) the sandbox refuses to run. In front of the
filter, the worker's ``socket`` and ``_socket`` modules refuse every socket the kernel would
(any family, ``connect``/``bind``, a datagram ``socketpair``, name lookups) with a clear line:
``PermissionError: [Errno 13] sockets are disabled in the sandbox (AF_UNIX): ...``; only a
bypass past Python (ctypes) meets the filter's bare ``EACCES``.

Isolation (``SandboxConfig.isolation``; ``"auto"`` picks ``"namespace"`` when a probe call
works on this host, else ``"process"``; ``SandboxResult.isolation`` says which ran):

- ``"namespace"``: the supervisor runs under ``unshare(1)`` in new PID, mount, network and IPC
  namespaces, plus a user namespace when the host is not root (needs unprivileged user
  namespaces; Docker's default seccomp profile forbids them). Enforced by the kernel: no
  network (only a down loopback, whatever the code calls); the code sees and can signal only
  its own processes (its parent is PID 1 of the namespace, which ignores signals from inside,
  and ``/proc`` shows only the namespace); every process in the namespace, daemonised or not,
  dies with the supervisor; ``/tmp`` (with the working directory) and ``/dev/shm`` are private
  tmpfs mounts of ``tmpfs_mb`` that vanish with the namespace; the host's ``/dev/pts``
  (terminals), ``/dev/mqueue`` and ``/run`` (daemon sockets) are covered by empty read-only
  mounts; every directory on the way to the interpreter that the call's uid could not enter
  (``/root`` when the interpreter is under it) is covered too, with only the interpreter's own
  directories bind-mounted back, so root's home is simply not there; every other mount is
  remounted read-only (best effort, mount by mount), so writing to the repository fails with
  ``EROFS`` and writing to the host's ``/tmp`` lands in the private one.
- ``"process"``: the fallback. Enforced: the limits, the seccomp filter (so the network and
  host sockets are denied by the kernel here too), the scrubbed environment, the fresh working
  directory, the process-group kill, and descendants: the supervisor is a child *subreaper*,
  so orphans (double-forked, ``setsid`` daemons) are re-parented to it, and it freezes
  (``SIGSTOP``) then kills every descendant when the code ends or times out; as root, what the
  call's uid left in ``/tmp``, ``/var/tmp`` and ``/dev/shm`` is deleted afterwards. Not
  enforced: files elsewhere are readable and writable wherever the code's uid may (with only
  ``file_size_mb`` per file), and world-readable files of the host (a run's ``config.yaml``
  if its mode allows) can be read; ``/proc`` shows the host's processes. A non-root host
  shares its uid with the code, which can therefore ``kill(2)`` the host and its processes by
  pid, ``kill(-1)`` all of them, read ``/proc/<host pid>/environ`` and the user's own files,
  or kill the supervisor (reported as ``killed: the sandbox supervisor was killed``; its
  daemons may then survive): none of this can be refused without namespaces or root.

Privileges. In every mode the worker ends with no capabilities, ``no_new_privs`` and the
seccomp filter. As root it also switches to a fresh uid per call (``1900000000 + n``), real,
effective *and file-system* uid, so it never has root's file access: ``RLIMIT_NPROC``, which
the kernel never enforces for root, counts only this call's processes and threads, and the
code can signal no process of root's. How is probed once per interpreter
(:func:`turnrl.sandbox.isolation._uid_mode`): if that uid cannot read the interpreter (e.g.
under ``/root``), namespace mode exposes it through the mount view above, and process mode
*refuses* with a :class:`SandboxError` that says to use namespace mode or an interpreter every
user can read (``/usr/bin/python3``; ``uv python install --install-dir /opt/python``). If
uids cannot be changed at all (a container that maps only uid 0), both modes refuse: the
code would run with root's file access. As a normal user in namespace mode ``RLIMIT_NPROC``
counts per user namespace, i.e. per call; in process mode it is the user's current number of
tasks plus ``max_processes`` (racy: shared with the user's other processes).

Deep recursion: past the default recursion limit it is ``RecursionError``; after
``sys.setrecursionlimit`` raised it, running out of memory is reported as ``MemoryError:
recursion ran out of memory`` (CPython 3.11 itself says ``SystemError: error return without
exception set``) and a C stack overflow as ``killed by signal SIGSEGV ...: usually the C stack
overflowed``.

``observation()`` is stdout, then stderr (the traceback), then the ``error`` line unless stderr
already ends with it, or ``(no output)``. Output is decoded as UTF-8 with U+FFFD for invalid
bytes and NULs; the code's own ``print`` uses ``errors="backslashreplace"``. Failures of the
sandbox itself (no interpreter, a broken ``unshare``, a platform other than Linux) raise
:class:`SandboxError`; nothing the code does raises on the host.

Modules: :mod:`~turnrl.sandbox.api` (:class:`Sandbox`, :func:`run_python`,
:func:`namespace_isolation_available`), :mod:`~turnrl.sandbox.config` (:class:`SandboxConfig`,
:class:`SandboxResult`, :class:`SandboxError`), :mod:`~turnrl.sandbox.host` (starting and
talking to the child), :mod:`~turnrl.sandbox.isolation` (uid modes, refusals, limits, the child's
argv and environment), :mod:`~turnrl.sandbox.seccomp` (the system-call filter),
:mod:`~turnrl.sandbox.cgroup` (the call's memory cgroup) and :mod:`~turnrl.sandbox.child`
(the stdlib-only supervisor and worker: a package of its own, see its docstring).
"""

from turnrl.sandbox.api import Sandbox, namespace_isolation_available, run_python
from turnrl.sandbox.config import (
    ISOLATION_MODES,
    NO_OUTPUT,
    SandboxConfig,
    SandboxError,
    SandboxResult,
)
from turnrl.sandbox.isolation import CHILD_PATH
from turnrl.sandbox.uids import SANDBOX_UID_BASE, SANDBOX_UID_SPAN

__all__ = [
    "CHILD_PATH",
    "ISOLATION_MODES",
    "NO_OUTPUT",
    "SANDBOX_UID_BASE",
    "SANDBOX_UID_SPAN",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxResult",
    "namespace_isolation_available",
    "run_python",
]
