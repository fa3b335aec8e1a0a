"""Safe writes to a run directory.

- :func:`atomic_write_text`: a reader (or a crash) never sees a half-written file.
- :func:`run_write`: a write that fails becomes one :class:`RunWriteError` line saying what
  was written, where, and why, instead of a raw ``OSError`` traceback; a full disk or quota
  (``ENOSPC``, ``EDQUOT``) is a :class:`DiskFullError` that also says how much space it needs.
- :func:`new_run_dir`: run directories are private to their owner (0700): a run's metrics,
  samples and checkpoints are not for other users (nor for the sandboxed code of an env).
- :func:`lock_run_dir`: one process at a time per run directory (``fcntl.flock`` on
  ``<run dir>/.lock``, held while the run lives; the kernel drops it with the process, even
  after SIGKILL); a second one gets a :class:`RunDirLocked` naming the holder's pid.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
# how libraries that do not raise OSError (safetensors, torch's zip writer) word it
NO_SPACE_TEXT = tuple(os.strerror(code) for code in NO_SPACE) + tuple(
    f"os error {code}" for code in NO_SPACE)
LOCK_FILE = ".lock"


def new_run_dir(out_dir: str | Path, name: str) -> Path:
    """Make and return ``<out_dir>/<name>``, or ``<name>-2``, ``-3``... if taken; mode 0700."""
    root = Path(out_dir)
    for n in itertools.count(1):
        run_dir = root / (name if n == 1 else f"{name}-{n}")
        with run_write("the run directory", run_dir):
            try:
                run_dir.mkdir(parents=True, mode=0o700)
            except FileExistsError:  # taken (also by a run starting now)
                continue
            run_dir.chmod(0o700)  # whatever the umask
        return run_dir
    raise AssertionError("unreachable")


class RunWriteError(RuntimeError):
    """A write to the run dir failed: a full disk, a permission, a path that is not a dir..."""


class DiskFullError(RunWriteError):
    """A write to the run dir failed for lack of disk space (or quota)."""


class RunDirLocked(RuntimeError):
    """Another process holds the run dir's lock."""


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to a temp file beside ``path``, fsync it, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` says the disk (or the quota) is full."""
    if isinstance(error, OSError) and error.errno in NO_SPACE:
        return True
    return any(text in str(error) for text in NO_SPACE_TEXT)


@contextlib.contextmanager
def run_write(what: str, where: Path,
              needed: int | Callable[[], int | None] | None = None) -> Iterator[None]:
    """Turn a failed write of ``what`` to ``where`` into one :class:`RunWriteError` line
    (:class:`DiskFullError` for a full disk; ``needed``: the bytes it takes, if known, or a
    function computing them then). Errors that are not about the write pass unchanged."""
    try:
        yield
    except RunWriteError:
        raise
    except Exception as error:
        full = is_disk_full(error)
        detail = str(error).splitlines()[0] if str(error) else "no space" if full else "failed"
        reason = f"{error.__class__.__name__}: {detail}"
        if not full:
            if isinstance(error, OSError):
                raise RunWriteError(f"could not write {what} to {where}: {reason}") from None
            raise
        size = needed() if callable(needed) else needed
        free = free_bytes(where)
        room = ", ".join(part for part in (
            f"needs about {human_bytes(size)}" if size else "",
            f"{human_bytes(free)} free" if free is not None else "") if part)
        raise DiskFullError(f"disk full while writing {what} to {where}"
                            f"{f' ({room})' if room else ''}: {reason}") from None


def free_bytes(path: Path) -> int | None:
    """Free bytes on the file system of ``path`` (or of its nearest existing parent)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            with contextlib.suppress(OSError):
                return shutil.disk_usage(candidate).free
            return None
    return None


def dir_size(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def human_bytes(size: int) -> str:
    """``1536`` → ``1.5 KiB``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


class RunDirLock:
    """The lock on one run dir held by this process (:func:`lock_run_dir`)."""

    def __init__(self, run_dir: Path, fd: int) -> None:
        self.run_dir, self._fd = run_dir, fd

    def release(self) -> None:
        """Let another process use the run dir (idempotent; exiting releases it too)."""
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = -1

    def __del__(self) -> None:  # a run object dropped without close(): its run is over
        self.release()


def lock_run_dir(run_dir: Path) -> RunDirLock:
    """Lock ``run_dir`` for this process, or raise :class:`RunDirLocked` naming the pid that
    holds it. The lock file keeps the holder's pid; a stale one (its process died) is taken
    over, since the kernel released its lock."""
    path = run_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise RunDirLocked(
            f"{run_dir} is in use by another turnrl process (pid {holder}, holding {path}); "
            f"wait for it to finish or stop it (kill {holder}), then run this again"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return RunDirLock(run_dir, fd)


def suggest_path(path: Path) -> str:
    """``" (did you mean runs/default?)"`` when ``path`` is missing and its folder holds a
    name close to it, else ``""``."""
    import difflib

    folder = path.parent
    if path.exists() or not folder.is_dir():
        return ""
    close = difflib.get_close_matches(path.name, [p.name for p in folder.iterdir()], n=1,
                                      cutoff=0.6)
    return f" (did you mean {folder / close[0]}?)" if close else ""


def looks_local(model: str) -> bool:
    """Whether ``model`` names a path here rather than a hub id: it starts with ``.``, ``/``
    or ``~``, or the folder it is in exists (``runs/defualt``: ``runs/`` is here)."""
    path = Path(model).expanduser()
    return model.startswith((".", "/", "~")) or (path.parent != Path(".")
                                                 and path.parent.is_dir())
