"""``swe-local-v0``: SWE-bench / SWE-Gym instances from a JSONL file, each with a local
checkout of its repository (:mod:`turnrl.envs.swe.local` describes the records).

The agent has the tools of :class:`~turnrl.envs.swe.env.SweEnvBase`; ``run_tests`` runs the
instance's ``test_cmd`` (default ``python -m pytest -q -rA``) in the sandbox, with a test
file or id as its argument, and shows the end of its output. Grading
(:func:`~turnrl.envs.swe.grading.grade_command`) puts the tests back as they were, applies
the ``test_patch``, runs ``test_cmd`` on the fail-to-pass and pass-to-pass ids in a fresh
sandbox and reads pytest's ``-rA`` report. Without ``path`` it plays a built-in sample: the
records of eight generated tiny-tier repositories (``repo_files`` inline).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from turnrl.envs.protocol import EnvSpec
from turnrl.envs.swe.env import OBSERVATION_CHARS, TOOL_NAMES, SweEnvBase, Task
from turnrl.envs.swe.grading import Verdict, grade_command, run_command
from turnrl.envs.swe.local import (
    LocalInstance,
    SweLocalError,
    instance_from_record,
    load_instances,
    sample_records,
)
from turnrl.envs.swe.options import TIERS
from turnrl.envs.swe.patches import PatchError, apply_patch
from turnrl.envs.tools import ToolFormat

SPEC = EnvSpec(
    id="swe-local-v0",
    entry_point="turnrl.envs.swe.local_env:SweLocal",
    max_turns=12,
    description="SWE-bench / SWE-Gym instances from a JSONL file with local checkouts: fix "
    "the issue with search, read, edit, run_tests, submit; graded by the instance's tests.",
    reward_range=(0.0, 1.0),
    tools=TOOL_NAMES,
    has_oracle=True,
    has_privileged_info=True,
    slow_steps=True,
)
SAMPLE_SEEDS = range(8)
_TIMING_RE = re.compile(r" in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?")
"""The generated instances ``swe-local-v0`` plays without a ``path``."""


class SweLocal(SweEnvBase):
    """Instances from a file of SWE-bench style records.

    Args:
        path: the JSONL file of instances (relative paths resolve against the working
            directory; each record's ``repo_path`` against the file's folder); ``None``
            plays the built-in sample.
        The other arguments are :class:`~turnrl.envs.swe.env.SweEnvBase`'s; ``wall_time_s``
        bounds one ``run_tests`` (a real test suite needs more than a generated one), and
        ``python`` is the interpreter with the repository's dependencies (default: this
        one; the sandbox mounts its prefix read-only).
    """

    name = "swe-local-v0"

    def __init__(self, *, path: str | None = None, tool_format: ToolFormat = "auto",
                 max_turns: int = 12, partial_credit: bool = False,
                 system_prompt: str | None = None, tool_role: str = "tool",
                 wall_time_s: float = 30.0, grade_time_s: float = 120.0,
                 memory_mb: int = 1024, cpu_share: float = 0.5, isolation: str = "auto",
                 tmpfs_mb: int = 256, python: str | None = None) -> None:
        if path is None:
            records = sample_records((seed, TIERS["tiny"]) for seed in SAMPLE_SEEDS)
            self.instances = [instance_from_record(record, f"swe-local-v0: sample {n}",
                                                   Path.cwd())
                              for n, record in enumerate(records)]
        elif isinstance(path, (str, Path)):
            self.instances = load_instances(path)
        else:
            raise SweLocalError(f"swe-local-v0: path must be the path of a JSONL file, got "
                                f"{path!r}")
        super().__init__(tool_format=tool_format, max_turns=max_turns,
                         partial_credit=partial_credit, system_prompt=system_prompt,
                         tool_role=tool_role, wall_time_s=wall_time_s,
                         grade_time_s=grade_time_s, memory_mb=memory_mb, cpu_share=cpu_share,
                         isolation=isolation, tmpfs_mb=tmpfs_mb, python=python)
        self.spec = replace(SPEC, max_turns=max_turns, kwargs={
            "path": None if path is None else str(path), "tool_format": tool_format,
            "max_turns": max_turns, "partial_credit": partial_credit,
            "system_prompt": system_prompt, "tool_role": tool_role,
            "wall_time_s": wall_time_s, "grade_time_s": grade_time_s,
            "memory_mb": memory_mb, "cpu_share": cpu_share, "isolation": isolation,
            "tmpfs_mb": tmpfs_mb, "python": python})
        self.instance: LocalInstance | None = None

    def _new_task(self, seed: int | None) -> Task:
        assert self._rng is not None
        index = seed % len(self.instances) if seed is not None else \
            self._rng.randrange(len(self.instances))
        self.instance = instance = self.instances[index]
        files = instance.files()
        try:
            target = apply_patch(files, instance.patch)
        except PatchError as error:
            raise SweLocalError(f"swe-local-v0: instance {instance.instance_id!r}: its "
                                f"'patch' does not apply to its repository: {error}") from None
        info: dict[str, Any] = {"instance_id": instance.instance_id, "index": index,
                                "fail_to_pass": len(instance.fail_to_pass),
                                "pass_to_pass": len(instance.pass_to_pass)}
        return Task(instance.instance_id, instance.problem_statement, files, target, info,
                    instance.patch)

    def _run_tests(self, target: str) -> str:
        assert self.instance is not None
        reported = run_command(self.sandbox, self.workspace.files, self.instance.test_cmd,
                               [target] if target else [], budget_s=self.wall_time_s,
                               tail_chars=OBSERVATION_CHARS, what="run_tests")
        # no timings: the same actions give the same transcript
        tail = _TIMING_RE.sub("", str(reported.get("tail", ""))).rstrip("\n")
        if reported.get("timed_out"):
            return f"{tail}\nThe tests ran longer than {self.wall_time_s:g} s and were stopped."
        return f"{tail}\n(exit status {reported.get('exit_code')})"

    def _grade(self) -> Verdict:
        assert self._task is not None and self.instance is not None
        return grade_command(self.grader, self._task.files, self.workspace.files,
                             self.instance.test_patch, self.instance.test_cmd,
                             self.instance.fail_to_pass, self.instance.pass_to_pass,
                             budget_s=self.grade_time_s)
