"""The generated task: :class:`SweInstance`, where its bug is, and writing its files out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnrl.envs.swe.options import SweOptions


@dataclass(frozen=True)
class BugLocation:
    """Where the injected bug sits (for tests and analysis; never shown to an agent):
    the module's relative path, the function, and the 1-based line of the edit."""

    file: str
    function: str
    line: int


@dataclass(frozen=True)
class GradedCall:
    """One graded test as data, for a grader that must not trust the test's own verdict:
    the test ``test_id`` (``"tests/test_text.py::test_truncate_5"``) asserts that
    ``<module>.<function>(*args)`` (``module`` dotted: ``"pkg.text"``) equals ``expected``.
    Every test the generator writes is one such call, so a grader can make the call itself
    and compare the result with ``expected`` where the code under test cannot reach it."""

    test_id: str
    module: str
    function: str
    args: tuple[Any, ...]
    expected: Any


@dataclass(frozen=True)
class SweInstance:
    """One generated task.

    ``files``: the buggy repository (relative path → text): the package's modules and
    ``__init__.py``, the visible tests ``tests/test_<module>.py``, a README and a
    ``pyproject.toml`` (no history, no patch). ``hidden_tests``: more test files on other
    inputs, never in ``files``. ``solution_files``: the repository with the bug fixed.
    ``fail_to_pass`` (fail on ``files``, pass on ``solution_files``) and ``pass_to_pass``
    (pass on both): pytest ids over the visible and hidden tests. ``patch``: the gold
    patch, a git-style diff from ``files`` to ``solution_files``; ``test_patch``: the diff
    that adds the hidden tests. ``problem_statement``: the issue text. ``entry_function``:
    the function that the issue and the failing tests call; it reaches
    ``bug_location.function`` in ``options.distance`` calls. ``bug_kind``,
    ``bug_location`` and ``bug_description`` are for analysis, never for the agent.
    ``graded_calls``: every fail-to-pass and pass-to-pass test as a :class:`GradedCall`, in
    the order of ``fail_to_pass + pass_to_pass``'s files (for ``swe-v0``'s grader).
    """

    instance_id: str
    seed: int
    options: SweOptions
    package: str
    files: dict[str, str]
    hidden_tests: dict[str, str]
    solution_files: dict[str, str]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    problem_statement: str
    patch: str
    test_patch: str
    bug_kind: str
    bug_location: BugLocation
    bug_description: str
    entry_function: str
    graded_calls: tuple[GradedCall, ...] = ()

    def to_swe_record(self) -> dict[str, Any]:
        """Return the instance as a SWE-bench / SWE-Gym style record: ``instance_id``,
        ``repo``, ``problem_statement``, ``FAIL_TO_PASS``, ``PASS_TO_PASS`` (lists),
        ``patch``, ``test_patch``, ``hints_text``, plus ``repo_files`` (the buggy
        repository, path → text) to write to disk in place of a clone."""
        return {"instance_id": self.instance_id, "repo": f"turnrl-swe/{self.package}",
                "problem_statement": self.problem_statement,
                "FAIL_TO_PASS": list(self.fail_to_pass),
                "PASS_TO_PASS": list(self.pass_to_pass), "patch": self.patch,
                "test_patch": self.test_patch, "hints_text": "",
                "repo_files": dict(self.files)}


def write_files(files: dict[str, str], root: Path) -> list[Path]:
    """Write ``files`` (relative path → text) under ``root``, creating folders; returns the
    paths written, in path order."""
    written = []
    for relative, text in sorted(files.items()):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
