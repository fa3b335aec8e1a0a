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

Isolation (``SandboxConfig.isolation``; ``"auto"`` is ``"namespace"`` where a probe call works,
else a :class:`SandboxError` naming the fix, never a silent fallback; a failed probe is retried
after a few seconds; ``SandboxResult.isolation`` says which ran):

- ``"namespace"``: the supervisor runs under ``unshare(1)`` in new PID, mount, network, IPC and
  UTS namespaces (plus a user namespace when the host is not root), joins the call's memory
  cgroup, enters a cgroup namespace rooted there, and ``pivot_root``\\ s into a **minimal root**
  (:mod:`.child.mounts`): a read-only tmpfs holding the working directory in a private ``/tmp``
  (``tmpfs_mb``), a private ``/dev/shm``, ``/dev/null``, ``/dev/zero``, ``/dev/urandom``, its
  own ``/proc``, and, read-only, the interpreter's prefixes (``sys.path`` entries outside them,
  an editable checkout, are left out), the system's shared libraries, ``/etc/ld.so.cache`` and
  ``SandboxConfig.readonly_paths``. The host's tree is detached: no host file, socket, FIFO or
  device can be named; no network (only a down loopback); the code sees and can signal only
  its own processes, which all die with the supervisor.
- ``"process"``: only when chosen explicitly. Enforced: the limits, the seccomp filter, the
  scrubbed environment, the fresh working directory, the process-group kill, and descendants
  (the supervisor is a child subreaper that freezes then kills every descendant); as root, what
  the call's uid left in every world-writable directory (``/tmp``, ``/var/tmp``, ``/dev/shm``,
  ``/run/lock``, ... and any within three levels of ``/``) is deleted afterwards. Not
  enforced: files elsewhere are readable and writable wherever the code's uid may, and
  ``/proc`` shows the host's processes. A non-root host shares its uid with the code, which
  can therefore signal the host's processes and read their ``/proc/<pid>/environ``.

Verdicts are the host's: ``exit_code`` is the worker's wait status as the supervisor reaped it,
``timed_out`` the supervisor's or the host's timer, ``killed: memory limit`` the cgroup's OOM
counter; ``error`` is built from these only (``exited with code N``, ``TimeoutError: ...``,
``killed: ...``). The worker closes its pipe to the supervisor before the code runs, so the
code has no channel but its exit status; an uncaught exception's traceback goes to ``stderr``
(the program's text). ``sys.setrecursionlimit`` is capped at ``memory_mb`` MiB / 2 KiB
levels, and a recursion past it (or past the C stack) is ``killed: stack overflow``.
``cpu_share`` pins the worker to ``ceil(share * cores)`` cores (``sched_setaffinity`` is
denied by the filter).

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

``observation()`` is stdout, then stderr (the traceback), then the ``error`` line unless stderr
already ends with it (or it is the ``exited with code 1`` of a traceback), or ``(no output)``.
Output is decoded as UTF-8 with U+FFFD for invalid
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
