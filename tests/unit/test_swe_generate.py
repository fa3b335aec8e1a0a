"""The procedural repository generator behind the future ``swe-v0`` env (issue 43).

Most checks run the generated tests in-process (``turnrl.envs.swe.execute.run_tests``) over a
dozen seeds per tier; one check runs them with real pytest, after applying the test patch and
the gold patch with ``git apply``, so the diffs are proved to be real, applicable diffs.
"""

from __future__ import annotations

import ast
import os
import random
import re
import shutil
import subprocess
import sys
from itertools import zip_longest
from pathlib import Path

import pytest

from turnrl.envs.swe import (
    BUG_KINDS,
    TIERS,
    SweInstance,
    SweOptions,
    generate_instance,
    library,
    options_for,
    write_files,
)
from turnrl.envs.swe.execute import call_with_budget, load_package, run_tests
from turnrl.envs.swe.mutate import find_mutations

SEEDS = range(12)


@pytest.fixture(scope="module")
def instances() -> dict[tuple[str, int], SweInstance]:
    return {(tier, seed): generate_instance(seed, options)
            for tier, options in TIERS.items() for seed in SEEDS}


def called_functions(instance: SweInstance) -> dict[str, str]:
    """Test id → the library function that the test calls (``assert f(...) == value``)."""
    called = {}
    for path, text in all_tests_of(instance).items():
        if path.startswith("tests/"):
            for node in ast.parse(text).body:
                if isinstance(node, ast.FunctionDef):
                    called[f"{path}::{node.name}"] = node.body[0].test.left.func.id
    return called


def all_tests_of(instance: SweInstance) -> dict[str, str]:
    """The instance's buggy files with its hidden tests added."""
    return {**instance.files, **instance.hidden_tests}


# ----------------------------------------------------------------------------- determinism
def test_the_same_seed_gives_the_same_instance_and_other_seeds_differ():
    first, again = generate_instance(7, TIERS["medium"]), generate_instance(7, TIERS["medium"])
    assert first == again
    assert first.to_swe_record() == again.to_swe_record()
    others = [generate_instance(seed, TIERS["medium"]) for seed in range(4)]
    assert len({repr(sorted(other.files.items())) for other in others}) == 4
    assert len({other.instance_id for other in others}) == 4


def test_other_options_give_another_instance_id():
    assert generate_instance(3, TIERS["tiny"]).instance_id != \
        generate_instance(3, TIERS["small"]).instance_id


# ----------------------------------------------------------------------------- the labels
def test_fail_to_pass_fail_on_the_bug_and_everything_passes_once_fixed(instances):
    for (tier, seed), instance in instances.items():
        buggy = run_tests(instance.package, all_tests_of(instance))
        fixed = run_tests(instance.package, {**instance.solution_files,
                                             **instance.hidden_tests})
        where = f"{tier} seed {seed}"
        assert instance.fail_to_pass, where
        assert set(buggy) == set(instance.fail_to_pass) | set(instance.pass_to_pass), where
        assert not set(instance.fail_to_pass) & set(instance.pass_to_pass), where
        assert all(buggy[test].raised for test in instance.fail_to_pass), where
        assert not any(buggy[test].raised for test in instance.pass_to_pass), where
        assert not any(outcome.raised for outcome in fixed.values()), where


def _pytest_outcomes(roots: list[Path], base: Path) -> dict[str, str]:
    """Test id (relative to ``base``) → PASSED/FAILED, from one real pytest run."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(root) for root in roots)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
         "--import-mode=importlib", "--rootdir", str(base), "-c", str(base / "pytest.ini"),
         *(str(root / "tests") for root in roots)],
        cwd=base, env=env, capture_output=True, text=True, timeout=120)
    outcomes = dict(reversed(found) for found in
                    re.findall(r"^(PASSED|FAILED) (\S+)", done.stdout, re.MULTILINE))
    assert outcomes, done.stdout + done.stderr
    return outcomes


def _git_apply(patch: str, root: Path) -> None:
    (root / "change.patch").write_text(patch)
    subprocess.run(["git", "apply", "change.patch"], cwd=root, check=True, capture_output=True)
    (root / "change.patch").unlink()


@pytest.mark.skipif(shutil.which("git") is None, reason="git apply needs git")
def test_real_pytest_agrees_after_git_apply_of_the_test_patch_and_the_gold_patch(tmp_path):
    # one instance per tier, with distinct package names, run together in one pytest process
    chosen = {tier: generate_instance(seed, TIERS[tier])
              for tier, seed in zip(TIERS, (11, 12, 13, 14), strict=True)}
    assert len({instance.package for instance in chosen.values()}) == len(chosen)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    roots = [tmp_path / tier for tier in chosen]
    for root, instance in zip(roots, chosen.values(), strict=True):
        write_files(instance.files, root)
        _git_apply(instance.test_patch, root)  # adds the hidden tests
        assert all((root / path).read_text() == text
                   for path, text in instance.hidden_tests.items())
    buggy = _pytest_outcomes(roots, tmp_path)
    for root, instance in zip(roots, chosen.values(), strict=True):
        _git_apply(instance.patch, root)
        on_disk = {str(path.relative_to(root)): path.read_text()
                   for path in root.rglob("*") if path.is_file()}
        assert on_disk == {**instance.solution_files, **instance.hidden_tests}
    fixed = _pytest_outcomes(roots, tmp_path)
    for tier, instance in chosen.items():
        assert {f"{tier}/{t}" for t in instance.fail_to_pass} == \
            {t for t, outcome in buggy.items() if t.startswith(f"{tier}/") and outcome == "FAILED"}
        assert {f"{tier}/{t}" for t in instance.pass_to_pass} == \
            {t for t, outcome in buggy.items() if t.startswith(f"{tier}/") and outcome == "PASSED"}
    assert set(fixed.values()) == {"PASSED"} and len(fixed) == len(buggy)


# ----------------------------------------------------------------------------- bug kinds
@pytest.mark.parametrize("kind", BUG_KINDS)
def test_every_bug_kind_can_be_produced(kind):
    instance = generate_instance(0, options_for("medium", bug_kinds=(kind,)))
    assert instance.bug_kind == kind
    changed = re.findall(r"^diff --git a/(\S+)", instance.patch, re.MULTILINE)
    assert changed == [instance.bug_location.file]
    buggy_lines = instance.files[instance.bug_location.file].splitlines()
    fixed_lines = instance.solution_files[instance.bug_location.file].splitlines()
    first_difference = next(i for i, (a, b) in enumerate(zip_longest(buggy_lines, fixed_lines))
                            if a != b)
    assert first_difference + 1 == instance.bug_location.line


def test_the_gold_patch_is_a_small_edit(instances):
    for instance in instances.values():
        body = [line for line in instance.patch.splitlines()
                if line[:1] in "+-" and not line.startswith(("+++", "---"))]
        assert 1 <= len(body) <= 6, instance.patch


def test_the_mutation_operators_edit_only_their_site():
    text = ('def f(items, n, flag=True):\n    """Doc."""\n    if not items:\n        return 0\n'
            "    total = 0\n    for i in range(1, n):\n        total += g(items[i], 2)\n"
            "    if total < 10:\n        return total\n    elif total == 10:\n"
            "        return -1\n    return total * 3\n")
    made = {kind: {m.apply(text) for m in find_mutations(text, "f", [kind])}
            for kind in BUG_KINDS}
    assert text.replace("range(1, n)", "range(1, n + 1)") in made["off_by_one"]
    assert text.replace("items[i]", "items[i - 1]") in made["off_by_one"]
    assert text.replace("total * 3", "total + 3") in made["wrong_operator"]
    assert text.replace("total += g", "total -= g") in made["wrong_operator"]
    assert text.replace("total < 10", "total <= 10") in made["wrong_comparison"]
    assert text.replace("g(items[i], 2)", "g(2, items[i])") in made["swapped_arguments"]
    assert text.replace("total * 3", "total * 4") in made["wrong_constant"]
    assert text.replace("    if not items:\n        return 0\n", "") in made["missing_case"]
    assert text.replace("    if total < 10:\n        return total\n    elif total == 10:\n",
                        "    if total == 10:\n") in made["missing_case"]
    assert text.replace("    elif total == 10:\n        return -1\n", "") in made["missing_case"]
    assert made["wrong_default"] == {text.replace("flag=True", "flag=False")}
    for mutants in made.values():
        for mutant in mutants:
            compile(mutant, "mutant", "exec")


def test_a_runaway_mutant_stops_at_the_step_budget():
    package = load_package("pkg", {"loop": "def spin(n):\n    while n >= 0:\n        n //= 1\n"})
    outcome = call_with_budget(package.modules["loop"].spin, (3,), budget=500)
    assert outcome.error_type == "StepBudgetExceeded" and outcome.hard
    assert call_with_budget(lambda: [][1], ()).error_type == "IndexError"
    assert not call_with_budget(lambda: [][1], ()).hard


# ----------------------------------------------------------------------------- the issue
def test_the_issue_never_gives_the_location(instances):
    for instance in instances.values():
        text, where = instance.problem_statement, instance.bug_location
        module = where.file.removesuffix(".py")
        for leak in (where.file, where.file.split("/")[-1], module.replace("/", "."),
                     f"line {where.line}"):
            assert leak not in text, (leak, text)
        detail = instance.options.issue_detail
        if detail == "vague":
            assert instance.entry_function not in text and where.function not in text
        else:
            assert f"`{instance.entry_function}`" in text
        assert ("I expected it to return" in text) == (detail == "full")


# ----------------------------------------------------------------------------- the tests
def test_hidden_tests_stay_out_of_the_repository_and_use_other_inputs(instances):
    for instance in instances.values():
        assert not set(instance.hidden_tests) & set(instance.files)
        assert all(path.startswith("tests/test_") for path in instance.hidden_tests)
        record = instance.to_swe_record()
        assert record["repo_files"] == instance.files
        assert all(path not in record["repo_files"] for path in instance.hidden_tests)

        def asserts(files: dict[str, str]) -> set[str]:
            return {line.strip() for text in files.values() for line in text.splitlines()
                    if line.strip().startswith("assert ")}

        visible = asserts({p: t for p, t in instance.files.items() if p.startswith("tests/")})
        assert visible and not visible & asserts(instance.hidden_tests)
        hidden_f2p = [t for t in instance.fail_to_pass if t.split("::")[0] in
                      instance.hidden_tests]
        assert hidden_f2p, "the hidden tests must show the bug"


def test_visible_failing_decides_whether_the_repository_tests_show_the_bug(instances):
    for instance in instances.values():
        visible_f2p = [t for t in instance.fail_to_pass if t.split("::")[0] in instance.files]
        assert bool(visible_f2p) == instance.options.visible_failing


def test_the_failing_tests_are_as_far_from_the_bug_as_distance_says(instances):
    for instance in instances.values():
        distance, buggy = instance.options.distance, instance.bug_location.function
        assert library.call_distance(instance.entry_function, buggy) == distance
        calls = called_functions(instance)
        assert set(calls) == set(instance.fail_to_pass) | set(instance.pass_to_pass)
        called = {calls[test_id] for test_id in instance.fail_to_pass}
        assert instance.entry_function in called
        assert all(library.call_distance(name, buggy) >= distance for name in called)
        if distance:  # the functions nearer the bug than `distance` have no tests at all
            assert all(library.call_distance(name, buggy) in (None, *range(distance, 9))
                       for name in calls.values())


def test_the_package_has_the_modules_and_functions_the_options_ask_for(instances):
    for instance in instances.values():
        options = instance.options
        modules = [path for path in instance.files if path.startswith(f"{instance.package}/")
                   and not path.endswith("__init__.py")]
        assert len(modules) == options.num_modules
        for path in modules:
            count = sum(isinstance(node, ast.FunctionDef)
                        for node in ast.parse(instance.files[path]).body)
            assert 1 <= count <= options.functions_per_module
        assert 'pythonpath = ["."]' in instance.files["pyproject.toml"]
        assert instance.files["README.md"].startswith(f"# {instance.package}\n")


# ----------------------------------------------------------------------------- options
@pytest.mark.parametrize(("option", "value"), [
    ("num_modules", 0), ("num_modules", 99), ("functions_per_module", 0),
    ("bug_kinds", ("typo",)), ("bug_kinds", ()), ("bug_kinds", "off_by_one"),
    ("distance", -1), ("distance", 9), ("issue_detail", "loud"), ("visible_failing", "yes"),
])
def test_bad_options_name_the_option(option, value):
    with pytest.raises(ValueError, match=f"SweOptions.{option}="):
        SweOptions(**{option: value})


def test_options_that_cannot_fit_the_distance_and_unknown_names_are_refused():
    with pytest.raises(ValueError, match="distance=2"):
        SweOptions(num_modules=1, functions_per_module=2, distance=2)
    with pytest.raises(ValueError, match="tier 'huge'"):
        options_for("huge")
    with pytest.raises(ValueError, match="colour"):
        options_for("tiny", colour=1)
    with pytest.raises(TypeError, match="SweOptions"):
        generate_instance(0, "tiny")
    assert options_for("hard", bug_kinds=["off_by_one"]).bug_kinds == ("off_by_one",)


def test_the_record_is_in_swe_bench_form(instances):
    record = instances[("small", 0)].to_swe_record()
    assert {"instance_id", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS", "patch",
            "test_patch", "repo_files"} <= set(record)
    assert isinstance(record["FAIL_TO_PASS"], list) and record["FAIL_TO_PASS"]
    assert record["patch"].startswith("diff --git a/") and "\n--- a/" in record["patch"]
    assert record["test_patch"].startswith("diff --git a/tests/")
    assert "new file mode 100644\n--- /dev/null\n+++ b/tests/" in record["test_patch"]


# ----------------------------------------------------------------------------- the library
def test_the_library_functions_keep_their_docstring_examples():
    texts = {}
    for theme in library.THEMES:
        names = library.theme_functions(theme)
        imports = "".join(f"from pkg.{library.FUNCTIONS[callee].theme} import {callee}\n"
                          for name in names for callee in sorted(library.CALLS[name])
                          if library.FUNCTIONS[callee].theme != theme)
        texts[theme] = imports + "".join(library.FUNCTIONS[n].source for n in names)
    package = load_package("pkg", texts)
    namespace = {name: getattr(package.modules[f.theme], name)
                 for name, f in library.FUNCTIONS.items()}
    examples = 0
    for name, function in library.FUNCTIONS.items():
        assert function.source.isascii() and function.source.startswith(f"def {name}(")
        for call, expected in re.findall(r"``(\w+\([^`]*\))`` is ``([^`]*)``",
                                         namespace[name].__doc__):
            assert eval(call, dict(namespace)) == ast.literal_eval(expected), (name, call)
            examples += 1
        rng = random.Random(0)
        for _ in range(20):
            assert not call_with_budget(namespace[name], function.inputs(rng)).raised, name
    assert examples >= 30
    assert len(library.FUNCTIONS) >= 25
    assert all(library.call_chains(distance) for distance in range(4))
