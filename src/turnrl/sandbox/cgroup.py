"""One memory cgroup per sandboxed call, so ``memory_mb`` caps the whole process tree.

``RLIMIT_AS`` is per process: six children could use six times the limit. When the host may
create cgroups (root on most machines; cgroup v1's ``memory`` hierarchy or a v2 tree whose
``cgroup.subtree_control`` delegates ``memory``), each call gets a child of the host's own
memory cgroup with ``memory_mb`` as its hard limit (swap included where the kernel accounts
it). The supervisor joins it before it forks, so the worker and everything it starts are
counted together; the kernel's OOM killer then kills inside the call only (the worker sets its
``oom_score_adj`` to 1000, so it goes before the supervisor). Where no cgroup can be made,
:func:`create` returns ``None`` and the per-process limits are all there is: the call may use
up to ``max_processes * memory_mb`` (documented in :mod:`turnrl.sandbox`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from dataclasses import dataclass

_ROOT = "/sys/fs/cgroup"
_PREFIX = "turnrl-sandbox-"
_lock = threading.Lock()
_counter = itertools.count()
_parent: list[tuple[str, int] | None] = []  # probed once: (directory, version) or None


@dataclass(frozen=True)
class CallCgroup:
    """The memory cgroup of one call. ``path``: its directory; ``version``: 1 or 2."""

    path: str
    version: int

    @property
    def procs(self) -> str:
        """The file a process writes ``0`` into to join."""
        return os.path.join(self.path, "cgroup.procs")

    def oom_killed(self) -> bool:
        """Whether the limit was hit and the kernel killed a process of the call."""
        if self.version == 2:
            return _counter_in(os.path.join(self.path, "memory.events"), "oom_kill") > 0
        return _counter_in(os.path.join(self.path, "memory.oom_control"), "oom_kill") > 0

    def remove(self, timeout_s: float = 2.0) -> None:
        """Delete the cgroup once its last process is gone (never raises: a leftover empty
        cgroup is removed by the next :func:`create` of this host process's lifetime)."""
        end = time.monotonic() + timeout_s
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= end:
                    return
                time.sleep(0.01)


def create(memory_bytes: int) -> CallCgroup | None:
    """A fresh cgroup limited to ``memory_bytes``, or ``None`` where none can be made."""
    parent = _probe()
    if parent is None:
        return None
    directory, version = parent
    _remove_stale(directory)
    path = os.path.join(directory, f"{_PREFIX}{os.getpid()}-{next(_counter)}")
    try:
        os.mkdir(path, 0o755)
    except OSError:
        return None
    group = CallCgroup(path, version)
    try:
        if version == 2:
            _write(os.path.join(path, "memory.max"), memory_bytes)
            with contextlib.suppress(OSError):
                _write(os.path.join(path, "memory.swap.max"), 0)
        else:
            _write(os.path.join(path, "memory.limit_in_bytes"), memory_bytes)
            with contextlib.suppress(OSError):  # absent without swap accounting
                _write(os.path.join(path, "memory.memsw.limit_in_bytes"), memory_bytes)
    except OSError:
        group.remove(timeout_s=0)
        return None
    return group


def available() -> bool:
    """Whether calls on this host get a memory cgroup (probed once)."""
    return _probe() is not None


def _probe() -> tuple[str, int] | None:
    with _lock:
        if not _parent:
            _parent.append(_find_parent())
        return _parent[0]


def _find_parent() -> tuple[str, int] | None:
    """The host process's own memory cgroup, if a child of it can be made and limited."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            lines = [line.rstrip("\n").split(":", 2) for line in handle]
    except OSError:
        return None
    candidates = []
    for fields in lines:
        if len(fields) != 3:
            continue
        hierarchy, controllers, path = fields
        if "memory" in controllers.split(","):
            candidates.append((os.path.join(_ROOT, "memory") + path, 1))
        elif hierarchy == "0" and controllers == "":
            candidates.append((_ROOT + path, 2))
    for directory, version in candidates:
        control = "memory.limit_in_bytes" if version == 1 else "cgroup.subtree_control"
        if version == 2 and "memory" not in _read(os.path.join(directory, control)).split():
            continue
        probe = os.path.join(directory, f"{_PREFIX}probe-{os.getpid()}")
        try:
            os.mkdir(probe)
        except OSError:
            continue
        limit = "memory.limit_in_bytes" if version == 1 else "memory.max"
        ok = os.path.exists(os.path.join(probe, limit))
        with contextlib.suppress(OSError):
            os.rmdir(probe)
        if ok:
            return directory, version
    return None


def _remove_stale(directory: str) -> None:
    """Empty cgroups left by dead host processes (killed before they could clean up)."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(directory, name))


def _write(path: str, value: int) -> None:
    with open(path, "w") as handle:
        handle.write(str(value))


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


def _counter_in(path: str, key: str) -> int:
    """``key N`` from a flat keyed file such as ``memory.events``."""
    for line in _read(path).splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0
