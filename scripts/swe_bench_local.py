"""Turn SWE-bench / SWE-Gym records into ``swe-local-v0`` instances: check out each repository
at its base commit and write the instance file.

    python scripts/swe_bench_local.py SWE_BENCH.jsonl OUT [--ids ID ...] [--test-cmd CMD]
        [--repo-url 'https://github.com/{repo}.git']

``SWE_BENCH.jsonl`` holds one record a line in SWE-bench's form (``instance_id``, ``repo``
as ``owner/name``, ``base_commit``, ``problem_statement``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``,
``patch``, ``test_patch``), e.g. a split saved with ``datasets``:
``load_dataset("princeton-nlp/SWE-bench_Lite", split="test").to_json("lite.jsonl")``.
For each record (or those of ``--ids``) this clones ``--repo-url`` (``{repo}`` filled in;
one clone per repository, under ``OUT/mirrors/``), checks out ``base_commit`` into
``OUT/repos/<instance_id>/`` and writes ``OUT/instances.jsonl`` with ``repo_path`` and
``test_cmd`` added. Cloning needs the network; the rest runs offline, and a record whose
checkout already exists is not fetched again. The repository's own dependencies are not
installed: install them into a virtual environment and give its interpreter to the env
(``env.kwargs.python``), see ``docs/environments.md`` (``swe-local-v0``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from turnrl.envs.swe.local import DEFAULT_TEST_CMD, load_instances

NEEDED = ("instance_id", "repo", "base_commit")


def git(*args: str, cwd: Path | None = None) -> None:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: git {' '.join(args)} failed: {done.stderr.strip()}")


def read_records(path: Path, ids: list[str] | None) -> list[dict[str, Any]]:
    """The records of ``path`` (those of ``ids`` only, in file order, when given)."""
    if not path.is_file():
        raise SystemExit(f"error: {path} does not exist; give a JSONL file of SWE-bench records")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        record = json.loads(line)
        missing = [key for key in NEEDED if not isinstance(record.get(key), str)]
        if missing:
            raise SystemExit(f"error: {path}:{number}: the record has no {', '.join(missing)} "
                             "(SWE-bench's keys are needed to check the repository out)")
        if ids is None or record["instance_id"] in ids:
            records.append(record)
    unknown = sorted(set(ids or ()) - {r["instance_id"] for r in records})
    if unknown:
        raise SystemExit(f"error: {path} has no instance {', '.join(unknown)}")
    return records


def check_out(record: dict[str, Any], out: Path, repo_url: str) -> Path:
    """``OUT/repos/<instance_id>``, a checkout of ``record``'s repository at its base commit."""
    target = out / "repos" / record["instance_id"]
    if target.is_dir():
        return target
    mirror = out / "mirrors" / record["repo"].replace("/", "__")
    if not mirror.is_dir():
        mirror.parent.mkdir(parents=True, exist_ok=True)
        git("clone", "--quiet", "--no-checkout", repo_url.format(repo=record["repo"]),
            str(mirror))
    target.parent.mkdir(parents=True, exist_ok=True)
    git("clone", "--quiet", "--no-checkout", str(mirror), str(target))
    git("checkout", "--quiet", record["base_commit"], cwd=target)
    return target


def convert(source: Path, out: Path, *, ids: list[str] | None = None,
            test_cmd: str = DEFAULT_TEST_CMD,
            repo_url: str = "https://github.com/{repo}.git") -> Path:
    """Check out every record of ``source`` and write ``out/instances.jsonl``; returns its
    path, after loading it back as ``swe-local-v0`` does (which checks every record)."""
    lines = []
    for record in read_records(source, ids):
        check_out(record, out, repo_url)
        record = {**record, "repo_path": f"repos/{record['instance_id']}",
                  "test_cmd": record.get("test_cmd") or test_cmd}
        lines.append(json.dumps(record, sort_keys=True))
    target = out / "instances.jsonl"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    load_instances(target)
    return target


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a JSONL file of SWE-bench records")
    parser.add_argument("out", type=Path, help="the folder to write instances.jsonl and repos/")
    parser.add_argument("--ids", nargs="*", help="only these instance ids")
    parser.add_argument("--test-cmd", default=DEFAULT_TEST_CMD,
                        help="for records without their own test_cmd")
    parser.add_argument("--repo-url", default="https://github.com/{repo}.git",
                        help="where to clone from; {repo} is the record's owner/name")
    args = parser.parse_args(argv)
    path = convert(args.source, args.out, ids=args.ids, test_cmd=args.test_cmd,
                   repo_url=args.repo_url)
    print(f"{path}: {len(path.read_text().splitlines())} instances; play them with "
          f"turnrl play swe-local-v0 --kwarg path={path} --oracle")


if __name__ == "__main__":
    main(sys.argv[1:])
