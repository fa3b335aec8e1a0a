"""swe-local-v0: SWE-bench style records with local checkouts, their grading and its limits.

``tests/data/swe_local/`` holds four generated instances (one per tier) written by
``scripts/make_swe_local.py``; the oracle must solve each through the agent's tools, and the
cheap ways to fake a pytest verdict must get nothing. Each episode here runs pytest in the
sandbox one to three times (about a second each).
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from turnrl.envs import make
from turnrl.envs.swe.grading import (
    GradingInfraError,
    grading_files,
    is_test_path,
    summary_outcomes,
)
from turnrl.envs.swe.local import SweLocalError, load_instances, read_repository
from turnrl.envs.swe.local_env import SweLocal
from turnrl.sandbox import SandboxError

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "swe_local"
INSTANCES = DATA / "instances.jsonl"


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# ----------------------------------------------------------------------------- the data
def test_the_shipped_instances_are_what_the_script_writes(tmp_path):
    script = runpy.run_path(str(ROOT / "scripts" / "make_swe_local.py"))
    assert script["DATA"] == DATA
    script["write"](tmp_path)
    assert files_under(tmp_path) == files_under(DATA)


def test_the_records_are_in_swe_bench_form():
    lines = INSTANCES.read_text().splitlines()
    assert len(lines) == 4
    for line in lines:
        record = json.loads(line)
        assert {"instance_id", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS", "patch",
                "test_patch", "repo_path", "test_cmd"} <= set(record)
        assert record["repo_path"] == f"repos/{record['instance_id']}"
        assert not any("hidden" in p for p in files_under(DATA / record["repo_path"]))


def test_the_oracle_solves_every_shipped_instance():
    env = make("swe-local-v0", path=str(INSTANCES), tool_format="compact")
    for seed in range(len(env.instances)):
        env.reset(seed=seed)
        actions, result = [], None
        while (action := env.oracle_action()) is not None:
            actions.append(action)
            result = env.step(action)
        assert result is not None and result.terminated, actions
        assert result.reward == 1.0 and result.info["success"], (actions, result.info)
        assert actions[-2:] == ["run_tests[]", "submit[]"]


# ----------------------------------------------------------------------------- loading
def write_records(tmp_path: Path, *records: dict) -> Path:
    path = tmp_path / "instances.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def good_record() -> dict:
    return json.loads(INSTANCES.read_text().splitlines()[0]) | {
        "repo_path": str(DATA / "repos" / "zapusto-0-aef7a1")}


@pytest.mark.parametrize("change, fragment", [
    ({"patch": None}, "'patch' must be a non-empty string"),
    ({"FAIL_TO_PASS": "not json"}, "'FAIL_TO_PASS' must be a list of test ids"),
    ({"FAIL_TO_PASS": []}, "'FAIL_TO_PASS' is empty"),
    ({"repo_path": "nowhere"}, "repo_path 'nowhere' is not a folder"),
    ({"repo_path": None, "repo_files": None}, "needs 'repo_path'"),
])
def test_bad_records_name_the_file_line_and_key(tmp_path, change, fragment):
    record = good_record() | change
    record = {k: v for k, v in record.items() if v is not None or k not in ("repo_path",
                                                                            "repo_files")}
    path = write_records(tmp_path, good_record(), record)
    with pytest.raises(SweLocalError, match=f"instances.jsonl, line 2: .*{fragment}"):
        load_instances(path)


def test_missing_keys_files_and_json_strings(tmp_path):
    record = good_record()
    del record["test_patch"]
    with pytest.raises(SweLocalError, match=r"line 1: missing key\(s\) \['test_patch'\]"):
        load_instances(write_records(tmp_path, record))
    with pytest.raises(SweLocalError, match=r"does not exist; set env\.kwargs\.path"):
        make("swe-local-v0", path=str(tmp_path / "none.jsonl"))
    as_text = good_record() | {"FAIL_TO_PASS": json.dumps(good_record()["FAIL_TO_PASS"])}
    (instance,) = load_instances(write_records(tmp_path, as_text))
    assert instance.fail_to_pass == tuple(good_record()["FAIL_TO_PASS"])
    assert instance.test_cmd == "python -m pytest -q -rA"


def test_read_repository_skips_git_binary_and_cache_files(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\0\1")
    (tmp_path / "pkg" / "m.py").write_text("X = 1\n")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\0\0")
    assert read_repository(tmp_path) == {"pkg/m.py": "X = 1\n"}


# ----------------------------------------------------------------------------- grading
def test_grading_files_put_tests_and_configuration_back():
    original = {"pkg/m.py": "X = 1\n", "tests/test_m.py": "def test(): ...\n",
                "pyproject.toml": "[tool.pytest.ini_options]\n", "pkg/conftest.py": "A = 1\n"}
    agent = {"pkg/m.py": "X = 2\n", "tests/test_m.py": "", "pyproject.toml": "",
             "pkg/conftest.py": "import pytest\n", "tests/conftest.py": "skip\n",
             "tests/test_new.py": "", "pytest.ini": "[pytest]\n", "pytest.py": "",
             "json.py": "", "pkg/new.py": "Y = 1\n", "x.pth": "import os\n",
             "sitecustomize.py": ""}
    files = grading_files(original, agent)
    assert files == {**original, "pkg/m.py": "X = 2\n", "pkg/new.py": "Y = 1\n"}
    assert is_test_path("tests/data/x.json") and is_test_path("pkg/test_m.py")
    assert not is_test_path("pkg/testing_utils.py")


def test_a_forged_passed_line_cannot_hide_a_failure():
    lines = ["FAILED tests/a.py::t - AssertionError", "PASSED tests/a.py::t",
             "PASSED tests/a.py::u", "XFAIL tests/a.py::v - reason"]
    assert summary_outcomes(lines) == {"tests/a.py::t": "FAILED", "tests/a.py::u": "PASSED",
                                       "tests/a.py::v": "XFAIL"}


def local_env(**kwargs) -> SweLocal:
    env = SweLocal(path=str(INSTANCES), tool_format="json", max_turns=8, **kwargs)
    env.reset(seed=0)  # zapusto: moving_sum's window check reads `< 2`
    return env


def edit(target: str, text: str) -> str:
    return "<tool_call>" + json.dumps({"name": "edit", "arguments": {"target": target,
                                                                      "text": text}}) + \
        "</tool_call>"


def create(path: str, text: str) -> str:
    return "<tool_call>" + json.dumps({"name": "create", "arguments": {"path": path,
                                                                        "text": text}}) + \
        "</tool_call>"


def test_rewritten_tests_and_a_skipping_conftest_get_nothing():
    env = local_env()
    lines = len(env.workspace.files["tests/test_lists.py"].splitlines())
    for action in (edit(f"tests/test_lists.py:1-{lines}", "def test_ok():\n    assert True"),
                   create("tests/conftest.py", "import pytest\n\n\ndef pytest_collection_"
                          "modifyitems(items):\n    for item in items:\n        item.add_"
                          "marker(pytest.mark.skip)\n"),
                   create("pytest.ini", "[pytest]\naddopts = -p no:python\n"),
                   create("pytest.py", "import sys\nsys.exit(0)\n")):
        assert not env.step(action).info["tool_error"], action
    result = env.step('{"name": "submit", "arguments": {}}')
    assert result.terminated and result.reward == 0.0
    assert result.info["fail_to_pass_passed"] == 0 and result.info["tests_total"] == 14


def test_a_fake_summary_and_exit_at_import_gets_nothing():
    env = local_env()
    ids = json.loads(INSTANCES.read_text().splitlines()[0])
    fake = "=== short test summary info ===\n" + "".join(
        f"PASSED {test}\n" for test in ids["FAIL_TO_PASS"] + ids["PASS_TO_PASS"])
    code = f"import os as _os\nprint({fake!r}, flush=True)\n_os._exit(0)\n"
    first = env.workspace.files["zapusto/lists.py"].splitlines()[0]
    env.step(edit("zapusto/lists.py:1", code + first))
    result = env.step('{"name": "submit", "arguments": {}}')
    assert result.reward == 0.0 and result.info["tests_passed"] == 0


def test_a_broken_sandbox_is_an_infrastructure_failure(monkeypatch):
    env = local_env()

    def broken(code, files=None):
        raise SandboxError("no namespaces")

    monkeypatch.setattr(env.grader, "run", broken)
    with pytest.raises(GradingInfraError, match="the sandbox failed: no namespaces"):
        env.step('{"name": "submit", "arguments": {}}')


# ----------------------------------------------------------------------------- SWE-bench records
def test_swe_bench_records_are_checked_out_at_their_base_commit_and_solved(tmp_path):
    """scripts/swe_bench_local.py on a record in SWE-bench's own form (``repo`` and
    ``base_commit``, no checkout): it clones the repository, checks out the base commit (a
    later commit that fixes the bug must not leak into the checkout) and the oracle solves
    the instance it writes."""
    import subprocess

    from turnrl.envs.swe import TIERS, generate_instance
    from turnrl.envs.swe.instance import write_files

    record = generate_instance(5, TIERS["tiny"]).to_swe_record()
    files = record.pop("repo_files")
    origin = tmp_path / "remote" / record["repo"]
    write_files(files, origin)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              cwd=origin, capture_output=True, text=True, check=True).stdout
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "base")
    record["base_commit"] = git("rev-parse", "HEAD").strip()
    (origin / "LATER.md").write_text("a later commit\n")
    git("add", "-A")
    git("commit", "-qm", "later")
    source = write_records(tmp_path, {"instance_id": "other__x-1", "repo": "other/x",
                                      "base_commit": "0" * 40}, record)
    script = runpy.run_path(str(ROOT / "scripts" / "swe_bench_local.py"))
    with pytest.raises(SystemExit, match="has no instance nope"):
        script["convert"](source, tmp_path / "out", ids=["nope"])
    path = script["convert"](source, tmp_path / "out", ids=[record["instance_id"]],
                             repo_url=f"file://{tmp_path}/remote/{{repo}}")
    [loaded] = load_instances(path)
    assert loaded.files() == files and loaded.test_cmd == "python -m pytest -q -rA"
    env = make("swe-local-v0", path=str(path), tool_format="compact")
    env.reset(seed=0)
    while (action := env.oracle_action()) is not None:
        result = env.step(action)
    assert result.reward == 1.0


def test_swe_bench_records_without_repo_or_commit_are_named(tmp_path):
    script = runpy.run_path(str(ROOT / "scripts" / "swe_bench_local.py"))
    source = write_records(tmp_path, {"instance_id": "a__b-1", "repo": "a/b"})
    with pytest.raises(SystemExit, match=r"instances.jsonl:1: the record has no base_commit"):
        script["convert"](source, tmp_path / "out")
