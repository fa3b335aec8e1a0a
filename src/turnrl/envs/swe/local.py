"""Instances for ``swe-local-v0``: SWE-bench / SWE-Gym records in a JSONL file, each with a
local checkout of its repository.

One JSON object a line, with the SWE-bench keys ``instance_id``, ``problem_statement``,
``FAIL_TO_PASS`` and ``PASS_TO_PASS`` (lists of test ids, or JSON text of a list, as
SWE-bench stores them), ``patch`` (the gold patch) and ``test_patch`` (the tests that grade
it), plus

- ``repo_path``: a checkout of the repository at its base commit (a path relative to the
  JSONL file's folder, or absolute); its text files are loaded, ``.git`` and other tool
  folders, binary files and files over :data:`MAX_FILE_BYTES` left out; or ``repo_files``
  (path → text, the repository inline, as ``SweInstance.to_swe_record()`` writes it);
- ``test_cmd`` (optional): the command that runs the tests, given the test ids as
  arguments; default :data:`DEFAULT_TEST_CMD`.

:func:`write_local_instances` writes generated instances in this form (the test data of
``swe-local-v0`` is made with it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnrl.envs.swe.generate import generate_instance
from turnrl.envs.swe.instance import write_files
from turnrl.envs.swe.options import SweOptions

DEFAULT_TEST_CMD = "python -m pytest -q -rA"
MAX_FILE_BYTES = 1_000_000
"""Files larger than this are left out of a loaded repository."""
MAX_FILES = 20_000
SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", "__pycache__", ".tox", ".nox", ".venv",
                             "venv", "node_modules", ".mypy_cache", ".pytest_cache",
                             ".ruff_cache", ".eggs"})
REQUIRED_KEYS = ("instance_id", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS",
                 "patch", "test_patch")


class SweLocalError(ValueError):
    """An instance file or repository that cannot be used; the message names the file, the
    line and the key, and how to fix it."""


@dataclass(frozen=True)
class LocalInstance:
    """One task of ``swe-local-v0``: the record's fields, with ``repo`` the checkout's
    folder (``None`` when the record holds ``repo_files``, kept in ``inline_files``)."""

    instance_id: str
    problem_statement: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    patch: str
    test_patch: str
    test_cmd: str
    repo: Path | None = None
    inline_files: tuple[tuple[str, str], ...] = ()

    def files(self) -> dict[str, str]:
        """The repository at its base commit: relative path → text."""
        if self.repo is None:
            return dict(self.inline_files)
        return read_repository(self.repo)


def load_instances(path: str | Path) -> list[LocalInstance]:
    """Return the instances of the JSONL file ``path``, in file order. Raises
    :class:`SweLocalError` for a missing file, a line that is not a JSON object, a missing
    or ill-typed key, or a ``repo_path`` that is not a folder."""
    source = Path(path).expanduser()
    if not source.is_file():
        raise SweLocalError(f"swe-local-v0: instance file {str(source)!r} does not exist; "
                            "set env.kwargs.path to a JSONL file of SWE-bench style records")
    instances = []
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            instances.append(_instance(source, number, line))
    if not instances:
        raise SweLocalError(f"swe-local-v0: {source} holds no instances; write one JSON "
                            "record per line")
    return instances


def _instance(source: Path, number: int, line: str) -> LocalInstance:
    where = f"swe-local-v0: {source}, line {number}"
    try:
        record = json.loads(line)
    except ValueError as error:
        raise SweLocalError(f"{where}: not valid JSON ({error})") from None
    return instance_from_record(record, where, source.parent)


def instance_from_record(record: Any, where: str, folder: Path) -> LocalInstance:
    """Return the instance of one record (a dict); ``where`` starts its error messages and
    a relative ``repo_path`` is resolved against ``folder``. Raises :class:`SweLocalError`."""
    if not isinstance(record, dict):
        raise SweLocalError(f"{where}: must be a JSON object (one record per line)")
    missing = [key for key in REQUIRED_KEYS if key not in record]
    if missing:
        raise SweLocalError(f"{where}: missing key(s) {missing}; every record needs "
                            f"{list(REQUIRED_KEYS)} and repo_path (or repo_files)")
    texts = {key: record[key] for key in ("instance_id", "problem_statement", "patch",
                                          "test_patch")}
    texts["test_cmd"] = record.get("test_cmd", DEFAULT_TEST_CMD)
    for key, value in texts.items():
        if not isinstance(value, str) or (key in ("instance_id", "test_cmd") and
                                          not value.strip()):
            raise SweLocalError(f"{where}: {key!r} must be a non-empty string")
    tests = {key: _test_ids(record[key], f"{where}: {key!r}")
             for key in ("FAIL_TO_PASS", "PASS_TO_PASS")}
    if not tests["FAIL_TO_PASS"]:
        raise SweLocalError(f"{where}: 'FAIL_TO_PASS' is empty; an instance needs a test "
                            "that its patch makes pass")
    repo, inline = _repository(folder, record, where)
    return LocalInstance(texts["instance_id"], texts["problem_statement"],
                         tests["FAIL_TO_PASS"], tests["PASS_TO_PASS"], texts["patch"],
                         texts["test_patch"], texts["test_cmd"], repo, inline)


def _test_ids(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise SweLocalError(f"{where} must be a list of test ids or the JSON text of "
                                "one") from None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SweLocalError(f"{where} must be a list of test ids (strings)")
    return tuple(value)


def _repository(folder: Path, record: Mapping[str, Any], where: str
                ) -> tuple[Path | None, tuple[tuple[str, str], ...]]:
    if "repo_path" in record:
        value = record["repo_path"]
        if not isinstance(value, str) or not value:
            raise SweLocalError(f"{where}: 'repo_path' must be a path string")
        repo = Path(value).expanduser()
        repo = repo if repo.is_absolute() else folder / repo
        if not repo.is_dir():
            raise SweLocalError(f"{where}: repo_path {value!r} is not a folder (resolved "
                                f"against the file's folder: {repo}); check out the "
                                "repository at its base commit there")
        return repo, ()
    files = record.get("repo_files")
    if isinstance(files, dict) and files and all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return None, tuple(sorted(files.items()))
    raise SweLocalError(f"{where}: needs 'repo_path' (a checkout of the repository at its "
                        "base commit) or 'repo_files' (path -> text)")


def read_repository(root: Path) -> dict[str, str]:
    """Return the text files under ``root`` (relative path → text), in path order: tool
    folders (:data:`SKIPPED_FOLDERS`, ``*.egg-info``), symbolic links, binary files, files
    that are not UTF-8 and files over :data:`MAX_FILE_BYTES` left out. Raises
    :class:`SweLocalError` when it holds none or more than :data:`MAX_FILES`."""
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part in SKIPPED_FOLDERS or part.endswith(".egg-info")
               for part in relative.parts[:-1]) or path.is_symlink() or not path.is_file():
            continue
        if path.stat().st_size > MAX_FILE_BYTES or relative.parts[-1] in SKIPPED_FOLDERS:
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        try:
            files[relative.as_posix()] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(files) > MAX_FILES:
            raise SweLocalError(f"swe-local-v0: {root} has more than {MAX_FILES} text files; "
                                "point repo_path at the repository's own checkout")
    if not files:
        raise SweLocalError(f"swe-local-v0: repo_path {str(root)!r} holds no text files")
    return files


def sample_records(choices: Iterable[tuple[int, SweOptions]]) -> list[dict[str, Any]]:
    """The instances generated from ``choices`` (``(seed, options)`` pairs), as records with
    ``repo_files`` and ``test_cmd``: what ``swe-local-v0`` plays without a ``path``."""
    records = []
    for seed, options in choices:
        record = generate_instance(seed, options).to_swe_record()
        record["test_cmd"] = DEFAULT_TEST_CMD
        records.append(record)
    return records


def write_local_instances(folder: Path, choices: Iterable[tuple[int, SweOptions]]) -> Path:
    """Write the instances generated from ``choices`` (``(seed, options)`` pairs) in
    ``swe-local-v0``'s form: ``folder/instances.jsonl`` (one record a line, ``repo_path``
    relative to it) and each buggy repository under ``folder/repos/<instance_id>/``.
    Returns the JSONL file's path."""
    lines = []
    for record in sample_records(choices):
        files = record.pop("repo_files")
        record["repo_path"] = f"repos/{record['instance_id']}"
        write_files(files, folder / record["repo_path"])
        lines.append(json.dumps(record, sort_keys=True))
    target = folder / "instances.jsonl"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target
