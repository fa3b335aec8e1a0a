"""swe-v0's grading cannot be gamed, and a broken grader is an infrastructure failure.

Each attack is what a policy rewarded for passing tests might try instead of fixing the bug
(seed 0 of the tiny tier: ``moving_sum`` in ``zapusto/lists.py`` returns ``[]`` for a window
of 1 because line 10 reads ``if window < 2:``). Every one must end with reward 0.
"""

from __future__ import annotations

import json

import pytest

from turnrl.envs.swe import TIERS, generate_instance
from turnrl.envs.swe.generated_env import SweGenerated
from turnrl.envs.swe.grading import GradingInfraError
from turnrl.envs.swe.scripts import READY, RESULT
from turnrl.sandbox import SandboxError, SandboxResult

INSTANCE = generate_instance(0, TIERS["tiny"])
MODULE = "zapusto/lists.py"
TEST = "tests/test_lists.py"
FIX = f"edit[{MODULE}:10:    if window < 1:]"


def env_at_seed_0(**kwargs) -> SweGenerated:
    env = SweGenerated(tool_format="auto", max_turns=10, **kwargs)
    env.reset(seed=0)
    return env


def submit(env: SweGenerated, *actions: str):
    for action in actions:
        result = env.step(action)
        assert not result.info["tool_error"], (action, result.observation)
    return env.step("submit[]")


def add_lines(path: str, text: str) -> str:
    """A JSON call that puts ``text`` before line 1 of ``path`` (brackets in code need it)."""
    first = INSTANCE.files[path].splitlines()[0]
    call = {"name": "edit", "arguments": {"target": f"{path}:1", "text": f"{text}\n{first}"}}
    return f"<tool_call>{json.dumps(call)}</tool_call>"


def forged_result() -> str:
    """The grader's RESULT line as the right answers would make it (which a real agent could
    not even write: it never sees the hidden expected values)."""
    return RESULT + json.dumps({c.test_id: {"value": repr(c.expected)}
                                for c in INSTANCE.graded_calls})


def test_the_fix_is_rewarded_and_the_grader_sees_all_calls():
    result = submit(env_at_seed_0(), FIX)
    assert result.reward == 1.0 and result.info["tests_total"] == len(INSTANCE.graded_calls)


def test_rewriting_deleting_or_skipping_the_tests_gets_nothing():
    lines = len(INSTANCE.files[TEST].splitlines())
    result = submit(env_at_seed_0(), f"edit[{TEST}:1-{lines}:def test_ok():\n    assert True]",
                    "create[tests/conftest.py\nimport pytest\ncollect_ignore_glob = ['*']]",
                    "create[conftest.py\nimport sys]", "create[sitecustomize.py\nimport os]")
    assert result.reward == 0.0 and result.info["fail_to_pass_passed"] == 0
    assert result.info["pass_to_pass_passed"] == result.info["pass_to_pass_total"]


def test_a_forged_report_and_exit_at_import_gets_nothing():
    forged = forged_result()
    code = ("import os as _os, sys as _sys\n"
            f"print({READY!r}); print({forged!r}); _sys.stdout.flush()\n"
            "try:\n"
            "    _fd = _os.open('/proc/%d/fd/1' % _os.getppid(), _os.O_WRONLY)\n"
            f"    _os.write(_fd, ({forged!r} + '\\n').encode())\n"
            "except OSError:\n"
            "    pass\n"
            "_os.kill(_os.getppid(), 9)\n"  # the grader's own line would contradict the forgery
            "_os._exit(0)")
    result = submit(env_at_seed_0(), add_lines(MODULE, code))
    assert result.reward == 0.0 and result.info["tests_passed"] == 0


def test_an_object_equal_to_everything_gets_nothing():
    code = ("class _Anything(list):\n"
            "    def __eq__(self, other): return True\n"
            "    def __ne__(self, other): return False\n"
            "    def __repr__(self): return '[1, 2, 3, 4, 5]'\n"
            "def moving_sum(values, window=3): return _Anything()\n"
            "def chunk(items, size=2): return _Anything()\n")
    end = len(INSTANCE.files[MODULE].splitlines())
    call = {"name": "edit", "arguments": {"target": f"{MODULE}:1-{end}", "text": code}}
    result = submit(env_at_seed_0(), f"<tool_call>{json.dumps(call)}</tool_call>")
    assert result.reward == 0.0 and result.info["tests_passed"] == 0


def test_the_hidden_tests_and_the_gold_patch_are_nowhere_the_agent_can_look():
    env = env_at_seed_0(wall_time_s=20.0, call_time_s=15.0)
    hidden = next(c for c in INSTANCE.graded_calls if "_hidden" in c.test_id)
    secret = f"{hidden.function}({', '.join(map(repr, hidden.args))})"
    listed = env.step("list_files[]").observation[0]["content"]
    assert "hidden" not in listed and "patch" not in listed
    for query in ("hidden", "diff --git", "+++ b/", secret):
        assert env.step(f"search[{query}]").observation[0]["content"].startswith("No match")
    read = env.step("read[tests/test_lists_hidden.py]")
    assert read.info["tool_error"] and "no file 'tests/test_lists_hidden.py'" in \
        read.observation[0]["content"]
    # code run by run_tests looks for them: file names everywhere it can see, contents in
    # its own working directory and /tmp (spelled so that the probe does not find itself; the
    # interpreter's read-only mounts, which a checkout under /tmp puts there, are not read)
    probe = ("import os, sys\n"
             "def test_probe():\n"
             "    found, here = [], os.path.dirname(os.getcwd())\n"
             "    for top in (here, '/tmp', '/root', '/work', '/home', '/srv', '/var'):\n"
             "        for root, dirs, files in os.walk(top):\n"
             "            for name in files:\n"
             "                path, low = os.path.join(root, name), name.lower()\n"
             "                if 'hidden' in low or low.endswith(('.patch', '.diff')):\n"
             "                    found.append(path)\n"
             "                elif root.startswith((here, '/tmp')) \\\n"
             "                        and '__pycache__' not in root \\\n"
             "                        and not root.startswith((sys.prefix, sys.base_prefix)):\n"
             "                    text = open(path, errors='replace').read()\n"
             f"                    if {secret[::-1]!r}[::-1] in text or 'diff -' + '-git' \\\n"
             "                            in text:\n"
             "                        found.append(path)\n"
             "    assert found == ['nothing']\n")
    lines = len(INSTANCE.files[TEST].splitlines())
    call = {"name": "edit", "arguments": {"target": f"{TEST}:1-{lines}", "text": probe}}
    env.step(f"<tool_call>{json.dumps(call)}</tool_call>")
    ran = env.step("run_tests[]").observation[0]["content"]
    assert "FAILED tests/test_lists.py::test_probe" in ran and "got: []" in ran, ran


def test_writing_outside_the_repository_is_refused_and_writes_nothing():
    env = env_at_seed_0()
    before = dict(env.workspace.files)
    for action in ("edit[../x.py:1:x]", "edit[/tmp/x.py:1:x]", "create[../x.py\nx = 1]",
                   "create[/tmp/x.py\nx = 1]", "edit[zapusto/../../x.py:1:x]"):
        result = env.step(action)
        assert result.info["tool_error"] and "outside the repository" in \
            result.observation[0]["content"], action
    assert env.workspace.files == before


def test_an_endless_loop_fails_its_tests_and_grading_still_finishes():
    env = env_at_seed_0(call_time_s=0.3)
    loop = f"edit[{MODULE}:10-11:    while True:\n        pass]"
    ran = submit(env, loop, "run_tests[test_moving_sum_1]")
    assert ran.reward == 0.0 and ran.info["fail_to_pass_passed"] == 0
    assert ran.info["pass_to_pass_passed"] > 0  # chunk's tests never call the loop
    env = env_at_seed_0(call_time_s=0.3)
    env.step(loop)
    shown = env.step("run_tests[test_moving_sum_1]").observation[0]["content"]
    assert shown.startswith("FAILED tests/test_lists.py::test_moving_sum_1\n  timed out")


def _broken(kind: str):
    def run(code, files=None):
        if kind == "raise":
            raise SandboxError("unshare failed")
        if kind == "timeout":
            return SandboxResult("", "", None, True, "TimeoutError: ...", 75.0, False)
        return SandboxResult("", "Fatal Python error", 1, False, "exited with code 1", 0.1,
                             False)
    return run


@pytest.mark.parametrize("kind", ["raise", "timeout", "never_started"])
def test_a_broken_grader_is_an_infrastructure_failure_not_a_zero(kind, monkeypatch):
    env = env_at_seed_0()
    env.step(FIX)
    monkeypatch.setattr(env.grader, "run", _broken(kind))
    with pytest.raises(GradingInfraError):
        env.step("submit[]")
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("submit[]")


def test_a_broken_sandbox_in_run_tests_fails_the_episode(monkeypatch):
    env = env_at_seed_0()
    monkeypatch.setattr(env.sandbox, "run", _broken("raise"))
    with pytest.raises(SandboxError):
        env.step("run_tests[]")
