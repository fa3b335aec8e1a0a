"""The sandbox's value types: the limits of one call (:class:`SandboxConfig`, validated), what
one call produced (:class:`SandboxResult`, rendered as the agent's text by ``observation()``)
and :class:`SandboxError`, raised for failures of the sandbox itself, never of the code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

ISOLATION_MODES = ("auto", "namespace", "process")
NO_OUTPUT = "(no output)"


class SandboxError(RuntimeError):
    """The sandbox itself could not run code: a problem of the host setup, never of the code."""


@dataclass(frozen=True)
class SandboxConfig:
    """Limits of one sandboxed call; see the :mod:`turnrl.sandbox` docstring for what each one
    enforces.

    Sizes are MiB (2**20 bytes). ``cpu_time_s`` is rounded up to whole seconds
    (``RLIMIT_CPU`` granularity). ``python`` is the interpreter to run (default: the host's
    ``sys.executable``, so the code sees the same installed packages).
    """

    wall_time_s: float = 5.0  # wall clock from the supervisor's start; then everything is killed
    cpu_time_s: float = 5.0  # RLIMIT_CPU per process (SIGXCPU, SIGKILL one second later)
    memory_mb: int = 256  # the whole call (memory cgroup, if any) and RLIMIT_AS per process
    file_size_mb: float = 1.0  # RLIMIT_FSIZE: largest file the code can write
    max_open_files: int = 32  # RLIMIT_NOFILE per process
    max_processes: int = 32  # RLIMIT_NPROC: processes + threads of the call, main one included
    max_output_bytes: int = 16_384  # per stream; beyond it the middle is cut with a marker
    tmpfs_mb: int = 64  # namespace mode: size of the private /tmp (holds the workdir), /dev/shm
    cpu_share: float = 0.5  # the share of the host's cores the call may run on (pinned)
    isolation: str = "auto"  # "auto" (namespace, or an error) | "namespace" | "process"
    python: str | None = None  # interpreter; None: the host's sys.executable
    # namespace mode: host directories (or files) the code may read, besides the interpreter
    readonly_paths: tuple[str, ...] = ()

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
        _check_number("cpu_share", self.cpu_share, 0.0, is_int=False)
        if not 0 < self.cpu_share <= 1:
            raise ValueError(
                f"SandboxConfig.cpu_share must be in (0, 1] (a share of the host's cores), "
                f"got {self.cpu_share!r}; e.g. cpu_share=0.5 (the default)"
            )
        if self.isolation not in ISOLATION_MODES:
            raise ValueError(
                f"SandboxConfig.isolation must be one of {ISOLATION_MODES}, "
                f"got {self.isolation!r}; use 'auto' (namespace isolation, or an error naming "
                "the fix); 'process' hides nothing of the host's files: choose it explicitly"
            )
        paths = self.readonly_paths
        if not isinstance(paths, tuple) or not all(
                isinstance(p, str) and p.startswith("/") and p != "/" for p in paths):
            raise ValueError(
                f"SandboxConfig.readonly_paths must be a tuple of absolute paths other than "
                f"'/', got {paths!r}; e.g. readonly_paths=('/opt/data',)"
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
    timeout, or the supervisor was killed). ``error``: one line built by the host from what it
    observed (exit status, signal, timers, the cgroup), ``None`` on success; never text the
    program wrote (its traceback is in ``stderr``). ``truncated``: stdout or stderr exceeded
    ``max_output_bytes``. ``isolation``:
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
        """The text an agent sees: stdout, stderr, then ``error`` unless stderr ends with it or
        it is the plain ``exited with code 1`` of an uncaught exception whose traceback stderr
        already shows."""
        parts = [text.rstrip("\n") for text in (self.stdout, self.stderr) if text.strip()]
        shown = self.stderr.rstrip().endswith(self.error or "\0") or (
            self.error == "exited with code 1" and "Traceback (most recent call last)"
            in self.stderr)
        if self.error is not None and not shown:
            parts.append(self.error)
        return "\n".join(parts) if parts else NO_OUTPUT
