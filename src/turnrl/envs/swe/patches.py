"""Git-style unified diffs as data: :func:`parse_patch` reads one into :class:`FilePatch`
hunks and :func:`apply_patch` applies it to an in-memory repository (relative path → text).

Used on the host, never in a sandbox: ``swe-local-v0``'s grader applies an instance's
``test_patch`` with it, and the oracles of ``swe-v0`` and ``swe-local-v0`` apply the gold
``patch`` to know the files they edit towards. Only what SWE-bench style patches hold is
understood: ``diff --git`` sections with ``---``/``+++`` headers, ``new file mode`` and
``deleted file mode`` lines, ``@@ -a,b +c,d @@`` hunks of context (`` ``), removed (``-``)
and added (``+``) lines, and ``\\ No newline at end of file`` markers; a binary patch or a
rename without content is refused with :class:`PatchError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_HUNK_RE = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\ No newline at end of file"


class PatchError(ValueError):
    """A patch that cannot be read, or that does not apply to the files it is applied to."""


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk: it replaces ``old_lines`` (context and removed lines, starting at the
    1-based line ``old_start``) by ``new_lines`` (context and added lines). Lines keep their
    newline, except a last line marked ``\\ No newline at end of file``."""

    old_start: int
    old_lines: tuple[str, ...]
    new_lines: tuple[str, ...]


@dataclass(frozen=True)
class FilePatch:
    """The changes of one file: ``path`` (the new path; the old one for a deletion), whether
    the patch creates or deletes it, and its hunks in file order."""

    path: str
    hunks: tuple[Hunk, ...]
    created: bool = False
    deleted: bool = False


def parse_patch(text: str) -> list[FilePatch]:
    """Return the file patches of the unified diff ``text``, in order; ``[]`` for an empty
    text. Raises :class:`PatchError` naming the line that cannot be read."""
    lines = text.splitlines(keepends=True)
    patches: list[FilePatch] = []
    index = 0
    while index < len(lines):
        if not lines[index].startswith("diff --git ") and not lines[index].startswith("--- "):
            index += 1
            continue
        patch, index = _file_patch(lines, index)
        patches.append(patch)
    return patches


def _file_patch(lines: list[str], index: int) -> tuple[FilePatch, int]:
    """The file patch starting at ``lines[index]`` (its ``diff --git`` or ``---`` line) and
    the index after it."""
    created = deleted = False
    old_path = new_path = None
    if lines[index].startswith("diff --git "):
        index += 1
    while index < len(lines) and not lines[index].startswith(("--- ", "diff --git ")):
        header = lines[index]
        created = created or header.startswith("new file mode")
        deleted = deleted or header.startswith("deleted file mode")
        if header.startswith(("Binary files", "GIT binary patch", "rename from")):
            raise PatchError(f"patch line {index + 1}: {header.strip()!r}: binary patches and "
                             "renames are not supported; give the change as text hunks")
        index += 1
    if index >= len(lines) or not lines[index].startswith("--- "):
        raise PatchError(f"patch line {index + 1}: a file section without '---'/'+++' "
                         "headers (an empty new file, or a mode change); give its content")
    old_path = _header_path(lines[index], "--- ")
    if index + 1 >= len(lines) or not lines[index + 1].startswith("+++ "):
        raise PatchError(f"patch line {index + 2}: expected '+++ b/<path>' after "
                         f"{lines[index].strip()!r}")
    new_path = _header_path(lines[index + 1], "+++ ")
    index += 2
    hunks: list[Hunk] = []
    while index < len(lines) and lines[index].startswith("@@"):
        hunk, index = _hunk(lines, index)
        hunks.append(hunk)
    path = new_path if new_path is not None else old_path
    if path is None:
        raise PatchError(f"patch line {index}: both paths are /dev/null")
    return FilePatch(path, tuple(hunks), created or old_path is None,
                     deleted or new_path is None), index


def _header_path(line: str, prefix: str) -> str | None:
    """The path of a ``---``/``+++`` header without its ``a/``/``b/`` prefix; ``None`` for
    ``/dev/null``."""
    path = line[len(prefix):].rstrip("\n").split("\t")[0].strip()
    if path == "/dev/null":
        return None
    return path[2:] if path.startswith(("a/", "b/")) else path


def _hunk(lines: list[str], index: int) -> tuple[Hunk, int]:
    match = _HUNK_RE.match(lines[index])
    if match is None:
        raise PatchError(f"patch line {index + 1}: cannot read the hunk header "
                         f"{lines[index].strip()!r}")
    old_count = int(match[2]) if match[2] is not None else 1
    new_count = int(match[4]) if match[4] is not None else 1
    old: list[str] = []
    new: list[str] = []
    index += 1
    while index < len(lines) and (len(old) < old_count or len(new) < new_count):
        line = lines[index]
        if line.startswith(_NO_NEWLINE):
            _drop_newline(old, new, lines[index - 1][:1])
        elif line[:1] in (" ", "-", "+") or line in ("\n", ""):
            body = line[1:] if line[:1] in (" ", "-", "+") else line
            if line[:1] in (" ", "\n", ""):
                old.append(body)
                new.append(body)
            else:
                (old if line[0] == "-" else new).append(body)
        else:
            raise PatchError(f"patch line {index + 1}: {line.strip()!r} is not a context, "
                             "added or removed line of the hunk above")
        index += 1
    while index < len(lines) and lines[index].startswith(_NO_NEWLINE):
        _drop_newline(old, new, lines[index - 1][:1])
        index += 1
    start = int(match[1])
    return Hunk(start if old_count else start + 1, tuple(old), tuple(new)), index


def _drop_newline(old: list[str], new: list[str], kind: str) -> None:
    """Apply a ``\\ No newline at end of file`` marker to the line just read."""
    for side, marked in ((old, kind in (" ", "-")), (new, kind in (" ", "+"))):
        if marked and side and side[-1].endswith("\n"):
            side[-1] = side[-1][:-1]


def apply_patch(files: Mapping[str, str], text: str) -> dict[str, str]:
    """Return a copy of ``files`` (relative path → text) with the patch ``text`` applied.

    Each hunk must match the file exactly at its line (or, as ``git apply`` allows, at the
    nearest line where its old lines match). Raises :class:`PatchError` naming the file and
    the hunk that does not apply."""
    result = dict(files)
    for patch in parse_patch(text):
        if patch.deleted:
            if patch.path not in result:
                raise PatchError(f"patch deletes {patch.path!r}, which does not exist")
            del result[patch.path]
            continue
        if patch.created and patch.path in result and result[patch.path]:
            raise PatchError(f"patch creates {patch.path!r}, which already exists")
        if not patch.created and patch.path not in result:
            raise PatchError(f"patch changes {patch.path!r}, which does not exist")
        result[patch.path] = apply_hunks(result.get(patch.path, ""), patch)
    return result


def apply_hunks(text: str, patch: FilePatch) -> str:
    """Return ``text`` with the hunks of ``patch`` applied (see :func:`apply_patch`)."""
    lines = text.splitlines(keepends=True)
    shift = 0
    for number, hunk in enumerate(patch.hunks, start=1):
        start = _locate(lines, hunk, hunk.old_start - 1 + shift)
        if start is None:
            raise PatchError(f"hunk {number} of the patch of {patch.path!r} (at line "
                             f"{hunk.old_start}) does not match the file")
        lines[start:start + len(hunk.old_lines)] = list(hunk.new_lines)
        shift += len(hunk.new_lines) - len(hunk.old_lines)
    return "".join(lines)


def _locate(lines: list[str], hunk: Hunk, expected: int) -> int | None:
    """Where the hunk's old lines sit: at ``expected`` if they match there, else the nearest
    line where they do; ``None`` when nowhere."""
    size = len(hunk.old_lines)
    candidates = sorted(range(len(lines) - size + 1), key=lambda at: abs(at - expected))
    if not size:
        return min(max(expected, 0), len(lines))
    for at in candidates:
        if tuple(lines[at:at + size]) == hunk.old_lines:
            return at
    return None
