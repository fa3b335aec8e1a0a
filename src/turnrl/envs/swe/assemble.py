"""Turns a chosen bug into a :class:`.SweInstance`: picks the visible and hidden tests,
labels them fail-to-pass or pass-to-pass, and renders the files, the issue and the patches.

The labels come from what the buggy code did on each test's input (:class:`Draft`'s
``outcomes``), so a fail-to-pass test fails on the buggy files by construction.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

from turnrl.envs.swe import library
from turnrl.envs.swe.entry import Args
from turnrl.envs.swe.execute import Outcome
from turnrl.envs.swe.instance import BugLocation, GradedCall, SweInstance
from turnrl.envs.swe.issue import problem_statement
from turnrl.envs.swe.mutate import Mutation
from turnrl.envs.swe.options import SweOptions
from turnrl.envs.swe.render import (
    CallCheck,
    git_diff,
    init_text,
    pyproject_text,
    readme_text,
    render_test_file,
)

VISIBLE_TESTS = 3
"""Visible tests per tested function (fewer when its inputs run out)."""
HIDDEN_TESTS = 4
"""Hidden tests per tested function, on inputs that no visible test uses."""


@dataclass(frozen=True)
class Draft:
    """Everything :func:`assemble` needs: the package (``layout``: theme → its functions in
    file order, ``module_names``: theme → module, ``correct``: module → correct text), the
    call chain's ends (``entry`` calls down to ``buggy``), the ``tested`` functions, the
    bug (``mutation`` of the buggy function's module), each tested function's ``pools`` of
    (arguments, correct result) and, for those that reach the bug, the buggy ``outcomes``
    on the same pool."""

    seed: int
    options: SweOptions
    package: str
    layout: dict[str, list[str]]
    module_names: dict[str, str]
    correct: dict[str, str]
    entry: str
    buggy: str
    tested: list[str]
    mutation: Mutation
    pools: dict[str, list[tuple[Args, Any]]]
    outcomes: dict[str, list[Outcome]]


def passes(outcome: Outcome, expected: Any) -> bool:
    """True when a test asserting ``== expected`` passes on ``outcome``."""
    return not outcome.raised and bool(outcome.value == expected)


def failing_indices(draft: Draft, name: str) -> set[int]:
    """The indices of ``name``'s pool on which the buggy code fails the test."""
    if name not in draft.outcomes:
        return set()
    return {i for i, (outcome, (_, expected)) in
            enumerate(zip(draft.outcomes[name], draft.pools[name], strict=True))
            if not passes(outcome, expected)}


def split_inputs(rng: random.Random, size: int, failing: set[int], *,
                 visible_fails: bool | None, hidden_fails: bool) -> tuple[list[int], list[int]]:
    """Split pool indices ``0..size-1`` into visible and hidden tests (sorted, disjoint).

    ``visible_fails``: True puts one failing input among the visible tests, False keeps
    them all passing, None draws them regardless. ``hidden_fails`` puts two failing inputs
    (one when there are no more to spare) among the hidden tests. The caller guarantees
    enough failing (and passing) inputs."""
    spare = len(failing) - (visible_fails is True)
    reserved = rng.sample(sorted(failing), min(2, spare)) if hidden_fails else []
    rest = [i for i in range(size) if i not in reserved]
    if visible_fails is True:
        first = rng.choice(sorted(failing - set(reserved)))
        others = [i for i in rest if i != first]
        visible = [first, *rng.sample(others, min(VISIBLE_TESTS - 1, len(others)))]
    else:
        allowed = [i for i in rest if not (visible_fails is False and i in failing)]
        visible = rng.sample(allowed, min(VISIBLE_TESTS, len(allowed)))
    left = [i for i in rest if i not in visible]
    hidden = reserved + rng.sample(left, min(HIDDEN_TESTS - len(reserved), len(left)))
    return sorted(visible), sorted(hidden)


def assemble(draft: Draft, rng: random.Random) -> SweInstance:
    """Return the instance of ``draft``; ``rng`` draws the test split and the issue's
    wording."""
    module_of = {name: draft.module_names[theme]
                 for theme, names in draft.layout.items() for name in names}
    visible: dict[str, list[CallCheck]] = {}
    hidden: dict[str, list[CallCheck]] = {}
    failed: set[tuple[str, str]] = set()  # (module, test name) failing on the buggy code
    example: tuple[CallCheck, Outcome] | None = None
    for theme, names in draft.layout.items():
        module = draft.module_names[theme]
        for name in (n for n in names if n in draft.tested):
            failing = failing_indices(draft, name)
            # the entry function's tests show the bug (among the visible ones only when the
            # options say so); with visible_failing off, no visible test of any function fails
            visible_fails = (True if name == draft.entry else None) \
                if draft.options.visible_failing else False
            shown, kept = split_inputs(rng, len(draft.pools[name]), failing,
                                       visible_fails=visible_fails,
                                       hidden_fails=name == draft.entry)
            for number, index in enumerate(shown + kept, start=1):
                args, expected = draft.pools[name][index]
                check = CallCheck(f"test_{name}_{number}", name, args, expected)
                (visible if index in shown else hidden).setdefault(module, []).append(check)
                if index in failing:
                    failed.add((module, check.name))
                    if example is None and name == draft.entry and index in kept:
                        example = (check, draft.outcomes[name][index])
    assert example is not None, "the entry function has a failing hidden test"
    return _instance(draft, rng, module_of, visible, hidden, failed, example)


def _instance(draft: Draft, rng: random.Random, module_of: dict[str, str],
              visible: dict[str, list[CallCheck]], hidden: dict[str, list[CallCheck]],
              failed: set[tuple[str, str]], example: tuple[CallCheck, Outcome]) -> SweInstance:
    package, options, mutation = draft.package, draft.options, draft.mutation
    modules = {draft.module_names[theme]: names for theme, names in draft.layout.items()}
    themes = {module: theme for theme, module in draft.module_names.items()}
    buggy_module = module_of[draft.buggy]
    common = {f"{package}/__init__.py": init_text(package, modules),
              "README.md": readme_text(package, modules, themes),
              "pyproject.toml": pyproject_text(package)}
    for module in sorted(visible):
        common[f"tests/test_{module}.py"] = render_test_file(package, module, visible[module])
    solution = {**common, **{f"{package}/{m}.py": t for m, t in draft.correct.items()}}
    buggy_path = f"{package}/{buggy_module}.py"
    files = {**solution, buggy_path: mutation.apply(draft.correct[buggy_module])}
    hidden_files = {f"tests/test_{module}_hidden.py": render_test_file(package, module, checks)
                    for module, checks in sorted(hidden.items())}
    ids: list[tuple[str, bool]] = []
    calls: list[GradedCall] = []
    for suffix, checks_by_module in (("", visible), ("_hidden", hidden)):
        for module in sorted(checks_by_module):
            for call in checks_by_module[module]:
                test_id = f"tests/test_{module}{suffix}.py::{call.name}"
                ids.append((test_id, (module, call.name) in failed))
                calls.append(GradedCall(test_id, f"{package}.{module}", call.function,
                                        tuple(call.args), call.expected))
    check, observed = example
    digest = hashlib.sha256(repr(options).encode()).hexdigest()[:6]
    return SweInstance(
        instance_id=f"{package}-{draft.seed}-{digest}", seed=draft.seed, options=options,
        package=package, files=dict(sorted(files.items())), hidden_tests=hidden_files,
        solution_files=dict(sorted(solution.items())),
        fail_to_pass=tuple(test_id for test_id, fails in ids if fails),
        pass_to_pass=tuple(test_id for test_id, fails in ids if not fails),
        problem_statement=problem_statement(options.issue_detail, package, check, observed,
                                            library.FUNCTIONS[draft.entry].task, rng),
        patch=git_diff(files, solution), test_patch=git_diff({}, hidden_files),
        bug_kind=mutation.kind,
        bug_location=BugLocation(buggy_path, draft.buggy, mutation.line),
        bug_description=mutation.description, entry_function=draft.entry,
        graded_calls=tuple(calls))
