"""The sandbox's entry points: :class:`Sandbox` (one config, thread-safe, one child process per
call), :func:`run_python` (one shot) and :func:`namespace_isolation_available` (the probe
``isolation="auto"`` relies on, run once per interpreter and cached).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
from dataclasses import replace
from typing import Any

from turnrl.sandbox.config import SandboxConfig, SandboxError, SandboxResult
from turnrl.sandbox.host import _run
from turnrl.sandbox.isolation import CHILD_PATH, check_safe

_namespace_lock = threading.Lock()
_namespace_ok: dict[str, bool] = {}
_warned: set[str] = set()
log = logging.getLogger("turnrl")


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
            resolved = "namespace" if available else "process"
            check_safe(self.python, resolved)
            if resolved == "process" and wanted == "auto":
                _warn_once(self.python)
            self._isolation = resolved
        return self._isolation

    def run(self, code: str) -> SandboxResult:
        """Run ``code`` as a script and return what happened; never raises for the code's sake."""
        if not isinstance(code, str):
            raise TypeError(f"Sandbox.run: code must be a str, got {type(code).__name__}")
        return _run(code, self.config, self.python, self.isolation)


def run_python(code: str, config: SandboxConfig | None = None, **limits: Any) -> SandboxResult:
    """One-shot ``Sandbox(config, **limits).run(code)``."""
    return Sandbox(config, **limits).run(code)


def _warn_once(python: str) -> None:
    """``auto`` fell back to process mode: say once (per interpreter) what that mode does not
    isolate."""
    with _namespace_lock:
        if python in _warned:
            return
        _warned.add(python)
    same_uid = ("" if os.geteuid() == 0 else
                "; and the code runs as this host's uid, so it can signal the host's processes "
                "and read their /proc/<pid>/environ")
    log.warning(
        "sandbox: namespaces are unavailable here (unshare(1) failed), so code runs in "
        "process isolation. Held: the limits, the seccomp filter (no sockets), a fresh working "
        "directory and, as root, a fresh uid per call. Not isolated: files outside the working "
        "directory are readable and writable wherever the code's uid may, the disk can be "
        "filled file by file, and /proc lists the "
        f"host's processes{same_uid} (docs/reliability.md)"
    )


def namespace_isolation_available(python: str | None = None) -> bool:
    """Whether ``isolation="namespace"`` works on this host (runs one probe call, cached)."""
    python = python or sys.executable
    with _namespace_lock:
        if python not in _namespace_ok:
            _namespace_ok[python] = _probe_namespace(python)
        return _namespace_ok[python]


def _probe_namespace(python: str) -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare", path=CHILD_PATH) is None:
        return False
    config = SandboxConfig(wall_time_s=10.0, cpu_time_s=10.0, isolation="namespace")
    try:
        result = _run("import socket\nprint('ok')", config, python, "namespace")
    except (SandboxError, OSError):
        return False
    return result.error is None and result.stdout == "ok\n"
