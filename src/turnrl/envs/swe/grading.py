"""Grading a SWE episode: the repository the agent leaves, judged in a fresh sandbox.

Both graders start from :func:`grading_files`: the agent's files with every test file,
``conftest.py``, ``sitecustomize.py``/``usercustomize.py`` and test-runner configuration
(``pytest.ini``, ``tox.ini``, ``setup.cfg``, ``pyproject.toml``) put back as they were,
any such file the agent added removed, and any top-level module the agent added that could
shadow the standard library or pytest removed too. Nothing of the grader's (hidden tests,
expected values, the gold patch) is ever in the sandbox the agent's code ran in.

- :func:`grade_calls` (``swe-v0``, generated repositories): every graded test is one call
  ``f(*args) == expected`` (:class:`~turnrl.envs.swe.GradedCall`). The sandbox runs
  :data:`~turnrl.envs.swe.scripts.CALL_GRADER`, which makes each call in a child process and
  prints the results as Python literals built from exact built-in types; the host reads
  them with ``ast.literal_eval`` and compares them with the expected values, which never
  enter the sandbox. So the verdict cannot be printed by the agent's code: to pass a hidden
  test it has to return the right value for an input it never saw.
- :func:`grade_command` (``swe-local-v0``, real repositories): the instance's ``test_patch``
  is applied, its test command runs with the fail-to-pass and pass-to-pass ids, and each
  test passes when the last ``short test summary info`` section of pytest's ``-rA`` report
  says ``PASSED`` (or ``XFAIL``) for it, and the exit status agrees (0 when every selected
  test passed, 1 otherwise). The agent's code runs inside that pytest process, so a program
  written to attack the grader could forge the report (docs/environments.md, ``swe-local-v0``).

A grading run that fails for a reason of the infrastructure (the sandbox cannot start, the
run outlives its wall-clock limit, the grading script never started) raises
:class:`GradingInfraError`, which ends the episode as a failed one (left out of group
baselines), never as a reward of 0.
"""

from __future__ import annotations

import ast
import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from turnrl.envs.swe.instance import GradedCall
from turnrl.envs.swe.patches import PatchError, apply_patch
from turnrl.envs.swe.scripts import CALL_GRADER, COMMAND_RUNNER, READY, RESULT, script
from turnrl.sandbox import Sandbox, SandboxError, SandboxResult

PROTECTED_NAMES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py",
                             "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"})
"""Files put back as they were (or removed when the agent added them), wherever they are."""
TEST_FOLDERS = frozenset({"tests", "test", "testing"})
RUNNER_MODULES = frozenset({"pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging"})
PASSING = ("PASSED", "XFAIL")
"""The pytest ``-rA`` outcomes that count as a pass."""


class GradingInfraError(RuntimeError):
    """Grading could not run for a reason of the infrastructure, not of the agent's code;
    raised out of ``env.step`` so that the runner records the episode as failed."""


@dataclass(frozen=True)
class Verdict:
    """The outcome of grading: each graded test id → whether it passed, and a note per
    failed test (``"returned [1]"``, ``"raised ValueError"``, ``"timed out"``)."""

    fail_to_pass: dict[str, bool]
    pass_to_pass: dict[str, bool]
    notes: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> int:
        """Graded tests that passed."""
        return sum(self.fail_to_pass.values()) + sum(self.pass_to_pass.values())

    @property
    def total(self) -> int:
        """Graded tests."""
        return len(self.fail_to_pass) + len(self.pass_to_pass)

    @property
    def resolved(self) -> bool:
        """True when every graded test passed (SWE-bench's "resolved")."""
        return self.total > 0 and self.passed == self.total

    def info(self) -> dict[str, Any]:
        """The counts for ``StepResult.info``."""
        return {"tests_passed": self.passed, "tests_total": self.total,
                "fail_to_pass_passed": sum(self.fail_to_pass.values()),
                "fail_to_pass_total": len(self.fail_to_pass),
                "pass_to_pass_passed": sum(self.pass_to_pass.values()),
                "pass_to_pass_total": len(self.pass_to_pass)}


def is_test_path(path: str) -> bool:
    """True for a test file or anything under a ``tests``/``test``/``testing`` folder."""
    parts = path.split("/")
    name = parts[-1]
    return any(part in TEST_FOLDERS for part in parts[:-1]) or (
        name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")))


def _protected(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return is_test_path(path) or name in PROTECTED_NAMES or name.endswith(".pth")


def _top_name(path: str) -> str:
    top = path.split("/", 1)[0]
    return top[:-3] if top.endswith(".py") else top


def _shadows(path: str, own: set[str]) -> bool:
    """True for a top-level module or package that could shadow the standard library or
    the test runner (``json.py``, ``pytest/__init__.py``) and is none of the repository's
    own top-level names ``own``."""
    name = _top_name(path)
    return name not in own and (name in RUNNER_MODULES or name in sys.stdlib_module_names)


def grading_files(original: Mapping[str, str], agent: Mapping[str, str]) -> dict[str, str]:
    """Return the files to grade: ``agent``'s, with every protected file (tests, conftest,
    site customisation, runner configuration) as in ``original`` and the agent's new ones
    among them, or that shadow a standard module, left out."""
    own = {_top_name(path) for path in original}
    files = {path: text for path, text in agent.items()
             if not (path not in original and (_protected(path) or _shadows(path, own)))}
    for path, text in original.items():
        if _protected(path):
            files[path] = text
    return files


def _run(sandbox: Sandbox, code: str, files: Mapping[str, str], what: str) -> SandboxResult:
    try:
        result = sandbox.run(code, files={f"repo/{path}": text for path, text in files.items()})
    except SandboxError as error:
        raise GradingInfraError(f"{what}: the sandbox failed: {error}") from error
    if result.timed_out:
        raise GradingInfraError(f"{what}: the grading run passed its wall-clock limit of "
                                f"{sandbox.config.wall_time_s:g} s; raise wall_time_s if the "
                                "machine is busy")
    lines = result.stdout.splitlines()
    if READY not in lines[:1]:
        raise GradingInfraError(f"{what}: the grading script did not start: "
                                f"{(result.error or '')} {result.stderr[-300:]}".strip())
    return result


def _result_line(result: SandboxResult) -> Any:
    """The JSON of the script's ``RESULT`` line, or ``None`` when there is none or more
    than one (the script died after the agent's code ran, or something forged a line)."""
    found = [line[len(RESULT):] for line in result.stdout.splitlines()
             if line.startswith(RESULT)]
    if len(found) != 1:
        return None
    try:
        return json.loads(found[0])
    except ValueError:
        return None


# ----------------------------------------------------------------------------- swe-v0
def grade_calls(sandbox: Sandbox, files: Mapping[str, str], calls: Sequence[GradedCall],
                fail_to_pass: Sequence[str], *, per_call_s: float, budget_s: float
                ) -> Verdict:
    """Grade a generated repository: make every call of ``calls`` against ``files`` (the
    :func:`grading_files`) in ``sandbox`` and compare on the host. ``per_call_s`` limits
    one call, ``budget_s`` all of them (calls left when it runs out fail). Raises
    :class:`GradingInfraError` (see the module docstring)."""
    settings = {"ready": READY, "result": RESULT, "per_call_s": per_call_s,
                "budget_s": budget_s, "max_result_bytes": 1 << 20,
                "calls": [(c.test_id, c.module, c.function, tuple(c.args)) for c in calls]}
    result = _run(sandbox, script(CALL_GRADER, settings), files, "swe-v0 grading")
    reported = _result_line(result)
    outcomes: dict[str, bool] = {}
    notes: dict[str, str] = {}
    for call in calls:
        entry = reported.get(call.test_id) if isinstance(reported, dict) else None
        outcomes[call.test_id], note = _judge_call(entry, call.expected)
        if note:
            notes[call.test_id] = note
    f2p = set(fail_to_pass)
    return Verdict({t: ok for t, ok in outcomes.items() if t in f2p},
                   {t: ok for t, ok in outcomes.items() if t not in f2p}, notes,
                   {"grading_output_found": reported is not None})


def _judge_call(entry: Any, expected: Any) -> tuple[bool, str]:
    """Whether one call's reported result equals ``expected``, and a note when not."""
    if not isinstance(entry, dict):
        return False, "no result"
    if "value" not in entry:
        error = entry.get("error")
        return False, f"raised {error}" if isinstance(error, str) and error.isidentifier() \
            else str(error)[:80]
    text = entry["value"]
    if not isinstance(text, str) or len(text) > 1_000_000:
        return False, "unreadable result"
    try:
        value = ast.literal_eval(text)
        same = bool(value == expected)  # built-in values only: no user __eq__ runs here
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, "unreadable result"
    return same, "" if same else f"returned {text[:80]}"


# ----------------------------------------------------------------------------- swe-local-v0
def command_words(test_cmd: str) -> list[str]:
    """The words of a test command (``"python -m pytest -q -rA"``); raises ``ValueError``
    for one that does not parse or is empty."""
    words = shlex.split(test_cmd)
    if not words:
        raise ValueError("test_cmd is empty")
    return words


def run_command(sandbox: Sandbox, files: Mapping[str, str], test_cmd: str,
                args: Sequence[str], *, budget_s: float, tail_chars: int, what: str
                ) -> dict[str, Any]:
    """Run ``test_cmd`` with ``args`` on ``files`` in ``sandbox`` (the
    :data:`~turnrl.envs.swe.scripts.COMMAND_RUNNER`); return its result: ``exit_code``
    (``None`` when it timed out), ``timed_out``, ``summary`` (the lines of pytest's last
    ``short test summary info`` section) and ``tail`` (the output's end). Raises
    :class:`GradingInfraError` when the runner could not run the command."""
    settings = {"ready": READY, "result": RESULT, "command": command_words(test_cmd),
                "args": list(args), "budget_s": budget_s, "tail_chars": tail_chars}
    result = _run(sandbox, script(COMMAND_RUNNER, settings), files, what)
    reported = _result_line(result)
    if isinstance(reported, dict) and "start_error" in reported:
        raise GradingInfraError(f"{what}: could not start {test_cmd!r}: "
                                f"{reported['start_error']}")
    if not isinstance(reported, dict):
        return {"exit_code": None, "timed_out": False, "summary": [],
                "tail": "(the test run ended without a report)"}
    return reported


def grade_command(sandbox: Sandbox, original: Mapping[str, str], agent: Mapping[str, str],
                  test_patch: str, test_cmd: str, fail_to_pass: Sequence[str],
                  pass_to_pass: Sequence[str], *, budget_s: float) -> Verdict:
    """Grade a real repository (see the module docstring): the agent's files as
    :func:`grading_files` leaves them, ``test_patch`` applied, ``test_cmd`` run on the
    fail-to-pass and pass-to-pass ids."""
    ids = list(dict.fromkeys([*fail_to_pass, *pass_to_pass]))
    try:
        files = apply_patch(grading_files(original, agent), test_patch)
    except PatchError as error:
        try:
            apply_patch(original, test_patch)
        except PatchError:
            raise GradingInfraError(f"swe-local-v0 grading: the instance's test_patch does "
                                    f"not apply to its repository: {error}") from error
        # it applies to the original files: the agent's changes are in its way
        return Verdict(dict.fromkeys(fail_to_pass, False), dict.fromkeys(pass_to_pass, False),
                       dict.fromkeys(ids, f"test_patch does not apply: {error}"))
    reported = run_command(sandbox, files, test_cmd, ids, budget_s=budget_s, tail_chars=2000,
                           what="swe-local-v0 grading")
    outcomes = summary_outcomes(reported.get("summary") or [])
    passed = {test: outcomes.get(test) in PASSING for test in ids}
    code = reported.get("exit_code")
    consistent = (code == 0 and all(passed.values())) or (code == 1 and not all(passed.values()))
    if not consistent:
        passed = dict.fromkeys(ids, False)
    notes = {test: outcomes.get(test, "not reported") for test in ids if not passed[test]}
    return Verdict({t: passed[t] for t in fail_to_pass}, {t: passed[t] for t in pass_to_pass},
                   notes, {"grading_exit_code": code, "grading_tail": reported.get("tail", "")})


def summary_outcomes(lines: Sequence[str]) -> dict[str, str]:
    """Test id → outcome from the lines of a ``short test summary info`` section
    (``PASSED tests/a.py::t``, ``FAILED tests/a.py::t - AssertionError``). A test listed
    with two outcomes keeps the worst, so a forged ``PASSED`` cannot hide a ``FAILED``."""
    outcomes: dict[str, str] = {}
    for line in lines:
        word, _, rest = line.strip().partition(" ")
        if word not in ("PASSED", "FAILED", "ERROR", "XFAIL", "XPASS", "SKIPPED"):
            continue
        test = rest.split(" - ", 1)[0].strip()
        if outcomes.get(test) not in (None, *PASSING):
            continue
        outcomes[test] = word
    return outcomes
