"""The programs that the SWE envs run inside :mod:`turnrl.sandbox`, as source text.

Each is a standard-library-only script; :func:`script` fills in its settings (a Python
literal in place of ``__SETTINGS__``). The repository is written under ``repo/`` of the
sandbox's working directory, so that the working directory itself, which is on ``sys.path``
of the sandbox's interpreter, holds no module of the agent's.

- :data:`VISIBLE_RUNNER`: ``run_tests`` on a generated repository. It runs pytest-style
  test functions without pytest (each under a timer) and prints one line per test, and for
  a failed ``assert f(...) == value`` the call's actual value.
- :data:`CALL_GRADER`: ``swe-v0``'s grader. It never imports the agent's code itself: each
  graded call runs in a forked child, which imports the package, calls the function and
  writes the result, encoded from exact built-in types only, to a pipe. A child that runs
  past its time is killed. The grader prints ``READY`` before any agent code can run and
  one ``RESULT`` line of JSON at the end; the host compares the results with expected
  values that never enter the sandbox.
- :data:`COMMAND_RUNNER`: runs a repository's test command (``swe-local-v0``), for
  ``run_tests`` and for grading alike, in a child process with no handle on the sandbox's
  output; prints ``READY``, then a ``RESULT`` line: exit status, whether it timed out, the
  last ``short test summary info`` section of pytest's ``-rA`` report and the output's tail.
"""

from __future__ import annotations

from typing import Any

READY = "TURNRL-SWE-READY"
"""The line a grading script prints once it runs, before any of the agent's code can."""
RESULT = "TURNRL-SWE-RESULT "
"""The prefix of a grading script's one line of JSON results."""


def script(template: str, settings: dict[str, Any]) -> str:
    """Return ``template`` with ``settings`` written in as a Python literal (``repr``);
    every value must be a literal (str, int, float, bool, None, list, tuple, dict)."""
    return template.replace("__SETTINGS__", repr(settings))


_PROLOGUE = '''\
import os, sys
HERE = os.getcwd()
# nothing of the agent's may shadow a module imported below: its files live in repo/
sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != HERE]
'''

_PROTECT = '''
SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGPIPE",
           "SIGALRM", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGVTALRM", "SIGPROF")


def set_signals(handling):
    import signal
    for name in SIGNALS:
        try:
            signal.signal(getattr(signal, name), getattr(signal, handling))
        except (AttributeError, OSError, ValueError):
            pass


def protect():
    """Ignore the catchable signals and make this process non-dumpable, so that the code
    under test, which runs as the same user, cannot stop it with a signal or read or write
    its memory and file descriptors through /proc."""
    set_signals("SIG_IGN")
    try:  # turnrl.sandbox's worker is non-dumpable already; this holds without it too
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:
        pass
'''

VISIBLE_RUNNER = _PROLOGUE + '''
import ast, importlib.util, signal, traceback
SETTINGS = __SETTINGS__
REPO = os.path.join(HERE, "repo")
os.chdir(REPO)
sys.path.insert(0, REPO)


class TestTimeout(BaseException):
    pass


def on_alarm(signum, frame):
    raise TestTimeout()


signal.signal(signal.SIGALRM, on_alarm)


def test_files():
    found = []
    for root, dirs, files in os.walk("."):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in files:
            if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
                found.append(os.path.relpath(os.path.join(root, name)).replace(os.sep, "/"))
    return sorted(found)


def short(value, size=300):
    text = value if isinstance(value, str) else safe_repr(value)
    return text if len(text) <= size else text[:size - 3] + "..."


def safe_repr(value):
    try:
        return repr(value)
    except BaseException as error:
        return "<unprintable %s>" % type(error).__name__


def timed(call):
    signal.setitimer(signal.ITIMER_REAL, SETTINGS["per_test_s"])
    try:
        return call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def where(error):
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if frame.filename.startswith(REPO + os.sep):
            return " (%s:%d)" % (os.path.relpath(frame.filename), frame.lineno)
    return ""


def explain(error, path):
    frames = [(f, n) for f, n in traceback.walk_tb(error.__traceback__)
              if os.path.abspath(f.f_code.co_filename) == os.path.abspath(path)]
    if not frames:
        return ["AssertionError: " + short(str(error))]
    frame, line = frames[-1]
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (OSError, SyntaxError, ValueError):
        return ["AssertionError at %s:%d" % (path, line)]
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.Assert)
                 and n.lineno <= line <= (n.end_lineno or n.lineno)), None)
    if node is None:
        return ["AssertionError: " + short(str(error))]
    lines = ["assert " + short(ast.unparse(node.test), 200)]
    test = node.test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        try:
            code = compile(ast.Expression(test.left), path, "eval")
            got = timed(lambda: eval(code, frame.f_globals, dict(frame.f_locals)))
            lines.append("got: " + short(safe_repr(got)))
        except TestTimeout:
            lines.append("got: (timed out)")
        except BaseException as again:
            lines.append("got: %s: %s" % (type(again).__name__, short(str(again), 150)))
    if error.args:
        lines.append("message: " + short(str(error.args[0]), 150))
    return lines


def run_one(test):
    try:
        timed(test)
        return None
    except TestTimeout:
        return ["timed out after %g s" % SETTINGS["per_test_s"]]
    except AssertionError as error:
        return explain(error, test.__code__.co_filename)
    except BaseException as error:
        return ["%s: %s%s" % (type(error).__name__, short(str(error), 200), where(error))]


def collect(target):
    path, _, name = target.partition("::")
    files = test_files()
    if path and path.endswith(".py"):
        if not os.path.isfile(path):
            print("No test file %r; the test files are: %s" % (path, ", ".join(files)))
            sys.exit(0)
        files = [path]
    elif path:
        name = path
    return files, name


def main():
    files, wanted = collect(SETTINGS["target"])
    results = []
    for path in files:
        module_name = "_tests_" + path[:-3].replace("/", "_").replace(".", "_")
        try:
            spec = importlib.util.spec_from_file_location(module_name, os.path.abspath(path))
            module = importlib.util.module_from_spec(spec)
            timed(lambda: spec.loader.exec_module(module))
        except BaseException as error:
            results.append((path, ["%s: %s%s" % (type(error).__name__, short(str(error), 200),
                                                 where(error))]))
            continue
        for name, test in list(vars(module).items()):
            if name.startswith("test_") and callable(test) and (not wanted or name == wanted):
                if getattr(test, "__code__", None) is not None:
                    results.append(("%s::%s" % (path, name), run_one(test)))
    report(results, files, wanted)


def report(results, files, wanted):
    if not results:
        print("No tests found" + (" named %r" % wanted if wanted else "") + ".")
        return
    failed = [(test, lines) for test, lines in results if lines is not None]
    every = len(results) <= SETTINGS["list_up_to"]
    for test, lines in results:
        if lines is None and every:
            print("PASSED " + test)
        elif lines is not None:
            print("FAILED " + test)
            for line in lines[:4]:
                print("  " + line)
    print("%d passed, %d failed" % (len(results) - len(failed), len(failed)))


main()
'''

CALL_GRADER = _PROLOGUE + _PROTECT + '''
import json, select, time
SETTINGS = __SETTINGS__
REPO = os.path.join(HERE, "repo")


def encode(value, depth=0):
    """Python source of value, from exact built-in types only (anything else raises)."""
    kind = type(value)
    if depth > 60:
        raise ValueError("nested too deeply")
    if value is None or kind is bool:
        return "True" if value is True else "False" if value is False else "None"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        return float.__repr__(value)
    if kind is str:
        return str.__repr__(value)
    if kind is list:
        return "[" + ", ".join(encode(item, depth + 1) for item in value) + "]"
    if kind is tuple:
        items = [encode(item, depth + 1) for item in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if kind is dict:
        return "{" + ", ".join(encode(k, depth + 1) + ": " + encode(v, depth + 1)
                               for k, v in dict.items(value)) + "}"
    raise TypeError("a %s is not a plain value" % kind.__name__)


def child(module, function, args, write_end):
    """Runs in the forked child: the only place the agent's code runs."""
    set_signals("SIG_DFL")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")  # under memory pressure the kernel kills a child first
    except OSError:
        pass
    try:
        import importlib
        os.chdir(REPO)
        sys.path.insert(0, REPO)
        value = getattr(importlib.import_module(module), function)(*args)
        message = {"value": encode(value)}
    except BaseException as error:
        try:
            message = {"error": type(error).__name__}
        except BaseException:
            message = {"error": "an exception"}
    os.write(write_end, (json.dumps(message) + "\\n").encode())
    os._exit(0)


def run_call(module, function, args, limit):
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError as error:
        os.close(read_end)
        os.close(write_end)
        return {"error": "could not start the call (%s)" % type(error).__name__}
    if pid == 0:
        os.close(read_end)
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
        child(module, function, args, write_end)
    os.close(write_end)
    data, end = b"", time.monotonic() + limit
    while b"\\n" not in data and len(data) < SETTINGS["max_result_bytes"]:
        left = end - time.monotonic()
        if left <= 0 or not select.select([read_end], [], [], left)[0]:
            break
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        data += chunk
    os.close(read_end)
    for target in (-pid, pid):
        try:
            os.kill(target, 9)
        except OSError:
            pass
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass
    if b"\\n" not in data:
        timed_out = time.monotonic() >= end
        return {"error": "timed out" if timed_out else "no result"}
    try:
        message = json.loads(data.split(b"\\n", 1)[0])
    except ValueError:
        return {"error": "unreadable result"}
    return message if isinstance(message, dict) else {"error": "unreadable result"}


def main():
    print(SETTINGS["ready"], flush=True)
    protect()
    results = {}
    deadline = time.monotonic() + SETTINGS["budget_s"]
    for test_id, module, function, args in SETTINGS["calls"]:
        if time.monotonic() >= deadline:
            results[test_id] = {"error": "not run: the grading time ran out"}
            continue
        limit = min(SETTINGS["per_call_s"], max(deadline - time.monotonic(), 0.01))
        results[test_id] = run_call(module, function, args, limit)
    sys.stdout.write(SETTINGS["result"] + json.dumps(results) + "\\n")
    sys.stdout.flush()


main()
'''

COMMAND_RUNNER = _PROLOGUE + _PROTECT + '''
import json, re, subprocess
SETTINGS = __SETTINGS__
REPO = os.path.join(HERE, "repo")
BOOT = ("import os, sys\\n"
        "import pytest\\n"  # imported before the repository is on sys.path: not shadowed
        "sys.path.insert(0, os.getcwd())\\n"
        "sys.exit(pytest.main(sys.argv[1:]))\\n")


def argv():
    words = list(SETTINGS["command"])
    if words[:3] in (["python", "-m", "pytest"], ["python3", "-m", "pytest"]):
        words = ["pytest"] + words[3:]
    if words[:1] == ["pytest"]:
        return [sys.executable, "-I", "-c", BOOT] + words[1:] + SETTINGS["args"]
    if words[:1] in (["python"], ["python3"]):
        words[0] = sys.executable
    return words + SETTINGS["args"]


def summary(output):
    lines = output.splitlines()
    heads = [i for i, line in enumerate(lines)
             if re.fullmatch(r"=+ short test summary info =+", line.strip())]
    if not heads:
        return []
    section = []
    for line in lines[heads[-1] + 1:]:
        if line.startswith("="):
            break
        section.append(line)
    return section


def main():
    print(SETTINGS["ready"], flush=True)
    protect()
    timed_out, code, output = False, None, b""
    try:
        process = subprocess.Popen(argv(), cwd=REPO, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   close_fds=True, start_new_session=True)
    except OSError as error:
        sys.stdout.write(SETTINGS["result"] + json.dumps({"start_error": str(error)}) + "\\n")
        return
    try:
        output, _ = process.communicate(timeout=SETTINGS["budget_s"])
        code = process.returncode
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(process.pid, 9)
        except OSError:
            pass
        output, _ = process.communicate()
    # the sandbox's working directory is random: name it as the repository's root instead
    text = output.decode("utf-8", "replace").replace(REPO + os.sep, "").replace(REPO, ".")
    result = {"exit_code": code, "timed_out": timed_out, "summary": summary(text),
              "tail": text[-SETTINGS["tail_chars"]:]}
    sys.stdout.write(SETTINGS["result"] + json.dumps(result) + "\\n")
    sys.stdout.flush()


main()
'''
