"""Namespace mode's mount view, set up by the supervisor as PID 1 of the new namespaces:
private tmpfs covers, the host's ttys, queues and ``/run`` hidden, the interpreter's
directories bind-mounted back for the call's uid, every other mount read-only.
"""

from __future__ import annotations

import ctypes
import os
import sys

from .linux import (
    _MS_BIND,
    _MS_NOATIME,
    _MS_NODEV,
    _MS_NODIRATIME,
    _MS_NOEXEC,
    _MS_NOSUID,
    _MS_RDONLY,
    _MS_REC,
    _MS_RELATIME,
    _MS_REMOUNT,
    _libc,
)

_STATVFS_TO_MS = {  # statvfs f_flag bit -> mount flag, for remounts that must keep locked flags
    getattr(os, name, 0): flag  # the ST_* names are Linux-only; 0 entries are never set
    for name, flag in (
        ("ST_NOSUID", _MS_NOSUID),
        ("ST_NODEV", _MS_NODEV),
        ("ST_NOEXEC", _MS_NOEXEC),
        ("ST_NOATIME", _MS_NOATIME),
        ("ST_NODIRATIME", _MS_NODIRATIME),
        ("ST_RELATIME", _MS_RELATIME),
    )
}


def _child_setup_namespace(payload: dict) -> None:
    """PID 1 of the new namespaces: private tmpfs for /tmp and the workdir, the host's ttys,
    message queues and ``/run`` hidden, the interpreter exposed to the call's uid, every other
    mount read-only.

    A *cover* is a tmpfs mounted over a directory: ``/tmp`` and ``/dev/shm`` (writable, private),
    ``/dev/pts``, ``/dev/mqueue`` and ``/run`` (empty, read-only), and, when the worker changes
    uid, every topmost directory the uid could not traverse on the way to a directory the
    interpreter needs (e.g. ``/root``). The needed directories under a cover (the interpreter's
    prefix, its ``sys.path``) are bind-mounted back at their own paths through ``O_PATH``
    descriptors opened before the covers, so ``sys.executable`` and every import path stay
    valid while the rest of the covered directory (root's home) is not there at all.
    """
    workdir, size = payload["workdir"], payload["tmpfs_bytes"]
    options = f"size={size},mode=1777"
    writable = {"/tmp", "/proc"}
    covers = {path: options for path in ("/tmp", "/dev/shm") if _is_real_dir(path)}
    covers.update((path, "size=4k,mode=755") for path in _HIDDEN if _is_real_dir(path))
    needed = _interpreter_dirs()
    if payload["uid"] is not None:
        covers.update((path, "size=4k,mode=755") for path in _closed_ancestors(needed))
    exposed = {}
    for path in needed:
        cover = next((a for a in _ancestors(path) if a in covers and a != path), None)
        if cover is not None:
            exposed[path] = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    covers = {p: o for p, o in covers.items()  # a cover inside another one is gone with it
              if not any(p.startswith(q.rstrip("/") + "/") for q in covers if q != p)}
    for path in sorted(covers, key=len):
        _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, covers[path])
    writable.update(p for p in ("/tmp", "/dev/shm") if p in covers)
    for path, fd in sorted(exposed.items()):
        _make_dirs(path)
        _mount(f"/proc/self/fd/{fd}", path, "", _MS_BIND | _MS_REC, None)
        os.close(fd)
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    if not any(workdir == w or workdir.startswith(w + "/") for w in writable):
        _mount("tmpfs", workdir, "tmpfs", _MS_NOSUID | _MS_NODEV, options)  # hides the host's
        writable.add(workdir)
    for mount_point in _mount_points():
        if mount_point in writable or any(mount_point.startswith(w + "/") for w in writable):
            continue
        try:
            flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
            vfs_flags = os.statvfs(mount_point).f_flag
            flags |= sum(ms for st, ms in _STATVFS_TO_MS.items() if vfs_flags & st)
            _mount("none", mount_point, "", flags, None)
        except OSError:
            pass  # best effort: a mount that cannot be remounted stays as it was


_HIDDEN = ("/dev/pts", "/dev/mqueue", "/run")  # the host's ttys, POSIX queues, daemon sockets


def _is_real_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _interpreter_dirs() -> list[str]:
    """The directories this interpreter needs to run and import: its prefixes, the directory
    of ``sys.executable`` (and of what it links to), and ``sys.path``; outermost only."""
    executable = sys.executable
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  os.path.dirname(executable), os.path.dirname(os.path.realpath(executable))}
    candidates.update(p if os.path.isdir(p) else os.path.dirname(p) for p in sys.path if p)
    dirs = sorted({os.path.realpath(p) for p in candidates if p and os.path.isdir(p)})
    return [d for d in dirs if not any(d.startswith(o.rstrip("/") + "/") for o in dirs if o != d)]


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/", "/a", "/a/b", "/a/b/c"]``."""
    parts = path.strip("/").split("/")
    return ["/"] + ["/" + "/".join(parts[: i + 1]) for i in range(len(parts)) if parts[0]]


def _closed_ancestors(paths: list[str]) -> set[str]:
    """For each path, its topmost proper ancestor that a uid with no groups cannot traverse
    (no ``o+x``), e.g. ``/root`` (mode 0700) for an interpreter under ``/root/.pyenv``."""
    closed = set()
    for path in paths:
        for ancestor in _ancestors(path)[1:-1]:
            if not os.stat(ancestor).st_mode & 0o001:
                closed.add(ancestor)
                break
    return closed


def _make_dirs(path: str) -> None:
    """``mkdir -p`` with mode 0755 whatever the umask (inside a cover's fresh tmpfs)."""
    missing = [a for a in _ancestors(path) if not os.path.isdir(a)]
    for directory in missing:
        os.mkdir(directory)
        os.chmod(directory, 0o755)


def _mount(source: str, target: str, fstype: str, flags: int, data: str | None) -> None:
    encoded = data.encode() if data is not None else None
    result = _libc().mount(source.encode(), target.encode(), fstype.encode(), flags, encoded)
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {fstype or 'remount'} on {target}: {os.strerror(code)}")


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
        fields = [line.split() for line in handle]
    points = [f[4] for f in fields if len(f) > 4]
    # mountinfo escapes space, tab, newline and backslash as octal (\040 ...)
    return [p.encode().decode("unicode_escape") if "\\" in p else p for p in points]
