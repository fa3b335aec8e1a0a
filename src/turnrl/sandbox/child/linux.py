"""The Linux constants (``include/uapi/linux/{prctl,mount,capability,securebits}.h``) and the
libc calls (``prctl``) the supervisor and the worker make through :mod:`ctypes`.
"""

from __future__ import annotations

import ctypes
import os

# Linux constants (include/uapi/linux/{prctl,mount,capability,securebits}.h).
_PR_SET_PDEATHSIG = 1


_PR_CAPBSET_DROP = 24


_PR_SET_SECUREBITS = 28


_PR_SET_CHILD_SUBREAPER = 36


_PR_SET_NO_NEW_PRIVS = 38


_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


_SECBIT_NOROOT = 0x1 | 0x2  # NOROOT | NOROOT_LOCKED: uid 0 gains no capabilities on execve


_CAP_VERSION_3 = 0x20080522


_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8


_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND, _MS_REC = 32, 1024, 2048, 4096, 16384


_MS_RELATIME = 1 << 21


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int) -> None:
    if _libc().prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl({option}, {arg}): {os.strerror(code)}")
