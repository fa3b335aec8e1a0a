"""The agent's copy of a repository during an episode, and the file tools over it.

:class:`Workspace` holds the repository as text (relative path → text) in the env's memory:
reading, searching and editing never run code, so they need no sandbox, and nothing the agent
writes touches a disk. Every path an agent names is checked against the copy
(:meth:`Workspace.path`): relative, no ``..``, no ``.`` or empty parts, no backslash, no
colon; an unknown path is an error that suggests the closest file. A tool's mistake raises
:class:`WorkspaceError`, whose message is what the agent sees.

Line numbers are 1-based, and the tools print a line as ``<path>:<number>:<text>`` (search)
or ``<number>:<text>`` (read), so that a line the agent copies from either is, behind the
path, the argument of an edit: ``edit[pkg/mod.py:10:    return a + b]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from turnrl.wording import closest_name

READ_LINES = 80
"""Lines :meth:`Workspace.read` shows at most in one call."""
SEARCH_HITS = 20
"""Matches :meth:`Workspace.search` shows at most."""
LIST_FILES = 200
"""Paths :meth:`Workspace.list_files` shows at most."""
MAX_FILE_CHARS = 200_000
"""The longest file an edit or ``create`` may leave."""
MAX_NEW_FILES = 50
"""Files an agent may create in one episode."""

_RANGE_RE = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")
_BAD_PATH_RE = re.compile(r"[\\:\x00-\x1f*?\"<>|]")


class WorkspaceError(ValueError):
    """A file tool's call that cannot be done; the message says why and how to call it."""


class Workspace:
    """The episode's repository: ``files`` maps relative paths to text.

    Args:
        files: the repository at the start of the episode (copied).
    """

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files: dict[str, str] = dict(files)
        self.created: list[str] = []
        self.last_read: tuple[str, int, int] | None = None  # (path, first, last) shown

    # ----------------------------------------------------------------- paths
    def path(self, path: str, *, exists: bool = True) -> str:
        """Return ``path`` normalised (surrounding spaces and a leading ``./`` removed).

        Raises :class:`WorkspaceError` for a path outside the repository (absolute, with
        ``..``), a malformed one, or (with ``exists``) one that is not a file of the
        repository, naming the closest file."""
        clean = path.strip()
        while clean.startswith("./"):
            clean = clean[2:]
        parts = clean.split("/")
        if clean.startswith(("/", "~")) or ".." in parts:
            raise WorkspaceError(f"path {path!r} is outside the repository; paths are "
                                 f"relative to its root, e.g. {self._example()!r}")
        if not clean or any(part in ("", ".") for part in parts) or _BAD_PATH_RE.search(clean):
            raise WorkspaceError(f"{path!r} is not a file path; write a path relative to the "
                                 f"repository's root, e.g. {self._example()!r}")
        if exists and clean not in self.files:
            close = closest_name(clean, sorted(self.files)) or self._closest_by_name(clean)
            hint = f"; did you mean {close!r}?" if close else ""
            raise WorkspaceError(f"no file {clean!r} in the repository{hint} "
                                 "(list_files[] lists them)")
        return clean

    def _example(self) -> str:
        return next((p for p in sorted(self.files) if p.endswith(".py")), "src/module.py")

    def _closest_by_name(self, path: str) -> str | None:
        name = path.rsplit("/", 1)[-1]
        return next((p for p in sorted(self.files) if p.rsplit("/", 1)[-1] == name), None)

    def lines(self, path: str) -> list[str]:
        """The lines of the file ``path`` (validated), without their newlines."""
        return self.files[self.path(path)].splitlines()

    # ----------------------------------------------------------------- reading
    def list_files(self, folder: str = "") -> str:
        """Return the paths under ``folder`` (all when empty), one per line, sorted."""
        prefix = folder.strip().strip("/")
        if prefix:
            self.path(prefix, exists=False)
            prefix += "/"
        found = sorted(p for p in self.files if p.startswith(prefix) or p == prefix[:-1])
        if not found:
            folders = sorted({p.rsplit("/", 1)[0] for p in self.files if "/" in p})
            close = closest_name(prefix.rstrip("/"), folders)
            hint = f"; did you mean {close!r}?" if close else ""
            raise WorkspaceError(f"no files under {folder.strip()!r}{hint} "
                                 "(list_files[] lists every file)")
        shown = found[:LIST_FILES]
        more = f"\n... and {len(found) - len(shown)} more" if len(found) > len(shown) else ""
        return "\n".join(shown) + more

    def read(self, target: str) -> str:
        """Return lines of a file with their numbers: ``target`` is ``path``, ``path:N`` or
        ``path:N-M`` (at most :data:`READ_LINES` lines)."""
        path, _, span = target.strip().partition(":")
        lines = self.lines(path)
        path = self.path(path)
        if not lines:
            return f"{path} is empty."
        first, last = 1, len(lines)
        if span.strip():
            first, last = self._span(path, span, len(lines), clamp=True)
        shown_last = min(last, first + READ_LINES - 1)
        self.last_read = (path, first, shown_last)
        body = "\n".join(f"{n}:{lines[n - 1]}" for n in range(first, shown_last + 1))
        head = f"{path} lines {first}-{shown_last} of {len(lines)}:"
        tail = "" if shown_last == last else \
            f"\n... (read[{path}:{shown_last + 1}-{min(last, shown_last + READ_LINES)}] " \
            "for more)"
        return f"{head}\n{body}{tail}"

    def search(self, query: str, path: str = "") -> str:
        """Return every line holding ``query`` (case-sensitive) as ``path:line:text``, in
        the files under ``path`` (a file or folder; all files when empty)."""
        if not query.strip():
            raise WorkspaceError("search needs text to look for, e.g. search[def main]")
        prefix = path.strip().strip("/")
        if prefix:
            prefix = self.path(prefix, exists=False)
        hits = []
        for name in sorted(self.files):
            if prefix and name != prefix and not name.startswith(prefix + "/"):
                continue
            for number, line in enumerate(self.files[name].splitlines(), start=1):
                if query in line:
                    hits.append(f"{name}:{number}:{line}")
        if not hits:
            return f"No match for {query!r}."
        more = len(hits) - SEARCH_HITS
        return "\n".join(hits[:SEARCH_HITS]) + (f"\n... and {more} more matches"
                                                if more > 0 else "")

    # ----------------------------------------------------------------- writing
    def edit(self, target: str, text: str | None = None) -> str:
        """Replace lines of a file: ``target`` is ``path:N:new text`` (line N) or
        ``path:N-M:new text`` (lines N to M; the new text may span several lines, or be
        empty to delete them). With ``text`` given, ``target`` is ``path:N`` or
        ``path:N-M`` and ``text`` the new text. Returns the edited region, numbered."""
        path, _, rest = target.lstrip().partition(":")
        span, colon, inline = rest.partition(":")
        if text is None:
            if not colon:
                raise WorkspaceError(
                    "edit needs the new text after the line number and a second colon, "
                    "e.g. edit[pkg/mod.py:10:    return a + b]")
            text = inline
        elif colon:
            raise WorkspaceError("give the new text either after a second colon in target "
                                 "or as text, not both")
        lines = self.lines(path)
        path = self.path(path)
        if not span.strip():
            raise WorkspaceError(f"edit needs a line number: {path}:N:new text or "
                                 f"{path}:N-M:new text")
        first, last = self._span(path, span, max(len(lines), 1), clamp=False)
        new_lines = _split(text)
        lines[first - 1:last] = new_lines
        self._store(path, lines)
        what = f"line {first}" if first == last else f"lines {first}-{last}"
        return f"Edited {path} {what}:\n" + self._around(path, first, len(new_lines))

    def replace(self, path: str, old: str = "", new: str = "") -> str:
        """Replace the one occurrence of the text ``old`` in the file ``path`` by ``new``;
        returns the edited region, numbered."""
        path = self.path(path)
        if not old:
            raise WorkspaceError("replace needs the text to replace (old) and its "
                                 "replacement (new), so call it in the JSON format; in the "
                                 "one-argument format use edit[path:N:new text]")
        text = self.files[path]
        count = text.count(old)
        if count != 1:
            where = "does not occur" if not count else f"occurs {count} times"
            raise WorkspaceError(f"the old text {where} in {path}; give a piece of text "
                                 "that occurs exactly once (add a neighbouring line)")
        start = text[:text.index(old)].count("\n") + 1
        updated = text.replace(old, new, 1)
        self._check_size(path, updated)
        self.files[path] = updated
        return f"Edited {path}:\n" + self._around(path, start, new.count("\n") + 1)

    def create(self, path: str, text: str | None = None) -> str:
        """Create the file ``path`` with ``text``; in one argument, ``path`` is the path,
        a newline, then the content. Returns what was written."""
        if text is None:
            path, _, text = path.lstrip().partition("\n")
        path = self.path(path, exists=False)
        if path in self.files:
            raise WorkspaceError(f"{path} already exists; change it with edit or replace")
        if any(p.startswith(path + "/") for p in self.files) or any(
                path.startswith(p + "/") for p in self.files):
            raise WorkspaceError(f"{path} clashes with a folder or file of that name")
        if len(self.created) >= MAX_NEW_FILES:
            raise WorkspaceError(f"at most {MAX_NEW_FILES} new files per episode")
        content = text if not text or text.endswith("\n") else text + "\n"
        self._check_size(path, content)
        self.files[path] = content
        self.created.append(path)
        return f"Created {path} ({len(content.splitlines())} lines)."

    # ----------------------------------------------------------------- helpers
    def _span(self, path: str, span: str, size: int, *, clamp: bool) -> tuple[int, int]:
        match = _RANGE_RE.fullmatch(span)
        if match is None:
            raise WorkspaceError(f"{span.strip()!r} is not a line number or range; write "
                                 f"{path}:10 or {path}:10-20")
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        if clamp:
            last = min(last, size)
        if not 1 <= first <= last <= size:
            raise WorkspaceError(f"line range {match[0].strip()} is outside {path}, which "
                                 f"has {size} line{'s' if size != 1 else ''}; lines count "
                                 "from 1")
        return first, last

    def _store(self, path: str, lines: list[str]) -> None:
        text = "".join(line + "\n" for line in lines)
        self._check_size(path, text)
        self.files[path] = text

    @staticmethod
    def _check_size(path: str, text: str) -> None:
        if len(text) > MAX_FILE_CHARS:
            raise WorkspaceError(f"{path} would hold {len(text)} characters; at most "
                                 f"{MAX_FILE_CHARS}")

    def _around(self, path: str, first: int, count: int, context: int = 1) -> str:
        lines = self.files[path].splitlines()
        low = max(1, first - context)
        high = min(len(lines), first + max(count, 1) - 1 + context)
        if not lines:
            return "(the file is now empty)"
        return "\n".join(f"{n}:{lines[n - 1]}" for n in range(low, high + 1))


def _split(text: str) -> list[str]:
    """The lines of an edit's new text (``""``: none; one trailing newline ignored)."""
    if text == "":
        return []
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
