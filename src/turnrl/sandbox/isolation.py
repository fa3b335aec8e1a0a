"""How the host sets up a call's isolation: the uid mode of a root host (probed once per
interpreter), the refusal of unsafe modes, the call's fresh uid, the system-call filter, the
payload of limits the worker applies, the scrubbed environment, and the argv that starts the
supervisor (:mod:`turnrl.sandbox.child`), under ``unshare(1)`` in namespace mode.
"""

from __future__ import annotations

import errno
import itertools
import math
import os
import shutil
import subprocess
import threading
from typing import TYPE_CHECKING

from turnrl.sandbox import child, seccomp, uids
from turnrl.sandbox.child import _PROBE_ARG
from turnrl.sandbox.child.mounts import _closed_ancestors
from turnrl.sandbox.config import SandboxError

if TYPE_CHECKING:
    from turnrl.sandbox.config import SandboxConfig

CHILD_PATH = "/usr/local/bin:/usr/bin:/bin"
# The child imports the child package under another name (cached bytecode, no turnrl package
# import; its modules import each other relatively) and calls _child_main(); argv:
# [-c, child/__init__.py, WORKDIR | _PROBE_ARG].
_CHILD_COMMAND = (
    "import importlib.util as u, os, sys\n"
    "spec = u.spec_from_file_location('_turnrl_sandbox_child', sys.argv[1],\n"
    "    submodule_search_locations=[os.path.dirname(sys.argv[1])])\n"
    "module = sys.modules[spec.name] = u.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "sys.argv[2:] == [module._PROBE_ARG] or module._child_main()\n"
)

_uid_lock = threading.Lock()
_uid_modes: dict[str, str] = {}


def _child_argv(python: str, last_arg: str) -> list[str]:
    """``python -I -c _CHILD_COMMAND child/__init__.py last_arg``: the supervisor, or the uid
    probe."""
    return [python, "-I", "-c", _CHILD_COMMAND, os.path.abspath(child.__file__), last_arg]


def _uid_mode(python: str) -> str:
    """Root only: how the worker can change uid (probed once per interpreter, cached).

    ``"full"``: a fresh uid can start ``python`` and load ``child/`` as they are, so process
    mode can run the worker as that uid. ``"hidden"``: the uid can be set but cannot read the
    interpreter (e.g. under ``/root``): only namespace mode can run it, through a mount view
    that exposes the interpreter (see :func:`turnrl.sandbox.child.mounts._child_setup_namespace`).
    ``"none"``: uids cannot be changed here (e.g. a container's user namespace maps only uid
    0), so the code would keep root's file access: the sandbox refuses to run.
    """
    with _uid_lock:
        if python not in _uid_modes:
            uid = uids.claim()
            try:
                done = subprocess.run(
                    _child_argv(python, _PROBE_ARG),
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
                _uid_modes[python] = "full" if done.returncode == 0 else "hidden"
            except PermissionError as exc:  # EACCES: the exec failed, so the uid change worked
                _uid_modes[python] = "hidden" if exc.errno == errno.EACCES else "none"
            except (OSError, subprocess.SubprocessError):
                _uid_modes[python] = "none"
            finally:
                uids.kill_all(uid)
                uids.release(uid)
        return _uid_modes[python]


def check_safe(python: str, mode: str) -> None:
    """Refuse (:class:`SandboxError`) a mode in which the code would get root's file access,
    or a machine without a system-call filter; say what would work instead."""
    if not seccomp.supported():
        raise SandboxError(
            f"Sandbox: no system-call filter for this CPU ({seccomp.machine()!r}; known: "
            "x86_64, aarch64), so sockets and namespaces could not be denied; run "
            "code-executing envs on an x86_64 or aarch64 Linux host"
        )
    if shutil.which(python) is None:
        raise SandboxError(
            f"Sandbox: could not start {python!r}: no such executable; check "
            "SandboxConfig.python (None: the host's own interpreter)"
        )
    if os.geteuid() != 0:
        return
    uid_mode = _uid_mode(python)
    if uid_mode == "none":
        raise SandboxError(
            "Sandbox: running as root, but this host cannot switch to an unprivileged uid "
            "(setresuid failed: a container that maps only uid 0?), so the code would read "
            "and write files as root; run turnrl as a non-root user, or in a container with "
            "a full uid map"
        )
    if uid_mode == "hidden" and mode == "process":
        real = os.path.realpath(python)
        closed = sorted(_closed_ancestors([real])) or ["a directory only root can enter"]
        raise SandboxError(
            f"Sandbox: isolation='process' as root needs an interpreter that an unprivileged "
            f"uid can read, and {real} cannot be read by one (it lives under {closed[0]}, "
            "which only root can enter); without namespaces the code would run with "
            "root's file access, which is refused. Use isolation='auto' or 'namespace' "
            "(needs unshare(1)), or point SandboxConfig.python at an interpreter every user "
            "can read (e.g. /usr/bin/python3, or `uv python install --install-dir "
            "/opt/python` then /opt/python/<version>/bin/python3)"
        )


def _child_env(workdir: str) -> dict[str, str]:
    env = {"PATH": CHILD_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    env.update(HOME=workdir, TMPDIR=workdir)
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _payload(code: str, config: SandboxConfig, python: str, mode: str, workdir: str,
             cgroup_procs: str | None) -> dict:
    """What the supervisor reads on stdin. ``cgroup_procs``: the ``cgroup.procs`` file of the
    call's memory cgroup (the supervisor joins it first), or ``None`` (per-process limits)."""
    check_safe(python, mode)
    uid = uids.claim() if os.geteuid() == 0 else None  # released by the host after the call
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
        "seccomp": seccomp.build().hex(),
        "cgroup_procs": cgroup_procs,
        "wall_time_s": config.wall_time_s,
        "tmpfs_bytes": config.tmpfs_mb << 20,
        "readonly_paths": list(config.readonly_paths),
        "limits": {
            "cpu": math.ceil(config.cpu_time_s),
            "memory": config.memory_mb << 20,
            "file_size": int(config.file_size_mb * (1 << 20)),
            "open_files": config.max_open_files,
            "processes": nproc,
        },
        "nproc_relative": nproc_relative,
        "cpus": _cpu_set(config.cpu_share),
    }


_cpu_counter = itertools.count()


def _cpu_set(share: float) -> list[int]:
    """The cores a call is pinned to: ``ceil(share * n)`` of the host process's ``n`` allowed
    cores (at least one), starting at a rotating offset so concurrent calls spread out."""
    allowed = sorted(os.sched_getaffinity(0))
    count = max(1, min(len(allowed), math.ceil(share * len(allowed) - 1e-9)))
    start = next(_cpu_counter) % len(allowed)
    return sorted(allowed[(start + i) % len(allowed)] for i in range(count))


def _argv(python: str, mode: str, workdir: str) -> list[str]:
    script = _child_argv(python, workdir)
    if mode == "process":
        return script
    unshare = shutil.which("unshare", path=CHILD_PATH) or "unshare"
    flags = ["--fork", "--kill-child", "--pid", "--mount-proc", "--net", "--ipc", "--uts"]
    if os.geteuid() != 0:
        flags = ["--user", "--map-root-user", *flags]
    return [unshare, *flags, "--", *script]
