"""What ``swe-v0`` and ``swe-local-v0`` share: the episode, the tools, the oracle's state.

:class:`SweEnvBase` is an env over one repository per episode (a :class:`Task`): the agent
reads the issue, looks through the code with ``list_files``, ``read`` and ``search``,
changes it with ``edit``, ``replace`` or ``create`` (the file tools work on the episode's
in-memory :class:`~turnrl.envs.swe.workspace.Workspace`, never on a disk), runs the visible
tests with ``run_tests`` (in :mod:`turnrl.sandbox`) and ends with ``submit``. The episode is
graded then, or when its turns run out (SWE-bench grades the final state, so a fix that was
made but not submitted still earns the reward): reward 1.0 when every fail-to-pass and
pass-to-pass test passes (``partial_credit``: the share that pass). The variants say how a
task is made, how ``run_tests`` runs and how the repository is graded
(:mod:`.grading`). A failure of the sandbox itself, in ``run_tests`` or in grading, is
raised out of ``step`` (:class:`~turnrl.sandbox.SandboxError`,
:class:`~turnrl.envs.swe.grading.GradingInfraError`): the runner ends that episode as a
failed one, never a reward of 0.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

from turnrl.envs.swe.grading import GradingInfraError, Verdict
from turnrl.envs.swe.oracle import OracleState, oracle_step
from turnrl.envs.swe.workspace import Workspace
from turnrl.envs.tools import TOOL_FORMATS, Toolbox, ToolFormat, check_tool_role
from turnrl.sandbox import Sandbox, SandboxConfig, SandboxError
from turnrl.types import Message, StepResult

INSTRUCTION = ("Fix the issue in the repository: find the code with search and read, change "
               "it with edit, check it with run_tests, then submit.")
TOOL_NAMES = ["list_files", "read", "search", "edit", "replace", "create", "run_tests",
              "submit"]
FILES_SHOWN = 30
"""Files the first message lists at most."""
OBSERVATION_CHARS = 2500
"""The longest ``run_tests`` observation (the start and the end are kept)."""
GRADING_GRACE_S = 15.0
"""How much longer than ``grade_time_s`` the grading sandbox may run before its run counts
as an infrastructure failure."""


@dataclass(frozen=True)
class Task:
    """One episode's task: the issue, the repository (``files``), the files the gold patch
    leads to (``target``, for the oracle), the reset info and the privileged text."""

    instance_id: str
    problem_statement: str
    files: dict[str, str]
    target: dict[str, str]
    info: dict[str, Any]
    privileged: str


def check_common(env: str, *, tool_format: str, max_turns: int, partial_credit: bool,
                 wall_time_s: float, grade_time_s: float) -> None:
    """Raise ``ValueError`` naming the option for a bad shared constructor argument."""
    if tool_format not in TOOL_FORMATS:
        raise ValueError(f"{env}: tool_format {tool_format!r} is not one of {TOOL_FORMATS}")
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 2:
        raise ValueError(f"{env}: max_turns must be an int >= 2 (an edit, then submit), got "
                         f"{max_turns!r}")
    if not isinstance(partial_credit, bool):
        raise ValueError(f"{env}: partial_credit must be true or false, got "
                         f"{partial_credit!r}")
    for name, value in (("wall_time_s", wall_time_s), ("grade_time_s", grade_time_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{env}: {name} must be a positive number of seconds, got "
                             f"{value!r}")


class SweEnvBase:
    """The shared episode logic; a variant implements :meth:`_new_task`,
    :meth:`_run_tests` and :meth:`_grade`, and sets ``spec``.

    Args (of every variant): ``tool_format`` (``"auto"``, ``"compact"``, ``"json"``),
    ``max_turns``, ``partial_credit``, ``system_prompt`` (``None``: the instruction and the
    tools; ``""``: none), ``tool_role``, and the sandbox's ``wall_time_s`` (one
    ``run_tests``), ``grade_time_s`` (the whole grading run), ``memory_mb``, ``cpu_share``
    and ``isolation``, ``tmpfs_mb`` (room for the repository in the sandbox) and ``python``
    (the interpreter the tests run with; ``None``: this one) (see
    :class:`turnrl.sandbox.SandboxConfig`).
    """

    name = "swe"

    def __init__(self, *, tool_format: ToolFormat, max_turns: int, partial_credit: bool,
                 system_prompt: str | None, tool_role: str, wall_time_s: float,
                 grade_time_s: float, memory_mb: int, cpu_share: float,
                 isolation: str, tmpfs_mb: int = 64, python: str | None = None) -> None:
        check_common(self.name, tool_format=tool_format, max_turns=max_turns,
                     partial_credit=partial_credit, wall_time_s=wall_time_s,
                     grade_time_s=grade_time_s)
        self.max_turns, self.partial_credit = max_turns, partial_credit
        self.wall_time_s, self.grade_time_s = float(wall_time_s), float(grade_time_s)
        self.tool_role = check_tool_role(tool_role, self.name)
        shared = SandboxConfig(memory_mb=memory_mb, cpu_share=cpu_share, isolation=isolation,
                               tmpfs_mb=tmpfs_mb, python=python)
        tool_limit = self.wall_time_s + 5.0  # the scripts stop their own work at wall_time_s
        self.sandbox = Sandbox(shared, wall_time_s=tool_limit, cpu_time_s=tool_limit,
                               max_output_bytes=65536)
        grade_limit = self.grade_time_s + GRADING_GRACE_S
        self.grader = Sandbox(shared, wall_time_s=grade_limit, cpu_time_s=grade_limit,
                              max_output_bytes=4 << 20)
        self.toolbox = Toolbox({name: getattr(self, name) for name in TOOL_NAMES},
                               format=tool_format)
        self.system_messages = self.toolbox.system_messages(INSTRUCTION, system_prompt,
                                                            self.name)
        self._rng: random.Random | None = None
        self._task: Task | None = None
        self.workspace = Workspace({})
        self._turn, self._done, self._submitted = 0, True, False
        self._reads: set[tuple[str, int, int]] = set()
        self._searched = self._tested = False
        self._infra_error: Exception | None = None

    # -- what a variant provides ---------------------------------------------------------

    def _new_task(self, seed: int | None) -> Task:
        raise NotImplementedError

    def _run_tests(self, target: str) -> str:
        raise NotImplementedError

    def _grade(self) -> Verdict:
        raise NotImplementedError

    # -- the Env protocol -------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[list[Message], dict[str, Any]]:
        if options:
            raise ValueError(f"{self.name}: reset() takes no options, got {sorted(options)}")
        if seed is not None or self._rng is None:
            self._rng = random.Random(seed)
        self._task = task = self._new_task(seed)
        self.workspace = Workspace(task.files)
        self._turn, self._done, self._submitted = 0, False, False
        self._reads, self._searched, self._tested = set(), False, False
        self._infra_error = None
        paths = sorted(task.files)
        listed = ", ".join(paths[:FILES_SHOWN])
        if len(paths) > FILES_SHOWN:
            listed += f", ... ({len(paths)} files; list_files[] shows them all)"
        prompt = f"{task.problem_statement.rstrip()}\n\nFiles: {listed}"
        return [*self.system_messages, {"role": "user", "content": prompt}], dict(task.info)

    def step(self, action: str) -> StepResult:
        if self._done or self._task is None:
            raise RuntimeError(f"{self.name}: the episode is over; call reset() first")
        self._turn += 1
        text, tool_info = self.toolbox.call(action)
        if self._infra_error is not None:
            self._done = True
            raise self._infra_error
        ran = bool(tool_info["tool_calls"]) and not tool_info["tool_error"]
        terminated = self._submitted
        truncated = not terminated and self._turn >= self.max_turns
        info: dict[str, Any] = {**tool_info, "invalid_action": tool_info["tool_error"],
                                "success": False, "submitted": terminated}
        reward = 0.0
        if terminated or truncated:
            self._done = True
            verdict = self._grade()  # GradingInfraError ends the episode as a failed one
            reward = verdict.passed / verdict.total if self.partial_credit and verdict.total \
                else float(verdict.resolved)
            info.update(verdict.info(), success=verdict.resolved)
            info.update({key: value for key, value in verdict.details.items()
                         if key != "grading_tail"})
            ending = "Submitted." if terminated else "Out of turns; graded as it is."
            text = (text + "\n" if not terminated else "") + \
                f"{ending} {verdict.passed} of {verdict.total} tests pass."
        role: Literal["tool", "user"] = "tool" if ran and self.tool_role == "tool" else "user"
        return StepResult(observation=[{"role": role, "content": text}], reward=reward,
                          terminated=terminated, truncated=truncated, info=info)

    def close(self) -> None:
        pass

    def tool_schemas(self) -> list[dict[str, Any]]:
        """JSON schemas for the chat template (``[]`` in the compact format)."""
        return self.toolbox.template_schemas()

    # -- tools ------------------------------------------------------------------------------

    def list_files(self, folder: str = "") -> str:
        """List the files: list_files[] for all of them, list_files[folder] for one folder.

        Args:
            folder: A folder of the repository; empty for every file.
        """
        return self.workspace.list_files(folder)

    def read(self, target: str) -> str:
        """Show a file with line numbers: read[path], or lines read[path:10-20].

        Args:
            target: path, path:N or path:N-M.
        """
        self.workspace.last_read = None
        text = self.workspace.read(target)
        if self.workspace.last_read is not None:
            self._reads.add(self.workspace.last_read)
        return text

    def search(self, query: str, path: str = "") -> str:
        """Find a text in the files; each match as path:line:text.

        Args:
            query: The text to look for (case-sensitive).
            path: Only in this file or folder (optional).
        """
        self._searched = True
        return self.workspace.search(query, path)

    def edit(self, target: str, text: str | None = None) -> str:
        """Replace lines: edit[path:N:text] or edit[path:N-M:text] (several lines or none).

        Args:
            target: path:N:new text or path:N-M:new text (or path:N-M with text).
            text: The new text, when not in target (optional).
        """
        result = self.workspace.edit(target, text)
        self._tested = False
        return result

    def replace(self, path: str, old: str = "", new: str = "") -> str:
        """Replace the one occurrence of a text in a file by another (JSON calls only).

        Args:
            path: The file.
            old: The text to replace; it must occur exactly once.
            new: The new text.
        """
        result = self.workspace.replace(path, old, new)
        self._tested = False
        return result

    def create(self, path: str, text: str | None = None) -> str:
        """Create a file: create[path, a newline, then its content].

        Args:
            path: The new file's path (or the path, a newline and the content).
            text: The content, when not in path (optional).
        """
        result = self.workspace.create(path, text)
        self._tested = False
        return result

    def run_tests(self, target: str = "") -> str:
        """Run the repository's tests: run_tests[] for all, or one test file or test id.

        Args:
            target: A test file, a test id (file::name) or a test name; empty for all.
        """
        self._tested = True
        try:
            return _shorten(self._run_tests(target.strip()))
        except (SandboxError, GradingInfraError) as error:
            self._infra_error = error  # raised out of step(): the episode failed, not the agent
            raise

    def submit(self) -> str:
        """Submit the repository as it is; this ends the episode and grades it."""
        self._submitted = True
        return ""

    # -- optional capabilities --------------------------------------------------------------

    def oracle_action(self) -> str | None:
        """The next call of an expert that applies the gold patch with the edit tools (see
        :mod:`turnrl.envs.swe.oracle`). Pure: it does not change the env's state."""
        if self._done or self._task is None:
            return None
        tool, argument = oracle_step(OracleState(
            self.workspace.files, self._task.target, frozenset(self._reads), self._searched,
            self._tested, self.max_turns - self._turn))
        if tool == "submit":
            return "submit[]" if self.toolbox.format != "json" else \
                '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
        return self.toolbox.format_call(tool, argument)

    def privileged_info(self) -> str:
        """What a privileged critic may see: the task's hidden facts (the gold patch)."""
        return self._task.privileged if self._task is not None else "no task yet"

    def sample_action(self, rng: random.Random) -> str:
        """A random call that changes nothing: list, read, search or run the tests."""
        if self._task is None:
            raise RuntimeError(f"{self.name}: call reset() before sample_action()")
        paths = sorted(self.workspace.files)
        words = [w.strip("`.,:()") for w in self._task.problem_statement.split()]
        words = [w for w in words if len(w) > 3] or ["def"]
        choice = rng.randrange(4)
        if choice == 0:
            return self.toolbox.format_call("list_files", "")
        if choice == 1:
            return self.toolbox.format_call("read", rng.choice(paths))
        if choice == 2:
            return self.toolbox.format_call("search", rng.choice(words))
        return self.toolbox.format_call("run_tests", "")


def _shorten(text: str, size: int = OBSERVATION_CHARS) -> str:
    """``text`` cut to ``size`` characters, keeping its start and its end."""
    text = text.rstrip("\n") or "(no output)"
    if len(text) <= size:
        return text
    half = size // 2
    return f"{text[:half]}\n... [{len(text) - size} characters cut] ...\n{text[-half:]}"
