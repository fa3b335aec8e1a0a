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

    host ─Popen, new session─▶ [unshare: namespace mode] ─▶ python -I (supervisor: child.py)
                                                               └─fork─▶ worker: drop privileges,
                                                                        setrlimit, exec(code)

- The host starts a fresh ``python -I`` interpreter (never a fork of the host) in a new session
  and process group, in a fresh temporary directory (deleted afterwards), with a scrubbed
  environment: only ``PATH``, ``LANG``/``LC_ALL``, ``HOME``/``TMPDIR`` (= the working
  directory) and ``OMP/OPENBLAS/MKL_NUM_THREADS=1``. The code and the limits travel on stdin,
  which is then replaced by ``/dev/null``. The interpreter loads ``child.py`` (standard
  library only) as the *supervisor*, which forks the *worker*: it drops privileges, sets the limits
  below, patches ``socket`` and runs the code as ``__main__`` (file name ``<code>``; traceback
  frames of ``child.py`` are hidden). The code's parent is the supervisor, never the host.
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

Modules: :mod:`~turnrl.sandbox.api` (:class:`Sandbox`, :func:`run_python`,
:func:`namespace_isolation_available`), :mod:`~turnrl.sandbox.config` (:class:`SandboxConfig`,
:class:`SandboxResult`, :class:`SandboxError`), :mod:`~turnrl.sandbox.host` (starting and
talking to the child), :mod:`~turnrl.sandbox.isolation` (uid modes, limits, the child's argv
and environment) and :mod:`~turnrl.sandbox.child` (the stdlib-only supervisor and worker).
"""

from turnrl.sandbox.api import Sandbox, namespace_isolation_available, run_python
from turnrl.sandbox.config import (
    ISOLATION_MODES,
    NO_OUTPUT,
    SandboxConfig,
    SandboxError,
    SandboxResult,
)
from turnrl.sandbox.isolation import CHILD_PATH, SANDBOX_UID_BASE, SANDBOX_UID_SPAN

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
