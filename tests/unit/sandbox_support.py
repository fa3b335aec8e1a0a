"""Shared by the sandbox tests: the modes this host runs, a sandbox forced into a mode, the
leak check (no sandbox process outlives its call) and the error assertion."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

from turnrl.sandbox import Sandbox, SandboxResult, namespace_isolation_available
from turnrl.sandbox import isolation as sandbox_isolation

MODE = "namespace" if namespace_isolation_available() else "process"
IS_ROOT = os.geteuid() == 0


def process_python() -> str | None:
    """An interpreter process mode accepts: as root, one an unprivileged uid can read (the
    venv's may live under /root, which process mode refuses); None if there is none."""
    if not IS_ROOT:
        return sys.executable
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(candidate) and sandbox_isolation._uid_mode(candidate) == "full":
            return candidate
    return None


PROCESS_PYTHON = process_python()
MODES = sorted({MODE, "process"} if PROCESS_PYTHON else {MODE})


def sandbox_in(mode: str, **limits) -> Sandbox:
    """A sandbox forced into ``mode`` (process mode with :data:`PROCESS_PYTHON`)."""
    python = PROCESS_PYTHON if mode == "process" else None
    return Sandbox(isolation=mode, python=python, **limits)



# Without namespaces a non-root host shares its uid with the code, so kill(2) by pid, kill(-1)
# and /proc/<host>/environ cannot be refused (documented); those checks are skipped there.
REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20
CHILD_ENV_NAMES = ["PATH", "LANG", "LC_ALL", "HOME", "TMPDIR"]
CHILD_ENV_NAMES += ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"]

FINISHES = {"wall_time_s": 30.0, "cpu_time_s": 5.0, "max_processes": 16}  # must not time out
HANGS = {"wall_time_s": 1.0, "cpu_time_s": 1.0, "max_processes": 16}  # expected to be killed


@pytest.fixture(scope="module")
def quick() -> Sandbox:
    return sandbox_in(MODE, **FINISHES)


@pytest.fixture(scope="module")
def hang() -> Sandbox:
    return sandbox_in(MODE, **HANGS)


def live_processes(needle: str, ignore: frozenset[int] = frozenset()) -> list[int]:
    """Pids of running (non-zombie) processes whose command line or name contains ``needle``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in ignore or int(entry) == os.getpid():
            continue
        proc = Path("/proc", entry)
        try:
            state = proc.joinpath("stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            names = proc.joinpath("cmdline").read_bytes() + proc.joinpath("comm").read_bytes()
        except (OSError, IndexError):
            continue
        if state != b"Z" and needle.encode() in names:
            found.append(int(entry))
    return found


def wait_until_gone(needle: str, ignore: frozenset[int] = frozenset(), timeout_s=3.0):
    end = time.monotonic() + timeout_s
    while (left := live_processes(needle, ignore)) and time.monotonic() < end:
        time.sleep(0.02)
    return left


@pytest.fixture(scope="module", autouse=True)
def calls_root(tmp_path_factory) -> str:
    """Working directories of this module's calls live here, so this path appears in the command
    line of every sandbox process of this test run (and of no concurrent run)."""
    root = str(tmp_path_factory.mktemp("sandbox-calls"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", root)
        yield root


@pytest.fixture(autouse=True)
def no_stray_sandbox_processes(calls_root):
    yield
    left = wait_until_gone(calls_root)
    assert left == [], f"sandbox processes outlived their call: {describe_processes(left)}"


def describe_processes(pids: list[int]) -> list[str]:
    described = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
        except OSError:
            stat = "gone"
        described.append(f"{pid}: {stat[:80]}")
    return described


def program_exception(result: SandboxResult) -> str:
    """The last line of the program's stderr: its own account of an uncaught exception (the
    program's text, never part of the host's verdict)."""
    lines = result.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def failure_text(result: SandboxResult) -> str:
    """What failed: the program's exception line where the host's verdict is the plain
    ``exited with code 1`` of an uncaught exception, else the verdict (``error``)."""
    if result.error == "exited with code 1" and program_exception(result):
        return program_exception(result)
    return result.error or ""


def expect_error(result: SandboxResult, *fragments: str) -> None:
    """The call failed, its verdict or the program's exception line names one of
    ``fragments``, and the agent sees it."""
    assert result.error is not None, result
    text = failure_text(result)
    assert any(f in text for f in fragments), result
    observation = result.observation()
    seen = any(f in observation for f in fragments if f in text)
    traceback_shown = result.error == "exited with code 1" and program_exception(result) in \
        observation  # observation() leaves the plain verdict out after a traceback
    assert seen or traceback_shown, result
