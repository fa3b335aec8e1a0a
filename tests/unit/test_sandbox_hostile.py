"""Hostile programs against both isolation modes: escapes, sockets of every family, devices,
ttys, signals, exhaustion and leftovers. Each program tries one thing and prints ``ESCAPED``
if it worked; each test asserts that it did not (and, where the host can see it, that nothing
reached the host), and that the call ends with a clear error line.

``PRELUDE`` gives every program ``libc`` (raw system calls, past any Python-level patch) and
``denied(rc)``: ``-1`` becomes ``OSError: [Errno N] ...`` (the error the agent sees), any
other result prints ``ESCAPED``.
"""

from __future__ import annotations

import contextlib
import os
import pty
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest
from sandbox_support import (
    FINISHES,
    IS_ROOT,
    MODES,
    calls_root,
    expect_error,
    failure_text,
    no_stray_sandbox_processes,
    sandbox_in,
)

from turnrl.sandbox import cgroup, uids

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
__all__ = ["calls_root", "no_stray_sandbox_processes"]  # autouse fixtures, used by import

X86_64 = os.uname().machine == "x86_64"
PRELUDE = (
    "import ctypes, errno, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.syscall.restype = ctypes.c_long\n"
    "def denied(rc):\n"
    "    if rc != -1:\n"
    "        print('ESCAPED', rc)\n"
    "        raise SystemExit(0)\n"
    "    code = ctypes.get_errno()\n"
    "    raise OSError(code, os.strerror(code))\n"
)
EPERM = "[Errno 1] Operation not permitted"
EACCES = "[Errno 13] Permission denied"
ENOSYS = "[Errno 38] Function not implemented"
DENIED_FILE = ("PermissionError", "FileNotFoundError", "Read-only file system")


def run_hostile(mode: str, code: str, **limits) -> tuple[str, str]:
    """Run ``PRELUDE + code``; return (error line, stdout); fail if it printed ESCAPED."""
    result = sandbox_in(mode, **{**FINISHES, **limits}).run(PRELUDE + code)
    assert "ESCAPED" not in result.stdout, result
    assert result.error is not None, result
    expect_error(result, failure_text(result))  # the agent sees what failed
    return failure_text(result), result.stdout


# -- sockets of every family: socket(2) is denied by the seccomp filter in both modes, and the
# -- socket module says so in one clear line before the kernel is asked -------------------------

FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16, "AF_PACKET": 17,
            "AF_ALG": 38, "AF_VSOCK": 40, "AF_BLUETOOTH": 31}
SOCKETS_DISABLED = "PermissionError: [Errno 13] sockets are disabled in the sandbox"


def names_family(error: str, name: str) -> bool:
    """The clear refusal, naming the family (by number where this Python lacks the name)."""
    family = FAMILIES[name]
    return error.startswith(SOCKETS_DISABLED) and (
        f"({name})" in error or f"(address family {family})" in error)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", FAMILIES.keys())
def test_no_socket_of_any_family(mode, name):
    family = FAMILIES[name]
    for module in ("socket", "_socket"):  # what code would write: one clear line
        code = f"import {module}\n{module}.socket({family}, 1, 0)\nprint('ESCAPED')\n"
        error, _ = run_hostile(mode, code)
        assert names_family(error, name), error
    error, _ = run_hostile(mode, f"denied(libc.socket({family}, 1, 0))\n")  # past Python
    assert EACCES in error  # the real barrier: the seccomp filter


class HostListener:
    """A host AF_UNIX server (path or abstract name) that counts who reached it."""

    def __init__(self, address: str, mode: int | None = None) -> None:
        self.address, self.accepted = address, 0
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(address)
        if mode is not None:
            os.chmod(address, mode)
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.running:
            try:
                client, _ = self.server.accept()
            except OSError:
                continue
            self.accepted += 1
            with client, contextlib.suppress(OSError):
                client.sendall(b"HOST-REPLY")

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.server.close()
        if not self.address.startswith("\0"):
            Path(self.address).unlink(missing_ok=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["root_only_path", "world_writable_path", "abstract"])
def test_host_unix_sockets_are_unreachable(mode, kind):
    name = f"turnrl-sbx-{uuid.uuid4().hex[:10]}"
    address = {"root_only_path": f"/var/tmp/{name}.sock",
               "world_writable_path": f"/var/tmp/{name}-w.sock", "abstract": f"\0{name}"}[kind]
    listener = HostListener(address, {"root_only_path": 0o600,
                                      "world_writable_path": 0o777}.get(kind))
    try:
        with socket.socket(socket.AF_UNIX) as own:  # reachable from the host
            own.connect(address)
            assert own.recv(64) == b"HOST-REPLY"
        code = ("import socket\ns = socket.socket(socket.AF_UNIX)\n"
                f"s.connect({address!r})\nprint('ESCAPED', s.recv(64))\n")
        error, _ = run_hostile(mode, code)
        assert names_family(error, "AF_UNIX"), error
        raw = f"import _socket\ns = _socket.socket(1, 1)\ns.connect({address!r})\nprint('ESCAPED')"
        assert names_family(run_hostile(mode, raw)[0], "AF_UNIX")
        pair = ("import socket\na, b = socket.socketpair()\n"
                f"a.connect({address!r})\nprint('ESCAPED')")
        assert run_hostile(mode, pair)[0].startswith(f"{SOCKETS_DISABLED} (connect on AF_UNIX)")
        c_type = ("import _socket\ns = _socket.socket.__mro__[-2](1, 1)\n"  # past the patch
                  f"s.connect({address!r})\nprint('ESCAPED')")
        assert EACCES in run_hostile(mode, c_type)[0]  # the kernel's refusal
        assert listener.accepted == 1  # only the host's own connection
    finally:
        listener.close()


@pytest.mark.parametrize("mode", MODES)
def test_datagram_socketpair_cannot_sendto_a_host_socket(mode):
    code = "import socket\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n" \
           "a.sendto(b'x', '/dev/log')\nprint('ESCAPED')\n"
    error = run_hostile(mode, code)[0]
    assert error.startswith(f"{SOCKETS_DISABLED} (socketpair of AF_UNIX SOCK_DGRAM)"), error
    raw = code.replace("socket.socketpair(", "socket._socket.socketpair(")  # past the patch
    assert EACCES in run_hostile(mode, raw)[0]  # the kernel's refusal


@pytest.mark.parametrize("mode", MODES)
def test_io_uring_is_unavailable(mode):  # its opcodes could open and connect sockets
    code = "buf = ctypes.create_string_buffer(120)\ndenied(libc.syscall(425, 4, buf))\n"
    assert ENOSYS in run_hostile(mode, code)[0]


# -- namespaces, privileges, other processes ---------------------------------------------------

CLONE_NEWUSER, CLONE_NEWNET, SIGCHLD = 0x10000000, 0x40000000, 17
ESCAPES = {
    "unshare_user_namespace": (f"denied(libc.unshare({CLONE_NEWUSER}))\n", EPERM),
    "unshare_network_namespace": (f"denied(libc.unshare({CLONE_NEWNET}))\n", EPERM),
    "clone_into_user_namespace": (
        f"denied(libc.syscall(56 if {X86_64} else 220, {CLONE_NEWUSER | SIGCHLD}, 0, 0, 0, 0))\n",
        EPERM),
    "setns_into_pid1_network": (
        "fd = os.open('/proc/1/ns/net', os.O_RDONLY)\ndenied(libc.setns(fd, 0))\n",
        "PermissionError", EPERM),
    "mount_a_tmpfs": ("denied(libc.mount(b'none', b'/mnt', b'tmpfs', 0, None))\n", EPERM),
    "chroot": ("os.chroot('/tmp')\nprint('ESCAPED')\n", "PermissionError"),
    "become_root": ("os.setuid(0)\nprint('ESCAPED')\n", "PermissionError"),
    "ptrace_pid1": ("denied(libc.ptrace(16, 1, 0, 0))\n", EPERM),  # PTRACE_ATTACH
    "read_pid1_memory": (
        "buf = ctypes.create_string_buffer(8)\n"
        "iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)\n"
        "denied(libc.process_vm_readv(1, iov, 1, iov, 1, 0))\n", EPERM),
    "pid1_root_directory": ("print('ESCAPED', os.listdir('/proc/1/root/'))\n",
                            "PermissionError"),
    "session_keyring": ("denied(libc.syscall(250, 0, -3, 0, 0, 0))\n", EPERM),  # KEYCTL_GET_ID
    "bpf": ("buf = ctypes.create_string_buffer(128)\ndenied(libc.syscall(321, 0, buf, 128))\n",
            EPERM),
    "perf_event_open": ("buf = ctypes.create_string_buffer(128)\n"
                        "denied(libc.syscall(298, buf, 0, -1, -1, 0))\n", EPERM),
    "userfaultfd": ("denied(libc.syscall(323, 0))\n", EPERM),
    "sysv_shared_memory": ("denied(libc.shmget(0, 4096, 0o1600))\n", EPERM),  # IPC_CREAT
    "posix_message_queue": ("denied(libc.syscall(240, b'q', 0o100 | 2, 0o600, None))\n", EPERM),
    "spare_itself_from_the_oom_killer": (  # the supervisor must stay the OOM killer's last pick
        "assert open('/proc/self/oom_score_adj').read().strip() == '1000', 'ESCAPED'\n"
        "open('/proc/self/oom_score_adj', 'w').write('-1000')\n", "PermissionError"),
}
if X86_64:  # another ABI's numbers would slip past the table: the process is killed
    ESCAPES["x32_syscall"] = ("libc.syscall(0x40000000 | 39)\nprint('ESCAPED')\n", "SIGSYS")
    ESCAPES["i386_int80"] = (
        "import mmap\n"
        "code = bytes([0xb8, 0x14, 0, 0, 0, 0xcd, 0x80, 0xc3])\n"  # mov eax, 20; int 0x80; ret
        "page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
        "page.write(code)\n"
        "address = ctypes.addressof(ctypes.c_char.from_buffer(page))\n"
        "print('ESCAPED', ctypes.CFUNCTYPE(ctypes.c_int)(address)())\n", "SIGSYS")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("code", "fragments"), [(c, f) for c, *f in ESCAPES.values()],
                         ids=ESCAPES.keys())
def test_escape_is_denied(mode, code, fragments):
    error, _ = run_hostile(mode, code)
    assert any(fragment in error for fragment in fragments), error


# -- files, devices and ttys -------------------------------------------------------------------


@pytest.fixture
def root_only_file(tmp_path_factory):
    path = Path("/var/tmp") / f"turnrl-sbx-secret-{uuid.uuid4().hex[:10]}"
    path.write_text("TOPSECRET")
    path.chmod(0o600)
    yield path
    path.unlink(missing_ok=True)


@pytest.mark.skipif(not IS_ROOT, reason="root's files: the host must be root")
@pytest.mark.parametrize("mode", MODES)
def test_root_only_files_are_unreadable(mode, root_only_file):
    denied = "FileNotFoundError" if mode == "namespace" else "PermissionError"  # not there
    error, _ = run_hostile(mode, f"print('ESCAPED', open({str(root_only_file)!r}).read())\n")
    assert denied in error
    error, _ = run_hostile(mode, "print('ESCAPED', open('/etc/shadow').read())\n")
    assert denied in error


@pytest.mark.skipif(not IS_ROOT or not os.path.isdir("/root"), reason="needs root and /root")
@pytest.mark.parametrize("mode", MODES)
def test_roots_home_is_hidden_or_closed(mode):
    secret = Path("/root") / f"turnrl-sbx-home-{uuid.uuid4().hex[:10]}"
    secret.write_text("in root's home")
    secret.chmod(0o644)  # readable by anyone who can reach it
    try:
        error, _ = run_hostile(mode, f"print('ESCAPED', open({str(secret)!r}).read())\n")
        assert any(f in error for f in ("PermissionError", "FileNotFoundError")), error
    finally:
        secret.unlink()


@pytest.mark.skipif(not IS_ROOT, reason="the host's pty is root's only when the host is root")
@pytest.mark.parametrize("mode", MODES)
def test_host_terminal_cannot_be_written(mode):
    master, slave = pty.openpty()
    try:
        path = os.ttyname(slave)
        os.chmod(path, 0o620)
        error, _ = run_hostile(mode, f"open({path!r}, 'w').write('INJECTED')\nprint('ESCAPED')\n")
        assert any(f in error for f in DENIED_FILE), error
        os.set_blocking(master, False)
        with pytest.raises(BlockingIOError):
            os.read(master, 100)  # nothing reached the terminal
    finally:
        os.close(master)
        os.close(slave)


DEVICES = {
    "dev_mem": "open('/dev/mem', 'rb').read(1)",
    "dev_kmsg_write": "open('/dev/kmsg', 'w').write('turnrl sandbox was here')",
    "mknod_memory_device": "os.mknod('/tmp/mem', 0o20600, os.makedev(1, 1))",
    "tiocsti_terminal_injection": "import fcntl, termios\nfcntl.ioctl(0, termios.TIOCSTI, b'x')",
    "write_proc_sys": "open('/proc/sys/kernel/hostname', 'w').write('pwned')",
    "hardlink_a_host_file": "os.link('/etc/shadow', 'shadow')",
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("code", DEVICES.values(), ids=DEVICES.keys())
def test_devices_and_kernel_interfaces_are_denied(mode, code):
    error, _ = run_hostile(mode, code + "\nprint('ESCAPED')\n")
    assert any(f in error for f in (*DENIED_FILE, "Operation not permitted",
                                    "Invalid cross-device link")), error


# -- exhaustion of the whole call, and what it leaves behind ------------------------------------


@pytest.mark.skipif(not cgroup.available(), reason="no memory cgroup on this host: per process")
@pytest.mark.parametrize("mode", MODES)
def test_memory_limit_counts_every_process_of_the_call(mode):
    code = (  # six children, each 60% of the limit: fine per process, 3.6x the limit together
        "import os, time\n"
        "children = []\n"
        "for _ in range(6):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        block = b'x' * int(0.6 * 128 * 2**20)\n"  # written, so really resident
        "        time.sleep(2)\n"
        "        os._exit(0)\n"
        "    children.append(pid)\n"
        "held = sum(os.waitpid(pid, 0)[1] == 0 for pid in children)\n"
        "print('ESCAPED' if held == 6 else f'{held} of 6 children kept their memory')\n"
    )
    error, _ = run_hostile(mode, code, memory_mb=128, wall_time_s=30.0)
    assert error.startswith("killed: memory limit (128 MiB for the whole call"), error


@pytest.mark.parametrize("mode", MODES)
def test_deep_recursion_ends_with_a_clear_error(mode):
    """``sys.setrecursionlimit(10**7)`` then endless recursion: named a stack overflow by the
    host (not a TimeoutError at the wall clock), in well under the wall limit."""
    code = "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1)\nf(0)\n"
    result = sandbox_in(mode, **{**FINISHES, "memory_mb": 96, "cpu_time_s": 20.0}).run(code)
    assert not result.timed_out and result.error.startswith("killed: stack overflow"), result
    assert result.duration_s < 10, result
    assert "(sandbox) stack overflow: recursion deeper than memory_mb=96" in result.stderr
    c_stack = "import sys\nsys.setrecursionlimit(10**7)\nx = []\nfor _ in range(10**6):\n" \
              "    x = [x]\nrepr(x)\n"
    result = sandbox_in(mode, **FINISHES).run(c_stack)
    assert not result.timed_out and result.error is not None, result
    assert "stack overflow" in result.error or "RecursionError" in result.stderr, result


@pytest.mark.parametrize("mode", MODES)
def test_nothing_is_left_behind(mode):
    token = f"turnrl-sbx-left-{uuid.uuid4().hex[:10]}"
    places = [f"/tmp/{token}", f"/var/tmp/{token}", f"/dev/shm/{token}"]
    code = "import contextlib, os\n"  # namespace mode: /var/tmp is read-only, the rest private
    code += "".join(f"with contextlib.suppress(OSError):\n    open({p!r}, 'w').write('x')\n"
                    for p in places)
    code += f"os.mkdir('/tmp/{token}.d')\nopen('/tmp/{token}.d/f', 'w').write('x')\n"
    result = sandbox_in(mode, **FINISHES).run(code)
    places.append(f"/tmp/{token}.d")
    written = [p for p in places if os.path.lexists(p)]
    for path in written:  # clean up before asserting
        shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    assert result.ok and written == [], (written, result)
    if cgroup.available():  # every call's memory cgroup was removed
        probe = cgroup.create(64 << 20)
        assert probe is not None
        probe.remove()
        parent = os.path.dirname(probe.path)
        mine = f"turnrl-sandbox-{os.getpid()}-"
        assert [n for n in os.listdir(parent) if n.startswith(mine)] == []


def test_no_filter_no_sandbox(monkeypatch):
    from turnrl.sandbox import Sandbox, SandboxError, seccomp

    with pytest.raises(ValueError, match="no seccomp syscall table for 'riscv64'"):
        seccomp.build("riscv64")
    program = seccomp.build("x86_64")
    assert len(program) % 8 == 0 and program.endswith(
        seccomp._insn(seccomp._RET_K, seccomp.RET_ALLOW))
    monkeypatch.setattr(seccomp, "machine", lambda: "riscv64")
    with pytest.raises(SandboxError, match="no system-call filter for this CPU"):
        Sandbox().run("print(1)")


# -- attacks on the host's own bookkeeping ------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_junk_on_the_worker_pipe_cannot_hide_the_exit_status(mode):
    code = ("import os\nfor fd in range(3, 64):\n    try:\n"
            "        os.write(fd, b'[' * 5000 + b'\\n')\n    except OSError:\n        pass\n"
            "raise SystemExit(3)\n")
    result = sandbox_in(mode, **FINISHES).run(code)
    assert result.exit_code == 3 and result.error == "exited with code 3", result


@pytest.mark.parametrize("mode", MODES)
def test_a_tree_deeper_than_pythons_recursion_limit_is_removed(mode):
    code = ("import os\nprint(os.getcwd())\n"
            "for _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\nprint('deep')")
    result = sandbox_in(mode, **FINISHES).run(code)  # must not raise on the host
    workdir, deep = result.stdout.splitlines()
    assert deep == "deep", result
    assert not os.path.lexists(workdir)  # removed, whatever its depth


@pytest.mark.skipif(not IS_ROOT, reason="the victim must be out of the code's reach: root host")
@pytest.mark.parametrize("mode", MODES)
def test_a_working_directory_swapped_for_a_symlink_is_not_followed(mode, monkeypatch):
    # the working directory directly in /tmp (sticky, world-writable), as outside the tests, so
    # the code may rename it (calls_root's parents are root's, 0700: the attack would not run)
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    victim = Path("/var/tmp") / f"turnrl-sbx-victim-{uuid.uuid4().hex[:10]}"
    (victim / "sub").mkdir(parents=True)
    victim.chmod(0o755)
    try:  # namespace mode: the swap happens in the private /tmp; process mode: on the host
        code = ("import os\nwd = os.getcwd()\nos.rename(wd, wd + '-moved')\n"
                f"os.symlink({str(victim)!r}, wd)\nprint(wd)\n")
        result = sandbox_in(mode, **FINISHES).run(code)
        assert result.ok and result.stdout.startswith("/tmp/turnrl-sandbox-"), result
        assert victim.stat().st_mode & 0o777 == 0o755 and (victim / "sub").is_dir(), result
        workdir = result.stdout.strip()
        assert not os.path.lexists(workdir) and not os.path.lexists(workdir + "-moved")
    finally:
        shutil.rmtree(victim)


@pytest.mark.skipif(not IS_ROOT, reason="leftovers are found by the call's uid: root host")
@pytest.mark.parametrize("mode", MODES)
def test_leftovers_in_nested_world_writable_directories_are_removed(mode):
    shared = Path("/tmp") / f"turnrl-sbx-shared-{uuid.uuid4().hex[:10]}"  # like /tmp/ray/...
    (shared / "session").mkdir(parents=True)
    for directory in (shared, shared / "session"):
        directory.chmod(0o777)
    try:  # namespace mode: the host's /tmp is not there (a private one is)
        planted = str(shared / "session" / "planted")
        code = (f"try:\n    open({planted!r}, 'w').write('x')\n    print('planted')\n"
                "except OSError as exc:\n    print(type(exc).__name__)\n")
        result = sandbox_in(mode, **FINISHES).run(code)
        assert result.stdout == ("planted\n" if mode == "process" else "FileNotFoundError\n")
        assert list((shared / "session").iterdir()) == []
    finally:
        shutil.rmtree(shared)


@pytest.mark.skipif(not IS_ROOT, reason="per-call uids are for root hosts")
def test_a_uid_held_by_another_host_process_is_never_handed_out(monkeypatch):
    import itertools
    import subprocess

    monkeypatch.setattr(uids, "_counter", itertools.count(0))
    index = (os.getpid() * 4096) % uids.SANDBOX_UID_SPAN  # what claim() would try first
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         f"fd = os.open({uids._lock_file_path()!r}, os.O_RDWR)\n"
         f"fcntl.lockf(fd, fcntl.LOCK_EX, 1, {index})\n"
         "print('held', flush=True)\ntime.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        uid = uids.claim()
        try:
            assert uid != uids.SANDBOX_UID_BASE + index
        finally:
            uids.release(uid)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.skipif(not IS_ROOT, reason="per-call uids are for root hosts")
def test_nothing_keeps_running_as_a_calls_uid():
    import subprocess

    uid = uids.claim()
    try:
        daemon = subprocess.Popen(["sleep", "60"], user=uid, group=uid, extra_groups=[],
                                  start_new_session=True)
        assert uids.processes_of(uid) == [daemon.pid]
        uids.kill_all(uid)
        assert daemon.wait(timeout=5) == -9 and uids.processes_of(uid) == []
    finally:
        uids.release(uid)
