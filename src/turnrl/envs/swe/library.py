"""The generator's library: small, correct, pure, documented functions grouped into themes.

A generated package holds a few themes as modules and a few of each theme's functions; one
function gets a bug. Functions call each other (``day_of_year`` calls ``days_in_month``,
which calls ``is_leap_year``; ``format_clock`` calls ``pad_left`` of the ``text`` theme), so a
bug can sit in a helper that a test reaches only through its callers: the call graph below
measures how far. The functions themselves live in :mod:`.themes_basic`,
:mod:`.themes_money` and :mod:`.themes_records`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from turnrl.envs.swe import themes_basic, themes_money, themes_records
from turnrl.envs.swe.entry import LibraryFunction, Theme

THEMES: dict[str, Theme] = {
    theme.key: theme
    for theme in (*themes_basic.THEMES, *themes_money.THEMES, *themes_records.THEMES)
}
"""Every theme by key, in library order."""

FUNCTIONS: dict[str, LibraryFunction] = {
    function.name: function
    for function in (*themes_basic.FUNCTIONS, *themes_money.FUNCTIONS,
                     *themes_records.FUNCTIONS)
}
"""Every library function by name, in library order (theme by theme)."""


def _direct_calls(function: LibraryFunction) -> frozenset[str]:
    """The library functions that ``function``'s source calls by name."""
    return frozenset(node.func.id for node in ast.walk(ast.parse(function.source))
                     if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                     and node.func.id in FUNCTIONS and node.func.id != function.name)


CALLS: dict[str, frozenset[str]] = {name: _direct_calls(f) for name, f in FUNCTIONS.items()}
"""Function name → the library functions it calls directly."""


def theme_functions(theme: str) -> list[str]:
    """Return the names of ``theme``'s functions, in library order."""
    return [name for name, function in FUNCTIONS.items() if function.theme == theme]


def closure(names: Iterable[str]) -> frozenset[str]:
    """Return ``names`` together with every library function they call, directly or not:
    what a package must hold for ``names`` to run."""
    found: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending.extend(CALLS[name])
    return frozenset(found)


def call_distance(caller: str, callee: str) -> int | None:
    """Return the fewest calls from ``caller`` down to ``callee`` (0 when they are the same
    function), or ``None`` when ``caller`` never reaches ``callee``."""
    frontier, seen, steps = {caller}, {caller}, 0
    while frontier:
        if callee in frontier:
            return steps
        frontier = {nxt for name in frontier for nxt in CALLS[name]} - seen
        seen |= frontier
        steps += 1
    return None


def call_chains(distance: int) -> list[tuple[str, ...]]:
    """Return every chain ``(entry, ..., buggy)`` of ``distance + 1`` functions, each
    calling the next, in which ``entry`` reaches ``buggy`` in no fewer than ``distance``
    calls; in library order. ``distance`` 0 gives one single-function chain per function."""
    chains: list[tuple[str, ...]] = [(name,) for name in FUNCTIONS]
    for _ in range(distance):
        chains = [(caller, *chain) for chain in chains for caller in FUNCTIONS
                  if chain[0] in CALLS[caller]]
    return [chain for chain in chains if call_distance(chain[0], chain[-1]) == distance]


def themes_of(names: Iterable[str]) -> frozenset[str]:
    """Return the themes that the functions ``names`` belong to."""
    return frozenset(FUNCTIONS[name].theme for name in names)


def fits(names: Iterable[str], num_modules: int, functions_per_module: int) -> bool:
    """Tell whether the functions ``names`` fit in a package of at most ``num_modules``
    modules of at most ``functions_per_module`` functions each."""
    per_theme: dict[str, int] = {}
    for name in names:
        theme = FUNCTIONS[name].theme
        per_theme[theme] = per_theme.get(theme, 0) + 1
    return len(per_theme) <= num_modules and max(per_theme.values(), default=0) <= \
        functions_per_module
