"""The expert of the SWE envs: it applies the gold patch through the agent's own tools.

:func:`oracle_step` looks at the episode's state (the workspace, the target files, what was
searched and read, whether the tests ran since the last edit) and returns the next call, as
a ``(tool, argument)`` pair:

1. while a file differs from its target (the repository with the gold patch applied): if
   nothing was searched yet, ``search`` for the function around the first difference
   (``def name``); if that file's region was not read yet, ``read[path:a-b]``; then
   ``edit[path:N-M:<target lines>]`` for the first differing block (line numbers of the
   current text, so each edit is right whatever came before, a random demonstration step
   included);
2. once every file matches, ``run_tests`` (if no test ran since the last change), then
   ``submit``.

When the turns left are too few for that, the looking steps are skipped, and when only one
turn is left it submits. An edit whose text has unbalanced brackets (which the one-argument
``name[...]`` format cannot carry) is widened by neighbouring lines until they balance.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from turnrl.envs.tools.parsing import balanced_brackets

_DEF_RE = re.compile(r"\s*(?:async\s+)?(?:def|class)\s+(\w+)")
READ_CONTEXT = 3
"""Lines shown around a difference by the oracle's ``read``."""
WIDEN_LIMIT = 12
"""Lines an edit may be widened by to balance its brackets."""


@dataclass(frozen=True)
class OracleState:
    """What the oracle reads: the files now and their targets, the files read (with the
    line ranges shown) and whether a search ran, whether the tests ran since the last
    change, and the turns left."""

    files: Mapping[str, str]
    target: Mapping[str, str]
    reads: frozenset[tuple[str, int, int]]
    searched: bool
    tested: bool
    turns_left: int


@dataclass(frozen=True)
class Edit:
    """Replace lines ``first``-``last`` (1-based; ``last = first - 1`` inserts before
    ``first``) of ``path`` with ``lines``."""

    path: str
    first: int
    last: int
    lines: tuple[str, ...]


def next_edit(files: Mapping[str, str], target: Mapping[str, str]) -> Edit | None:
    """The first block (in path order) where ``files`` differ from ``target``, as an
    :class:`Edit` of existing lines; ``None`` when every target file matches. Files only in
    ``files`` (created by the agent) are left alone."""
    for path in sorted(target):
        now = files.get(path, "").splitlines()
        goal = target[path].splitlines()
        if now == goal:
            continue
        matcher = difflib.SequenceMatcher(None, now, goal, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                return _balanced(path, now, goal, i1, i2, j1, j2)
    return None


def _balanced(path: str, now: list[str], goal: list[str], i1: int, i2: int, j1: int,
              j2: int) -> Edit:
    """The edit of ``now[i1:i2]`` → ``goal[j1:j2]``, made to replace at least one line,
    and widened over the equal lines around it until its text's brackets balance."""
    if i1 == i2 and now:  # a pure insertion: take in one neighbouring line
        if i1 < len(now):
            i2, j2 = i2 + 1, j2 + 1
        else:
            i1, j1 = i1 - 1, j1 - 1
    for _ in range(WIDEN_LIMIT):
        if balanced_brackets("\n".join(goal[j1:j2])):
            break
        if i2 < len(now) and j2 < len(goal):
            i2, j2 = i2 + 1, j2 + 1
        elif i1 > 0 and j1 > 0:
            i1, j1 = i1 - 1, j1 - 1
        else:
            break
    return Edit(path, i1 + 1, max(i2, i1 + 1) if now else 1, tuple(goal[j1:j2]))


def edit_argument(edit: Edit) -> str:
    """``path:N:text`` or ``path:N-M:text``: the one-argument form of ``edit``."""
    span = str(edit.first) if edit.last <= edit.first else f"{edit.first}-{edit.last}"
    return f"{edit.path}:{span}:" + "\n".join(edit.lines)


def _enclosing_name(lines: list[str], index: int) -> str | None:
    """The name of the ``def``/``class`` that line ``index`` (0-based) is in, if any."""
    for line in reversed(lines[:index + 1]):
        match = _DEF_RE.match(line)
        if match:
            return match[1]
    return None


def oracle_step(state: OracleState) -> tuple[str, str]:
    """The oracle's next call as ``(tool, argument)`` (``("submit", "")`` at the end)."""
    edit = next_edit(state.files, state.target)
    if edit is None:
        if not state.tested and state.turns_left > 1:
            return "run_tests", ""
        return "submit", ""
    if state.turns_left <= 1:
        return "submit", ""
    edits_left = _edits_left(state.files, state.target)
    spare = state.turns_left - edits_left - 2  # keep the run_tests and submit turns
    lines = state.files.get(edit.path, "").splitlines()
    if not state.searched and spare >= 2:
        name = _enclosing_name(lines, edit.first - 1)
        query = f"def {name}" if name and f"def {name}" in "\n".join(lines) else \
            (lines[edit.first - 1].strip() if lines else "") or edit.path.rsplit("/", 1)[-1]
        return "search", query
    low = max(1, edit.first - READ_CONTEXT)
    high = min(max(len(lines), 1), max(edit.last, edit.first) + READ_CONTEXT)
    if lines and spare >= 1 and not any(path == edit.path and a <= edit.first and
                                        max(edit.last, edit.first) <= b
                                        for path, a, b in state.reads):
        return "read", f"{edit.path}:{low}-{high}"
    return "edit", edit_argument(edit)


def _edits_left(files: Mapping[str, str], target: Mapping[str, str]) -> int:
    """How many differing blocks the files still have (each takes one edit)."""
    count = 0
    for path in target:
        now, goal = files.get(path, "").splitlines(), target[path].splitlines()
        if now != goal:
            opcodes = difflib.SequenceMatcher(None, now, goal, autojunk=False).get_opcodes()
            count += sum(tag != "equal" for tag, *_ in opcodes)
    return count
