"""How user-facing errors write values and names: :func:`show` and :func:`kind_of` (a value as
the user typed it in YAML, and its type's YAML name), :func:`did_you_mean` and
:func:`unknown_name_message` (the hint every "unknown name" error appends).

It imports nothing of turnrl: the config tree, the registries, the algorithms and the envs all
word their errors with it, so it sits below every one of them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


def kind_of(value: Any) -> str:
    """The YAML-ish name of a value's type: null, mapping, int, str, list, ..."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def show(value: Any) -> str:
    """A value as the user wrote it in YAML: true, null, 3 (not 3.0), 'text'."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 1e15 else repr(value)
    return repr(value)


def closest_name(name: str, choices: list[str]) -> str | None:
    """The choice fewest typing edits away (swapping two neighbours counts as one edit),
    among those difflib also finds similar; ties go to difflib's similarity."""
    similar = difflib.get_close_matches(name, choices, n=len(choices) or 1)
    if not similar:
        return None
    ratio = {c: difflib.SequenceMatcher(None, name, c).ratio() for c in similar}
    return min(similar, key=lambda c: (_edit_distance(name, c), -ratio[c]))


def _edit_distance(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insert, delete, substitute, swap neighbours."""
    rows = [list(range(len(b) + 1))] + [[i] + [0] * len(b) for i in range(1, len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1)
    return rows[-1][-1]


def did_you_mean(name: str, choices: Iterable[str], *, otherwise: str = "",
                 prefix: str = "") -> str:
    """``"; did you mean 'grpo'?"`` for the choice closest to ``name`` (:func:`closest_name`),
    or ``otherwise`` when none is close: the one hint every "unknown name" error appends.
    With ``prefix`` (e.g. ``"gym:"``), names and choices are compared without it (a shared
    prefix would make every choice look close) and the hint puts it back."""
    close = closest_name(str(name).removeprefix(prefix),
                         [c.removeprefix(prefix) for c in choices])
    return f"; did you mean {prefix + close!r}?" if close else otherwise


def unknown_name_message(kind: str, name: str, choices: list[str]) -> str:
    """``unknown advantage 'gpro'; did you mean 'grpo'? choices: gae, grpo, ...``."""
    hint = did_you_mean(name, choices, otherwise=".")
    return f"unknown {kind} {name!r}{hint} Valid choices: {', '.join(choices)}"
