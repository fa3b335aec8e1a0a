"""The sandbox's system-call filter: a classic-BPF seccomp program, built here on the host as
bytes and installed by the worker (:mod:`turnrl.sandbox.child`) just before the code runs.

The filter is a deny list over the calls that reach outside the sandbox whatever the uid and
the mounts: every ``socket(2)`` (so no network and no ``AF_UNIX`` connect to a host socket,
filesystem or abstract, in either isolation mode), ``socketpair(2)`` except ``AF_UNIX``
``SOCK_STREAM`` (a datagram pair could ``sendto`` a host socket by path), new namespaces
(``unshare``, ``setns``, ``clone`` with a ``CLONE_NEW*`` flag; ``clone3``, whose flags a filter
cannot read, answers ``ENOSYS`` so the C library falls back to ``clone``), ``io_uring`` (its
opcodes can open sockets), ``ptrace`` and cross-process memory and descriptor access, the
kernel keyrings (not namespaced), ``bpf``, ``perf_event_open``, ``userfaultfd``, every mount
call, System V IPC and POSIX message queues (kernel objects that would outlive the call in
process mode), the terminal-injection ioctls ``TIOCSTI``/``TIOCLINUX``, and
``sched_setaffinity`` (the worker is pinned to its share of the cores:
``SandboxConfig.cpu_share``). A call from another ABI
(i386 ``int 0x80``, x32) kills the process: its numbers would slip past the table.

Program layout (``seccomp_data``: ``nr`` at offset 0, ``arch`` at 4, ``args[i]`` at 16 + 8 i,
low 32 bits first on these little-endian ABIs)::

    ld arch; jeq ARCH ? next : KILL
    ld nr;   [x86_64: jge 0x40000000 ? KILL]
    per rule: ld nr; jeq NR ? body : next rule      body: [ld arg; test;] ret ACTION
    ret ALLOW
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass

# linux/filter.h, linux/seccomp.h, linux/audit.h
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _AND_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_ARCHES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_BIT = 0x40000000

CLONE_NEW_FLAGS = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_AF_UNIX, _SOCK_STREAM, _SOCK_TYPE_MASK = 1, 1, 0xF
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C

# name: (x86_64, aarch64); None where the ABI has no such call.
SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    "socket": (41, 198),
    "socketpair": (53, 199),
    "connect": (42, 203),
    "bind": (49, 200),
    "ioctl": (16, 29),
    "clone": (56, 220),
    "clone3": (435, 435),
    "unshare": (272, 97),
    "setns": (308, 268),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "shmget": (29, 194),
    "semget": (64, 190),
    "msgget": (68, 186),
    "mq_open": (240, 180),
    "sched_setaffinity": (203, 122),
}


def errno_action(code: int) -> int:
    """``SECCOMP_RET_ERRNO | code``: the call fails with ``-code``, nothing else happens."""
    return _RET_ERRNO | code


@dataclass(frozen=True)
class Rule:
    """Deny ``syscall`` with ``action``; with ``arg``, only when the argument test holds.

    ``test``: ``"any"`` (always), ``"ne"`` (``args[arg] & mask != value``: deny all but one
    value) or ``"eq"`` (``args[arg] & mask == value``) or ``"set"`` (``args[arg] & mask`` has a
    bit set). ``also_ne``: a second ``"ne"`` test (``(arg, mask, value)``) that denies too.
    """

    syscall: str
    action: int
    test: str = "any"
    arg: int = 0
    mask: int = 0xFFFFFFFF
    value: int = 0
    also_ne: tuple[int, int, int] | None = None


EACCES, EPERM, ENOSYS = (errno_action(c) for c in (errno.EACCES, errno.EPERM, errno.ENOSYS))
RULES: tuple[Rule, ...] = (
    Rule("socket", EACCES),
    Rule("socketpair", EACCES, "ne", 0, value=_AF_UNIX,
         also_ne=(1, _SOCK_TYPE_MASK, _SOCK_STREAM)),
    Rule("connect", EACCES),
    Rule("bind", EACCES),
    Rule("ioctl", EPERM, "eq", 1, value=_TIOCSTI),
    Rule("ioctl", EPERM, "eq", 1, value=_TIOCLINUX),
    Rule("clone", EPERM, "set", 0, mask=CLONE_NEW_FLAGS),
    Rule("clone3", ENOSYS),
    Rule("io_uring_setup", ENOSYS),
    Rule("io_uring_enter", ENOSYS),
    Rule("io_uring_register", ENOSYS),
    *(Rule(name, EPERM) for name in (
        "unshare", "setns", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
        "bpf", "perf_event_open", "userfaultfd", "add_key", "request_key", "keyctl", "mount",
        "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
        "fspick", "mount_setattr", "shmget", "semget", "msgget", "mq_open",
        "sched_setaffinity")),
)


def machine() -> str:
    return os.uname().machine


def supported(arch: str | None = None) -> bool:
    """Whether a filter can be built for ``arch`` (default: this machine)."""
    return (arch or machine()) in _ARCHES


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _rule_body(rule: Rule) -> list[bytes]:
    """The instructions after ``jeq NR``: they end in ``ret``, or fall through (no match)."""
    if rule.test == "any":
        return [_insn(_RET_K, rule.action)]
    load = _insn(_LD_W_ABS, 16 + 8 * rule.arg)
    masked = [_insn(_AND_K, rule.mask)] if rule.mask != 0xFFFFFFFF else []
    ret = _insn(_RET_K, rule.action)
    if rule.test == "set":
        return [load, _insn(_JSET_K, rule.mask, 0, 1), ret]
    if rule.test == "eq":
        return [load, *masked, _insn(_JEQ_K, rule.value, 0, 1), ret]
    # "ne": deny unless args[arg] & mask == value (and the also_ne argument too)
    body = [load, *masked, _insn(_JEQ_K, rule.value, 1, 0), ret]
    if rule.also_ne is not None:
        arg, mask, value = rule.also_ne
        body += [_insn(_LD_W_ABS, 16 + 8 * arg), _insn(_AND_K, mask),
                 _insn(_JEQ_K, value, 1, 0), ret]
    return body


def build(arch: str | None = None, rules: tuple[Rule, ...] = RULES) -> bytes:
    """The filter program for ``arch`` (default: this machine), as ``struct sock_filter``
    records (8 bytes each); ``ValueError`` for an architecture without a syscall table."""
    arch = arch or machine()
    if arch not in _ARCHES:
        raise ValueError(f"no seccomp syscall table for {arch!r}; known: {sorted(_ARCHES)}")
    column = 0 if arch == "x86_64" else 1
    head = [_insn(_LD_W_ABS, 4), _insn(_JEQ_K, _ARCHES[arch], 1, 0), _insn(_RET_K,
            RET_KILL_PROCESS), _insn(_LD_W_ABS, 0)]
    if arch == "x86_64":
        head += [_insn(_JGE_K, _X32_BIT, 0, 1), _insn(_RET_K, RET_KILL_PROCESS)]
    program = head
    for rule in rules:
        nr = SYSCALLS[rule.syscall][column]
        if nr is None:
            continue
        body = _rule_body(rule)
        if len(body) > 255:
            raise ValueError(f"rule for {rule.syscall} is too long for one jump")
        program += [_insn(_LD_W_ABS, 0), _insn(_JEQ_K, nr, 0, len(body)), *body]
    program.append(_insn(_RET_K, RET_ALLOW))
    return b"".join(program)
