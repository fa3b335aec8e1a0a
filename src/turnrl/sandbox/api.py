"""The sandbox's entry points: :class:`Sandbox` (one config, thread-safe, one child process per
call), :func:`run_python` (one shot) and :func:`namespace_isolation_available` (the probe
``isolation="auto"`` relies on; a success is cached, a failure retried after a few seconds).
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from dataclasses import replace
from typing import Any

from turnrl.sandbox.config import SandboxConfig, SandboxError, SandboxResult
from turnrl.sandbox.host import _run
from turnrl.sandbox.isolation import CHILD_PATH, check_safe

_namespace_lock = threading.Lock()
_namespace_ok: dict[str, tuple[bool, float]] = {}  # python -> (works, when probed)
_RETRY_AFTER_S = 10.0


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
        """The resolved mode: ``"namespace"``, or ``"process"`` only when chosen explicitly.
        ``auto`` never falls back: where namespaces do not work it raises a
        :class:`SandboxError` that names the fix (and probes again on the next call)."""
        if self._isolation is None:
            wanted = self.config.isolation
            if wanted != "process" and not namespace_isolation_available(self.python):
                raise SandboxError(
                    f"Sandbox: isolation={wanted!r} needs namespaces (unshare(1) with PID, "
                    "mount, network and IPC namespaces, and unprivileged user namespaces when "
                    "not root), which do not work here; fix: run as root, or enable user "
                    "namespaces (sysctl kernel.unprivileged_userns_clone=1; in Docker, "
                    "--security-opt seccomp=unconfined or --privileged), or choose "
                    "isolation='process' explicitly, which does NOT hide the host's files "
                    "(docs/reliability.md)"
                )
            resolved = "process" if wanted == "process" else "namespace"
            check_safe(self.python, resolved)
            self._isolation = resolved
        return self._isolation

    def run(self, code: str, files: dict[str, str] | None = None) -> SandboxResult:
        """Run ``code`` as a script and return what happened; never raises for the code's sake.

        ``files``: text files (relative path -> content) written into the fresh working
        directory before the code runs, e.g. a grader's hidden tests beside the agent's
        solution: grading runs in a sandbox of its own, after the episode, and the agent's
        sandbox never held them (docs/environments.md, "Code envs grade apart")."""
        if not isinstance(code, str):
            raise TypeError(f"Sandbox.run: code must be a str, got {type(code).__name__}")
        checked = _check_files(files or {})
        return _run(code, self.config, self.python, self.isolation, checked)


def _check_files(files: dict[str, str]) -> dict[str, str]:
    for path, text in files.items():
        parts = path.split("/") if isinstance(path, str) else []
        if not parts or path.startswith("/") or any(p in ("", ".", "..") for p in parts) \
                or not isinstance(text, str):
            raise ValueError(f"Sandbox.run: files must map relative paths (no '..') to text, "
                             f"got {path!r}: {type(text).__name__}")
    return dict(files)


def run_python(code: str, config: SandboxConfig | None = None, **limits: Any) -> SandboxResult:
    """One-shot ``Sandbox(config, **limits).run(code)``."""
    return Sandbox(config, **limits).run(code)


def namespace_isolation_available(python: str | None = None) -> bool:
    """Whether ``isolation="namespace"`` works on this host. A success is cached for the
    interpreter's life; a failure for ``_RETRY_AFTER_S`` only, so one slow or unlucky probe
    (a loaded machine) never decides for good."""
    python = python or sys.executable
    with _namespace_lock:
        known = _namespace_ok.get(python)
        if known is not None and (known[0] or time.monotonic() - known[1] < _RETRY_AFTER_S):
            return known[0]
        ok = _probe_namespace(python)
        _namespace_ok[python] = (ok, time.monotonic())
        return ok


def _probe_namespace(python: str) -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare", path=CHILD_PATH) is None:
        return False
    config = SandboxConfig(wall_time_s=30.0, cpu_time_s=30.0, isolation="namespace")
    try:
        result = _run("import socket\nprint('ok')", config, python, "namespace")
    except (SandboxError, OSError):
        return False
    return result.error is None and result.stdout == "ok\n"
