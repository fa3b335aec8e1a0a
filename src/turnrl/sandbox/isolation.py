"""How the host sets up a call's isolation: the uid mode of a root host (probed once per
interpreter) and the call's fresh uid, the payload of limits the worker applies, the scrubbed
environment, and the argv that starts the supervisor (:mod:`turnrl.sandbox.child`), under
``unshare(1)`` in namespace mode.
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

from turnrl.sandbox import child
from turnrl.sandbox.child import _PROBE_ARG

if TYPE_CHECKING:
    from turnrl.sandbox.config import SandboxConfig

CHILD_PATH = "/usr/local/bin:/usr/bin:/bin"
# Per-call uids for root hosts: far above any uid a distribution or container runtime allocates.
SANDBOX_UID_BASE = 1_900_000_000
SANDBOX_UID_SPAN = 100_000_000
# The child imports child.py under another name (cached bytecode, no turnrl package import)
# and calls _child_main(); argv: [-c, child.py, WORKDIR | _PROBE_ARG].
_CHILD_COMMAND = (
    "import importlib.util as u, sys\n"
    "spec = u.spec_from_file_location('_turnrl_sandbox_child', sys.argv[1])\n"
    "module = sys.modules[spec.name] = u.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "sys.argv[2:] == [module._PROBE_ARG] or module._child_main()\n"
)

_uid_lock = threading.Lock()
_uid_modes: dict[str, str] = {}
_uid_counter = itertools.count()


def _child_argv(python: str, last_arg: str) -> list[str]:
    """``python -I -c _CHILD_COMMAND child.py last_arg``: the supervisor, or the uid probe."""
    return [python, "-I", "-c", _CHILD_COMMAND, os.path.abspath(child.__file__), last_arg]


def _uid_mode(python: str) -> str:
    """Root only: how the worker can change uid (probed once per interpreter, cached).

    ``"full"``: a fresh uid can start ``python`` and load ``child.py``, so the worker becomes that
    uid entirely. ``"fs_root"``: the uid can be set but cannot read the interpreter (e.g. under
    ``/root``), so the worker keeps file-system uid 0. ``"none"``: uids cannot be changed here
    (e.g. a container's user namespace maps only uid 0); the worker stays uid 0 without
    capabilities and ``RLIMIT_NPROC`` is not enforced.
    """
    with _uid_lock:
        if python not in _uid_modes:
            uid = _next_sandbox_uid()
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
                _uid_modes[python] = "full" if done.returncode == 0 else "fs_root"
            except PermissionError as exc:  # EACCES: the exec failed, so the uid change worked
                _uid_modes[python] = "fs_root" if exc.errno == errno.EACCES else "none"
            except (OSError, subprocess.SubprocessError):
                _uid_modes[python] = "none"
        return _uid_modes[python]


def _next_sandbox_uid() -> int:
    return SANDBOX_UID_BASE + (os.getpid() * 4096 + next(_uid_counter)) % SANDBOX_UID_SPAN


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
    script = _child_argv(python, workdir)
    if mode == "process":
        return script
    unshare = shutil.which("unshare", path=CHILD_PATH) or "unshare"
    flags = ["--fork", "--kill-child", "--pid", "--mount-proc", "--net", "--ipc"]
    if os.geteuid() != 0:
        flags = ["--user", "--map-root-user", *flags]
    return [unshare, *flags, "--", *script]
