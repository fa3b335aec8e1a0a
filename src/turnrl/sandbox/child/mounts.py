"""Namespace mode's minimal root, built by the supervisor as PID 1 of the new namespaces.

The code never sees the host's file system: the supervisor mounts a fresh tmpfs, fills it
from an allow-list and ``pivot_root``\\ s into it, detaching the host's tree. What the new
root holds (nothing else of the host exists inside, so no host file, socket, FIFO or device
can be named)::

    /                      tmpfs, read-only (directories made for the mounts below)
    /tmp                   private tmpfs of ``tmpfs_mb``, mode 1777; holds the working
                           directory (read-write, the call's uid owns it)
    /dev/null, /dev/zero, /dev/urandom   the host's device nodes, bind-mounted
    /dev/shm               private tmpfs of ``tmpfs_mb`` (POSIX semaphores, multiprocessing)
    /dev/fd, /dev/std{in,out,err}        symlinks into /proc/self/fd
    /proc                  the namespace's own procfs (only the call's processes)
    the interpreter        its prefixes, the directory of ``sys.executable`` and the
                           ``sys.path`` entries inside them, read-only, at their own paths
    /usr/lib/<multiarch>, /usr/lib64     the system's shared libraries, read-only (the
                           interpreter links to them; all of /usr/lib where there is no
                           multiarch directory); /lib* as the host's symlinks;
                           /etc/ld.so.cache, read-only
    ``readonly_paths``     extra host directories the caller allowed, read-only

A ``sys.path`` entry outside the interpreter's prefixes (an editable install's source checkout)
is left out: the project's own source is not the code's to read.
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
_MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}  # syscall numbers
_DEVICES = ("null", "zero", "urandom")
_LIBRARY_LINKS = ("/lib", "/lib64", "/lib32", "/libx32")  # merged /usr: symlinks, made again
_LIBRARY_FILES = ("/etc/ld.so.cache",)


def _child_setup_namespace(payload: dict) -> None:
    """Build the minimal root (see the module docstring) and move into it.

    The staging mount point is the host's (empty) working directory: a tmpfs mounted there
    becomes the new root, and the working directory inside it is a fresh directory of the
    same path in the private ``/tmp`` (or a tmpfs of its own when it is not under ``/tmp``).
    """
    workdir, size = payload["workdir"], payload["tmpfs_bytes"]
    private = f"size={size},mode=1777"
    new_root = workdir
    _mount("tmpfs", new_root, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=755")
    for name in ("dev", "proc", "tmp"):
        _make_dirs(new_root + "/" + name)
    _mount("tmpfs", new_root + "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, private)
    _mount_devices(new_root, private)
    _mount_proc(new_root + "/proc")
    for path in _readonly_sources(payload.get("readonly_paths") or []):
        _bind_readonly(path, new_root + path)
    for path in _LIBRARY_LINKS:
        if os.path.islink(path):
            _make_dirs(os.path.dirname(new_root + path))
            if not os.path.lexists(new_root + path):
                os.symlink(os.readlink(path), new_root + path)
    _make_dirs(new_root + workdir)
    if not workdir.startswith("/tmp/"):
        _mount("tmpfs", new_root + workdir, "tmpfs", _MS_NOSUID | _MS_NODEV, private)
    os.chmod(new_root + workdir, 0o700)
    _pivot_into(new_root)
    _remount_readonly("/", extra=_MS_NOSUID | _MS_NODEV)


def _readonly_sources(extra: list[str]) -> list[str]:
    """The host paths bound read-only: the interpreter's directories, the shared libraries and
    the caller's ``readonly_paths``; outermost only (a path inside another is bound with it)."""
    wanted = set(_interpreter_dirs()) | {os.path.realpath(p) for p in extra}
    wanted.update(p for p in (*_library_dirs(), *_LIBRARY_LINKS, *_LIBRARY_FILES)
                  if os.path.exists(p) and not os.path.islink(p))
    wanted = {p for p in wanted if os.path.exists(p)}
    return sorted(p for p in wanted
                  if not any(p.startswith(o.rstrip("/") + "/") for o in wanted if o != p))


def _library_dirs() -> list[str]:
    """Where the system's shared libraries are: the multiarch directories (Debian's
    ``/usr/lib/x86_64-linux-gnu``) where they exist, else all of ``/usr/lib``; ``/usr/lib64``
    (the dynamic loader's link on x86_64)."""
    multiarch = getattr(sys.implementation, "_multiarch", "") or ""
    arch_dirs = {os.path.realpath(d) for d in (f"/usr/lib/{multiarch}", f"/lib/{multiarch}")
                 if multiarch and os.path.isdir(d)}
    return [*(sorted(arch_dirs) or ["/usr/lib"]), "/usr/lib64", "/usr/lib32"]


def _mount_devices(new_root: str, private: str) -> None:
    dev = new_root + "/dev"
    for name in _DEVICES:
        target = f"{dev}/{name}"
        with open(target, "w"):
            pass
        _mount(f"/dev/{name}", target, "", _MS_BIND, None)
    os.mkdir(dev + "/shm")
    _mount("tmpfs", dev + "/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, private)
    os.symlink("/proc/self/fd", dev + "/fd")
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{number}", f"{dev}/{name}")


def _mount_proc(target: str) -> None:
    """The namespace's own procfs (``unshare --mount-proc`` made one at ``/proc``)."""
    try:
        _mount("proc", target, "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None)
    except OSError:  # a user namespace where a fresh procfs is refused: bind the one we have
        _mount("/proc", target, "", _MS_BIND | _MS_REC, None)


def _bind_readonly(source: str, target: str) -> None:
    if os.path.isdir(source):
        _make_dirs(target)
    else:
        _make_dirs(os.path.dirname(target))
        with open(target, "w"):
            pass
    _mount(source, target, "", _MS_BIND, None)
    _remount_readonly(target, extra=_MS_NOSUID | _MS_NODEV)


def _remount_readonly(target: str, extra: int = 0) -> None:
    """Read-only, keeping the flags a user namespace locks (nosuid, nodev, ...)."""
    vfs_flags = os.statvfs(target).f_flag
    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | extra
    flags |= sum(ms for st, ms in _STATVFS_TO_MS.items() if vfs_flags & st)
    _mount("none", target, "", flags, None)


def _pivot_into(new_root: str) -> None:
    """``pivot_root(new_root, new_root)`` then detach the old root stacked under it: the
    host's tree is gone from this mount namespace (``umount2(MNT_DETACH)``)."""
    libc = _libc()
    number = _PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(f"pivot_root: no syscall number for {os.uname().machine}")
    os.chdir(new_root)
    if libc.syscall(number, b".", b".") != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"pivot_root into {new_root}: {os.strerror(code)}")
    if libc.umount2(b".", _MNT_DETACH) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"detaching the host's root: {os.strerror(code)}")
    os.chdir("/")


def _interpreter_dirs() -> list[str]:
    """The directories this interpreter needs to run and import: its prefixes, the directory
    of ``sys.executable`` (and of what it links to), and the ``sys.path`` entries inside
    those; outermost only."""
    executable = sys.executable
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                os.path.dirname(executable), os.path.dirname(os.path.realpath(executable))}
    prefixes = {os.path.realpath(p) for p in prefixes if p and os.path.isdir(p)}
    candidates = set(prefixes)
    for entry in sys.path:
        path = os.path.realpath(entry if os.path.isdir(entry) else os.path.dirname(entry))
        if entry and os.path.isdir(path) and any(
                path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes):
            candidates.add(path)
    dirs = sorted(candidates)
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
    """``mkdir -p`` with mode 0755 whatever the umask (inside the new root's tmpfs)."""
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
