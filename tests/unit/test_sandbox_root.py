"""Issue 41's attacks, one test per class: the host's files, FIFOs, devices, cgroups and mounts
are not in the minimal root; the verdict cannot be forged; a runaway recursion is a named stack
overflow; a call holds only its share of the cores; process mode, when chosen, cleans every
world-writable directory. Each test runs the attack and checks on the host that it failed.
"""

from __future__ import annotations

import math
import os
import resource
import sys
import time
import uuid
from pathlib import Path

import pytest
from sandbox_support import (
    FINISHES,
    IS_ROOT,
    MODE,
    PROCESS_PYTHON,
    REPO,
    calls_root,
    failure_text,
    no_stray_sandbox_processes,
    program_exception,
    sandbox_in,
)

from turnrl.sandbox import Sandbox
from turnrl.sandbox.child.mounts import _interpreter_dirs

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
]
__all__ = ["calls_root", "no_stray_sandbox_processes"]  # autouse fixtures, used by import
namespace_only = pytest.mark.skipif(MODE != "namespace", reason="no namespaces on this host")

ROOT_ENTRIES = {"dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "tmp", "usr"}
DEV_ENTRIES = {"fd", "null", "shm", "stderr", "stdin", "stdout", "urandom", "zero"}


def run(code: str, **limits):
    return sandbox_in(MODE, **{**FINISHES, **limits}).run(code)


# -- the minimal root: nothing of the host but the allow-list ----------------------------------


@namespace_only
def test_the_root_holds_only_the_allow_list():
    code = (
        "import os, json\n"
        "mounts = [l.split()[4] for l in open('/proc/self/mountinfo')]\n"
        "print(json.dumps([sorted(os.listdir('/')), sorted(os.listdir('/dev')), mounts]))\n"
    )
    result = run(code)
    assert result.ok, result
    import json

    top, dev, mounts = json.loads(result.stdout)
    allowed_tops = ROOT_ENTRIES | {d.strip("/").split("/")[0] for d in _interpreter_dirs()}
    assert set(top) <= allowed_tops, set(top) - allowed_tops
    assert set(dev) == DEV_ENTRIES
    host_mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text()
                   .splitlines()]
    leaked = [m for m in mounts if m in host_mounts and m not in (
        "/", "/tmp", "/proc", "/dev/shm", "/dev/null", "/dev/zero", "/dev/urandom")
        and not any(m == d or m.startswith(d + "/") for d in _interpreter_dirs())
        and not m.startswith(("/usr/lib", "/lib", "/etc/ld.so.cache"))]
    assert leaked == [], leaked  # e.g. /sys, /sys/fs/cgroup, /dev/pts, /work: not there


@namespace_only
def test_host_files_cannot_be_read_by_any_path(tmp_path_factory):
    token = f"RUN-SECRET-{uuid.uuid4().hex}"
    run_dir = Path("/var/tmp") / f"turnrl-sbx-run-{uuid.uuid4().hex[:8]}"  # a run's files, 0644
    (run_dir / "samples").mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text(token)
    (run_dir / "samples" / "step_1.jsonl").write_text(token)
    for path in (run_dir, run_dir / "samples"):
        path.chmod(0o755)
    targets = [run_dir / "metrics.jsonl", run_dir / "samples" / "step_1.jsonl",
               REPO / "pyproject.toml", Path("/etc/passwd"), Path("/etc/hostname")]
    try:
        files = [str(t) for t in targets]
        siblings = [str(p) for p in REPO.parent.iterdir() if p.is_dir() and not any(
            d == str(p) or d.startswith(f"{p}/") for d in _interpreter_dirs())]  # not ours
        folders = [str(REPO), str(run_dir), *siblings]
        code = (
            "import os\n"
            "print(os.getcwd())\n"
            f"for path in {files!r}:\n"
            "    try:\n"
            "        print('ESCAPED', open(path).read())\n"
            "    except OSError as exc:\n"
            "        print(type(exc).__name__)\n"
            f"for path in {folders!r}:\n"
            "    import os\n"
            "    print(sorted(os.listdir(path)) if os.path.exists(path) else False)\n"
        )
        result = run(code)
        assert result.ok, result
        assert token not in result.stdout and "ESCAPED" not in result.stdout, result
        cwd, *lines = result.stdout.splitlines()
        # a folder exists inside only as the way down to the interpreter or to the call's
        # working directory (a venv inside the checkout: the checkout holds `.venv` alone)
        ways = [*_interpreter_dirs(), cwd]
        expected = [str(sorted({d[len(f) + 1:].split("/")[0] for d in ways
                                if d.startswith(f + "/")}) or False) for f in folders]
        assert lines == ["FileNotFoundError"] * len(targets) + expected, result
    finally:
        import shutil

        shutil.rmtree(run_dir)


@namespace_only
def test_the_checkout_and_its_source_cannot_be_found():
    """Walk the whole root (but /proc) for the project's own files: none is there."""
    code = (
        "import os\n"
        "hits = []\n"
        "for top, dirs, files in os.walk('/'):\n"
        "    if top == '/':\n"
        "        dirs[:] = [d for d in dirs if d != 'proc']\n"
        "    for name in files:\n"
        "        if name in ('test_sandbox_root.py', 'CONVENTIONS.md', 'reliability.md',\n"
        "                    'metrics.jsonl') or top.endswith('turnrl/sandbox'):\n"
        "            hits.append(os.path.join(top, name))\n"
        "print(hits)\n"
    )
    result = run(code, wall_time_s=60.0, cpu_time_s=60.0)
    assert result.ok and result.stdout == "[]\n", result
    assert (REPO / "tests" / "unit" / "test_sandbox_root.py").exists()  # there on the host


@namespace_only
def test_a_host_fifo_cannot_be_written():
    fifo = f"/var/tmp/turnrl-sbx-fifo-{uuid.uuid4().hex[:8]}"
    os.mkfifo(fifo)
    os.chmod(fifo, 0o666)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        code = (f"import os\nfd = os.open({fifo!r}, os.O_WRONLY | os.O_NONBLOCK)\n"
                "os.write(fd, b'x' * 36)\nprint('ESCAPED')\n")
        result = run(code)
        assert "ESCAPED" not in result.stdout
        assert "FileNotFoundError" in failure_text(result), result
        assert os.read(reader, 100) == b""  # nothing reached the host's reader
    finally:
        os.close(reader)
        os.unlink(fifo)


@namespace_only
def test_host_devices_and_sockets_cannot_be_named():
    names = ["/dev/vda", "/dev/sda", "/dev/tty", "/dev/pts", "/dev/kmsg", "/dev/mem", "/run",
             "/var/run/docker.sock", "/sys", "/home", "/var/tmp"]
    result = run(f"import os\nprint([p for p in {names!r} if os.path.lexists(p)])\n")
    assert result.ok and result.stdout == "[]\n", result


@namespace_only
def test_other_cgroups_and_host_mounts_are_invisible():
    code = (
        "import os\n"
        "print(open('/proc/self/cgroup').read())\n"
        "print(open('/proc/self/mountinfo').read())\n"
        "for path in ('/sys/fs/cgroup', '/sys/fs/cgroup/memory'):\n"
        "    try:\n"
        "        print('ESCAPED', os.listdir(path))\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
    )
    result = run(code)
    assert result.ok and "ESCAPED" not in result.stdout, result
    host_cgroups = {line.split(":", 2)[2] for line in
                    Path("/proc/self/cgroup").read_text().splitlines()} - {"/"}
    for path in host_cgroups:  # the host's own cgroup path: not in what the code sees
        assert path not in result.stdout, path
    siblings = set()
    for controller in ("memory", "cpu", "pids", "unified"):
        base = Path("/sys/fs/cgroup", controller)
        if base.is_dir():
            siblings |= {p.name for p in base.iterdir() if p.is_dir() and len(p.name) > 6}
    assert not [s for s in siblings if s in result.stdout], siblings
    for host_only in (" /sys ", " /work ", " /dev/pts ", " /sys/fs/cgroup "):
        assert host_only not in result.stdout


# -- verdicts come from the host ----------------------------------------------------------------

FORGE = (
    "import json, os, sys\n"
    "forged = json.dumps({'exit': 0, 'exception': 'FORGED: all tests passed',\n"
    "                     'watchdog': False, 'ready': True, 'oom': False}).encode() + b'\\n'\n"
    "for fd in range(3, 256):\n"
    "    try:\n"
    "        os.write(fd, forged)\n"
    "    except OSError:\n"
    "        pass\n"
    "for fd in os.listdir('/proc/1/fd') if os.access('/proc/1/fd', os.R_OK) else []:\n"
    "    try:\n"
    "        os.write(os.open(f'/proc/1/fd/{fd}', os.O_WRONLY), forged)\n"
    "        print('ESCAPED into the supervisor')\n"
    "    except OSError:\n"
    "        pass\n"
    "print('FORGED: all tests passed')\n"
    "print('FORGED: all tests passed', file=sys.stderr)\n"
)


@pytest.mark.parametrize("ending", ["raise ValueError('real failure')", "raise SystemExit(3)",
                                    "import time\ntime.sleep(60)"])
def test_the_verdict_cannot_be_forged(ending):
    result = sandbox_in(MODE, wall_time_s=2.0, cpu_time_s=5.0).run(FORGE + ending)
    assert "ESCAPED" not in result.stdout
    assert "FORGED" not in (result.error or ""), result
    if ending.startswith("raise ValueError"):
        assert (result.exit_code, result.error) == (1, "exited with code 1"), result
        assert program_exception(result) == "ValueError: real failure"  # the program's text
        assert "ValueError: real failure" in result.observation()
    elif ending.startswith("raise SystemExit"):
        assert (result.exit_code, result.error) == (3, "exited with code 3"), result
    else:
        assert result.timed_out and result.exit_code is None, result
        assert result.error.startswith("TimeoutError"), result


def test_a_blocked_report_pipe_cannot_hide_the_exception():
    code = (  # fill every pipe it can reach until it would block, then fail
        "import os\n"
        "for fd in range(3, 256):\n"
        "    try:\n"
        "        os.set_blocking(fd, False)\n"
        "        while True:\n"
        "            os.write(fd, b'{' * 65536)\n"
        "    except OSError:\n"
        "        pass\n"
        "raise RuntimeError('the real cause')\n"
    )
    result = run(code)
    assert (result.exit_code, result.error) == (1, "exited with code 1"), result
    assert program_exception(result) == "RuntimeError: the real cause", result


# -- clear ends: stack overflow, CPU share ------------------------------------------------------


def test_a_runaway_recursion_is_a_stack_overflow_not_a_timeout():
    code = "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1)\nf(0)\n"
    result = run(code)
    assert not result.timed_out and result.error.startswith("killed: stack overflow"), result
    assert result.duration_s < FINISHES["wall_time_s"] / 2, result


def test_a_call_holds_only_its_share_of_the_cores():
    cores = len(os.sched_getaffinity(0))
    share = 0.5
    expected = max(1, math.ceil(share * cores))
    code = (  # 4 processes x 2 threads spinning for 1.5 s, then try to widen the affinity
        "import os, threading, time\n"
        "def spin():\n"
        "    end = time.time() + 1.5\n"
        "    while time.time() < end:\n"
        "        pass\n"
        "children = []\n"
        "for _ in range(4):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        threads = [threading.Thread(target=spin) for _ in range(2)]\n"
        "        [t.start() for t in threads]\n"
        "        [t.join() for t in threads]\n"
        "        os._exit(0)\n"
        "    children.append(pid)\n"
        "for pid in children:\n"
        "    os.waitpid(pid, 0)\n"
        "print(len(os.sched_getaffinity(0)))\n"
        "try:\n"
        "    os.sched_setaffinity(0, range(os.cpu_count()))\n"
        "    print('ESCAPED')\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    result = run(code, cpu_share=share, cpu_time_s=20.0)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.ok, result
    assert result.stdout.split() == [str(expected), "PermissionError"], result
    used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # host-side evidence: the call's processes together used at most its cores' worth
    assert used <= expected * wall * 1.1 + 0.3, (used, wall, expected, cores)


# -- process mode, chosen explicitly, cleans every world-writable directory --------------------


@pytest.mark.skipif(not IS_ROOT or PROCESS_PYTHON is None,
                    reason="leftovers are found by the call's uid: a root host")
def test_process_mode_cleans_every_world_writable_directory():
    from turnrl.sandbox.host import _world_writable_dirs

    token = f"turnrl-sbx-left-{uuid.uuid4().hex[:10]}"
    shared = [d for d in _world_writable_dirs() if os.access(d, os.W_OK)]
    assert "/run/lock" in shared or not os.path.isdir("/run/lock")
    code = ("import contextlib\n"
            f"for d in {shared!r}:\n"
            "    with contextlib.suppress(OSError):\n"
            f"        open(d + '/{token}', 'w').write('x')\n"
            f"print(sum(1 for d in {shared!r} if __import__('os').path.exists(d + '/{token}')))")
    result = Sandbox(isolation="process", python=PROCESS_PYTHON, **FINISHES).run(code)
    assert result.ok and int(result.stdout) >= 2, result  # it did plant files
    left = [d for d in shared if os.path.lexists(f"{d}/{token}")]
    for d in left:
        os.unlink(f"{d}/{token}")
    assert left == []


# -- graders run apart: a fresh sandbox with the hidden files, after the episode ---------------


def test_a_grader_runs_in_a_fresh_sandbox_with_files_the_agent_never_saw():
    hidden = "def test_add():\n    from solution import add\n    assert add(2, 3) == 5\n"
    agent = sandbox_in(MODE, **FINISHES)
    episode = agent.run("import os\nprint(sorted(os.listdir('.')))\n"
                        "open('solution.py', 'w').write('def add(a, b):\\n    return a + b\\n')")
    assert episode.ok and episode.stdout == "[]\n", episode  # no hidden test in its view
    grader = sandbox_in(MODE, **FINISHES)
    solution = "def add(a, b):\n    return a + b\n"
    graded = grader.run("import tests.test_hidden as t\nt.test_add()\nprint('passed')",
                        files={"solution.py": solution, "tests/__init__.py": "",
                               "tests/test_hidden.py": hidden})
    assert graded.ok and graded.stdout == "passed\n", graded
    with pytest.raises(ValueError, match="relative paths"):
        grader.run("print(1)", files={"../escape.py": "x"})
