"""The difficulty options of a generated SWE task, and the named tiers.

A tier is a preset of options, from one that a tiny model can learn on a CPU (``tiny``: one
module of two functions, the failing test calls the buggy function, the issue says exactly
what went wrong) to ones that only a real model can solve (``hard``: several modules, the bug
two calls below what the failing test calls, an issue that describes the symptom in words).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from turnrl.envs.swe import library
from turnrl.envs.swe.mutate import BUG_KINDS

ISSUE_DETAILS = ("full", "example", "vague")
"""How much the issue text says: ``full`` names the function called, its arguments, what it
returned and what it should have returned; ``example`` shows the call and the wrong result
only; ``vague`` describes the symptom in words, naming no function."""

MAX_DISTANCE = 3
"""The longest call chain in the library (``week_number`` → ... → ``is_leap_year``)."""


@dataclass(frozen=True)
class SweOptions:
    """How hard a generated repository is; validated on construction (``ValueError`` naming
    the option and its allowed values).

    ``num_modules``: modules (files) in the package, 1 to the number of library themes.
    ``functions_per_module``: functions in each module, at most (a theme may run out).
    ``bug_kinds``: the kinds the injected bug is drawn from (:data:`.mutate.BUG_KINDS`).
    ``distance``: calls between what a failing test calls and the buggy function; 0 means
    the failing tests call it directly, and with 1 or more the functions nearer the bug
    have no tests of their own.
    ``issue_detail``: how much the issue says (:data:`ISSUE_DETAILS`).
    ``visible_failing``: whether the repository's own (visible) tests include one that
    fails because of the bug; when false, only the hidden tests expose it.
    """

    num_modules: int = 1
    functions_per_module: int = 2
    bug_kinds: tuple[str, ...] = ("wrong_operator", "wrong_constant")
    distance: int = 0
    issue_detail: str = "full"
    visible_failing: bool = True

    def __post_init__(self) -> None:
        themes, most = len(library.THEMES), max(
            len(library.theme_functions(theme)) for theme in library.THEMES)
        _check_int("num_modules", self.num_modules, 1, themes)
        _check_int("functions_per_module", self.functions_per_module, 1, most)
        _check_int("distance", self.distance, 0, MAX_DISTANCE)
        kinds = self.bug_kinds
        if isinstance(kinds, str) or not isinstance(kinds, (tuple, list)) or not kinds or \
                any(kind not in BUG_KINDS for kind in kinds) or len(set(kinds)) != len(kinds):
            raise ValueError(f"SweOptions.bug_kinds={kinds!r}: must be a non-empty list of "
                             f"distinct kinds from {list(BUG_KINDS)}")
        object.__setattr__(self, "bug_kinds", tuple(kinds))
        if self.issue_detail not in ISSUE_DETAILS:
            raise ValueError(f"SweOptions.issue_detail={self.issue_detail!r}: must be one of "
                             f"{list(ISSUE_DETAILS)}")
        if not isinstance(self.visible_failing, bool):
            raise ValueError(f"SweOptions.visible_failing={self.visible_failing!r}: must be "
                             "true or false")
        if not any(library.fits(library.closure(chain[:1]), self.num_modules,
                                self.functions_per_module)
                   for chain in library.call_chains(self.distance)):
            raise ValueError(
                f"SweOptions.distance={self.distance}: no call chain that long fits in "
                f"num_modules={self.num_modules} of functions_per_module="
                f"{self.functions_per_module}; raise num_modules or functions_per_module, or "
                "lower distance")


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"SweOptions.{name}={value!r}: must be an integer from {low} to {high}")


TIERS: dict[str, SweOptions] = {
    "tiny": SweOptions(num_modules=1, functions_per_module=2,
                       bug_kinds=("wrong_operator", "wrong_constant"), distance=0,
                       issue_detail="full", visible_failing=True),
    "small": SweOptions(num_modules=2, functions_per_module=3,
                        bug_kinds=("off_by_one", "wrong_operator", "wrong_comparison",
                                   "wrong_constant"),
                        distance=0, issue_detail="full", visible_failing=True),
    "medium": SweOptions(num_modules=3, functions_per_module=4, bug_kinds=BUG_KINDS,
                         distance=1, issue_detail="example", visible_failing=False),
    "hard": SweOptions(num_modules=4, functions_per_module=5, bug_kinds=BUG_KINDS,
                       distance=2, issue_detail="vague", visible_failing=False),
}
"""Named presets, easiest first."""


def options_for(tier: str | None = None, **overrides: Any) -> SweOptions:
    """Return the options of ``tier`` (the defaults, which are the ``tiny`` tier's, when
    ``None``) with ``overrides`` applied, validated. Raises ``ValueError`` for an unknown
    tier or option."""
    if tier is not None and tier not in TIERS:
        raise ValueError(f"unknown SWE tier {tier!r}; the tiers are {list(TIERS)}")
    names = [field.name for field in fields(SweOptions)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ValueError(f"unknown SweOptions {unknown}; the options are {names}")
    return replace(TIERS[tier] if tier else SweOptions(), **overrides)
