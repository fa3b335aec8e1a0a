"""swe-v0: the file tools, run_tests, the oracle on every tier, grading and its options.

The attacks on the grader are in ``test_swe_attacks.py``, ``swe-local-v0`` in
``test_swe_local.py``. The file tools run in-process (no sandbox); a sandbox call costs a
fraction of a second, so each test makes only a few.
"""

from __future__ import annotations

import pytest

from turnrl.envs import check_env, make
from turnrl.envs.swe import TIERS, generate_instance
from turnrl.envs.swe.generated_env import SweGenerated
from turnrl.envs.swe.oracle import OracleState, edit_argument, next_edit, oracle_step
from turnrl.envs.swe.patches import PatchError, apply_patch, parse_patch
from turnrl.envs.swe.workspace import READ_LINES, Workspace, WorkspaceError

FILES = {"pkg/__init__.py": "", "pkg/mod.py": "def f(x):\n    return x + 1\n\n\ndef g():\n"
         "    return [1,\n            2]\n", "tests/test_mod.py": "from pkg.mod import f\n\n\n"
         "def test_f():\n    assert f(1) == 2\n", "README.md": "# pkg\n"}


def play_oracle(env, seed):
    env.reset(seed=seed)
    actions, result = [], None
    while (action := env.oracle_action()) is not None:
        assert env.oracle_action() == action  # pure
        actions.append(action)
        result = env.step(action)
    return actions, result


# ----------------------------------------------------------------------------- file tools
def test_read_shows_numbered_lines_and_ranges():
    space = Workspace(FILES)
    assert space.read("pkg/mod.py:1-2") == "pkg/mod.py lines 1-2 of 7:\n1:def f(x):\n" \
        "2:    return x + 1"
    assert space.read("pkg/mod.py:7").endswith("7:            2]")
    assert space.read(" ./pkg/mod.py:6-99 ").startswith("pkg/mod.py lines 6-7 of 7:")
    long = Workspace({"a.py": "".join(f"x{n} = {n}\n" for n in range(200))})
    assert f"read[a.py:{READ_LINES + 1}-{2 * READ_LINES}] for more" in long.read("a.py")


@pytest.mark.parametrize("target, fragment", [
    ("pkg/mdo.py", "did you mean 'pkg/mod.py'"),
    ("mod.py", "did you mean 'pkg/mod.py'"),
    ("../etc/passwd", "outside the repository"),
    ("/etc/passwd", "outside the repository"),
    ("pkg/../pkg/mod.py", "outside the repository"),
    ("pkg//mod.py", "not a file path"),
    ("pkg/mod.py:0-2", "outside pkg/mod.py, which has 7 lines"),
    ("pkg/mod.py:5-3", "outside pkg/mod.py"),
    ("pkg/mod.py:two", "not a line number or range"),
])
def test_read_errors_say_what_was_wrong(target, fragment):
    with pytest.raises(WorkspaceError, match=fragment.replace("(", r"\(").replace(".", r"\.")):
        Workspace(FILES).read(target)


def test_list_files_and_search():
    space = Workspace(FILES)
    assert space.list_files() == "README.md\npkg/__init__.py\npkg/mod.py\ntests/test_mod.py"
    assert space.list_files("pkg/") == "pkg/__init__.py\npkg/mod.py"
    with pytest.raises(WorkspaceError, match="did you mean 'pkg'"):
        space.list_files("pgk")
    assert space.search("return") == "pkg/mod.py:2:    return x + 1\npkg/mod.py:6:    return [1,"
    assert space.search("f(1)", "tests") == "tests/test_mod.py:5:    assert f(1) == 2"
    assert space.search("nowhere") == "No match for 'nowhere'."
    with pytest.raises(WorkspaceError, match="needs text"):
        space.search("  ")


def test_edit_replaces_inserts_and_deletes_lines():
    space = Workspace(FILES)
    shown = space.edit("pkg/mod.py:2:    return x + 2")
    assert shown == "Edited pkg/mod.py line 2:\n1:def f(x):\n2:    return x + 2\n3:"
    assert space.files["pkg/mod.py"].startswith("def f(x):\n    return x + 2\n\n")
    space.edit("pkg/mod.py:6-7:    return [1, 2]")  # two lines become one
    assert space.files["pkg/mod.py"].endswith("def g():\n    return [1, 2]\n")
    space.edit("pkg/mod.py:2:    y = x + 2\n    return y")  # one line becomes two
    assert space.lines("pkg/mod.py")[1:3] == ["    y = x + 2", "    return y"]
    space.edit("pkg/mod.py:3-4:")  # empty text deletes
    assert space.lines("pkg/mod.py")[1:3] == ["    y = x + 2", ""]
    space.edit("pkg/mod.py:1", text="def f(x):  # json form")
    assert space.lines("pkg/mod.py")[0] == "def f(x):  # json form"


@pytest.mark.parametrize("target, fragment", [
    ("pkg/mod.py:2", "after the line number and a second colon"),
    ("pkg/mod.py:9:x", "outside pkg/mod.py, which has 7 lines"),
    ("pkg/mod.py::x", "needs a line number"),
    ("../x.py:1:x", "outside the repository"),
    ("/tmp/x.py:1:x", "outside the repository"),
    ("pkg/nope.py:1:x", "no file 'pkg/nope.py'"),
])
def test_edit_errors_change_nothing(target, fragment):
    space = Workspace(FILES)
    with pytest.raises(WorkspaceError, match=fragment):
        space.edit(target)
    assert space.files == FILES


def test_replace_needs_exactly_one_occurrence_and_create_makes_new_files_only():
    space = Workspace(FILES)
    assert "2:    return x - 1" in space.replace("pkg/mod.py", "x + 1", "x - 1")
    with pytest.raises(WorkspaceError, match="does not occur"):
        space.replace("pkg/mod.py", "x + 1", "y")
    with pytest.raises(WorkspaceError, match="occurs 2 times"):
        space.replace("pkg/mod.py", "return", "yield")
    with pytest.raises(WorkspaceError, match="JSON format"):
        space.replace("pkg/mod.py")  # the one-argument form has no old text
    assert space.create("pkg/util.py\nX = 1") == "Created pkg/util.py (1 lines)."
    assert space.files["pkg/util.py"] == "X = 1\n" and space.created == ["pkg/util.py"]
    for path, fragment in (("pkg/mod.py", "already exists"), ("../x.py", "outside"),
                           ("/tmp/x.py", "outside"), ("pkg/mod.py/x.py", "clashes")):
        with pytest.raises(WorkspaceError, match=fragment):
            space.create(path, "X = 2\n")
    assert set(space.files) == {*FILES, "pkg/util.py"}


# ----------------------------------------------------------------------------- patches, oracle
def test_the_gold_patch_parses_and_applies_for_every_tier():
    for tier, options in TIERS.items():
        instance = generate_instance(5, options)
        assert apply_patch(instance.files, instance.patch) == instance.solution_files, tier
        added = apply_patch(instance.files, instance.test_patch)
        assert added == {**instance.files, **instance.hidden_tests}
        assert [p.path for p in parse_patch(instance.test_patch)] == sorted(instance.hidden_tests)
    with pytest.raises(PatchError, match="does not match"):
        apply_patch({"a.py": "x = 1\n"}, "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-y = 1\n+y = 2\n")


def test_oracle_edits_balance_brackets_and_survive_random_edits():
    target = {**FILES, "pkg/mod.py": FILES["pkg/mod.py"].replace("[1,\n            2]",
                                                                 "[1,\n            3]")}
    edit = next_edit(FILES, target)
    assert edit is not None and (edit.first, edit.last) == (6, 7)  # widened to close "["
    assert edit.lines == ("    return [1,", "            3]")
    state = OracleState(FILES, target, frozenset(), searched=False, tested=False,
                        turns_left=10)
    assert oracle_step(state) == ("search", "def g")
    state = OracleState(FILES, target, frozenset(), searched=True, tested=False,
                        turns_left=10)
    assert oracle_step(state) == ("read", "pkg/mod.py:3-7")
    assert oracle_step(OracleState(FILES, target, frozenset(), True, False, 3))[0] == "edit"
    assert oracle_step(OracleState(target, target, frozenset(), True, False, 3)) == \
        ("run_tests", "")
    assert oracle_step(OracleState(target, target, frozenset(), True, True, 3)) == ("submit", "")


def test_oracle_edits_reach_any_target_one_block_at_a_time():
    target = {**FILES, "pkg/mod.py": "import os\n" + FILES["pkg/mod.py"].replace(
        "x + 1", "x - 1").replace("\n\n\ndef g", "\n\ndef g"), "README.md": "# pkg\nnew\n"}
    space, edits = Workspace(FILES), 0
    while (edit := next_edit(space.files, target)) is not None:
        space.edit(edit_argument(edit))
        edits += 1
        assert edits < 10
    assert space.files == target and edits <= 4  # an insertion, a change, a deletion, an append


@pytest.mark.parametrize("tier", list(TIERS))
def test_the_oracle_solves_every_tier(tier):
    env = make("swe-v0", tier=tier, tool_format="compact")
    for seed in (0, 1):
        actions, result = play_oracle(env, seed)
        assert result.terminated and result.reward == 1.0 and result.info["success"], actions
        assert result.info["tests_passed"] == result.info["tests_total"] > 0
        assert [a.split("[")[0] for a in actions[:2]] == ["search", "read"]
        assert actions[-2:] == ["run_tests[]", "submit[]"]


def test_check_env_in_both_formats_and_the_spec():
    env = make("swe-v0", tool_format="json")
    assert env.spec.slow_steps and env.spec.has_oracle and "run_tests" in env.spec.tools
    assert env.tool_schemas() and make("swe-v0", tool_format="compact").tool_schemas() == []
    check_env(env, seeds=range(2))


# ----------------------------------------------------------------------------- run_tests, grading
def test_run_tests_shows_the_failing_value_then_grading_after_a_fix():
    env = SweGenerated(tool_format="compact", max_turns=6)
    messages, info = env.reset(seed=0)
    assert messages[-1]["content"].startswith("`moving_sum` returns the wrong result")
    assert "Files: README.md, pyproject.toml, tests/test_lists.py, zapusto/__init__.py" \
        in messages[-1]["content"]
    ran = env.step("run_tests[]").observation[0]["content"]
    assert "FAILED tests/test_lists.py::test_moving_sum_2\n" \
           "  assert moving_sum([-7, -2, -7, 11], 1) == [-7, -2, -7, 11]\n  got: []" in ran
    assert ran.endswith("5 passed, 1 failed")
    one = env.step("run_tests[test_moving_sum_1]").observation[0]["content"]
    assert one == "PASSED tests/test_lists.py::test_moving_sum_1\n1 passed, 0 failed"
    env.step("edit[zapusto/lists.py:10:    if window < 1:]")
    done = env.step("submit[]")
    assert done.terminated and done.reward == 1.0 and info["fail_to_pass"] == 3
    assert done.observation[0]["content"] == "Submitted. 14 of 14 tests pass."


def test_out_of_turns_grades_the_final_state_and_partial_credit():
    env = SweGenerated(tool_format="compact", max_turns=2, partial_credit=True)
    env.reset(seed=0)
    env.step("read[zapusto/lists.py:10]")
    last = env.step("edit[zapusto/lists.py:10:    if window < 1:]")
    assert last.truncated and not last.terminated and last.reward == 1.0
    assert last.observation[0]["content"].endswith("Out of turns; graded as it is. 14 of 14 "
                                                   "tests pass.")
    env.reset(seed=0)
    env.step("list_files[]")
    unfixed = env.step("search[window]")
    assert unfixed.truncated and unfixed.info["fail_to_pass_passed"] == 0
    assert unfixed.reward == pytest.approx(11 / 14)  # the pass-to-pass tests still pass


@pytest.mark.parametrize("kwargs, fragment", [
    ({"tier": "huge"}, "tier 'huge' is not one of"),
    ({"distance": 9}, "SweOptions.distance=9"),
    ({"bug_kinds": ["typo"]}, "SweOptions.bug_kinds"),
    ({"tool_format": "xml"}, "tool_format 'xml'"),
    ({"max_turns": 1}, "max_turns must be an int >= 2"),
    ({"partial_credit": "yes"}, "partial_credit must be true or false"),
    ({"call_time_s": 99.0}, "call_time_s must be"),
])
def test_bad_options_name_the_option(kwargs, fragment):
    with pytest.raises(ValueError, match=f"swe-v0: .*{fragment}"):
        SweGenerated(**kwargs)


def test_overrides_reach_the_generator_and_the_spec():
    env = make("swe-v0", tier="small", bug_kinds=["off_by_one"], max_turns=8)
    assert env.options.bug_kinds == ("off_by_one",) and env.options.num_modules == 2
    assert env.spec.max_turns == 8 and env.spec.kwargs["bug_kinds"] == ["off_by_one"]
    _, info = env.reset(seed=3)
    assert info["bug_kind"] == "off_by_one"
