"""``swe-v0``: fix a bug in a small generated Python repository, on a CPU (SWE-Gym style).

Each reset generates a repository from the seed (:func:`turnrl.envs.swe.generate_instance`
at ``tier``'s options, with any option overridden): a package of documented functions, a
``tests/`` folder, one injected bug and an issue that describes it. The agent has the tools
of :class:`~turnrl.envs.swe.env.SweEnvBase`; ``run_tests`` runs the visible tests with a
small runner of its own in the sandbox (no pytest needed), one line per test, and for a
failed ``assert f(...) == value`` the value ``f`` returned. Grading
(:func:`~turnrl.envs.swe.grading.grade_calls`) makes every fail-to-pass and pass-to-pass
call, the hidden ones included, in a fresh sandbox and compares the results on the host.

Seed 0 of the tiny tier, the oracle (``turnrl play swe-v0 --seed 0 --oracle``)::

    user:      `moving_sum` returns the wrong result ... Files: README.md, ...
    assistant: search[def moving_sum]
    tool:      zapusto/lists.py:4:def moving_sum(values: list, window: int = 3) -> list:
    assistant: read[zapusto/lists.py:7-13]
    assistant: edit[zapusto/lists.py:10:    if window < 1:]
    assistant: run_tests[]
    assistant: submit[]                      reward 1.0, terminated
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from turnrl.envs.protocol import EnvSpec
from turnrl.envs.swe.env import TOOL_NAMES, SweEnvBase, Task
from turnrl.envs.swe.generate import generate_instance
from turnrl.envs.swe.grading import Verdict, grade_calls, grading_files
from turnrl.envs.swe.instance import SweInstance
from turnrl.envs.swe.options import TIERS, options_for
from turnrl.envs.swe.scripts import VISIBLE_RUNNER, script
from turnrl.envs.tools import ToolFormat

SPEC = EnvSpec(
    id="swe-v0",
    entry_point="turnrl.envs.swe.generated_env:SweGenerated",
    max_turns=12,
    description="Fix the bug an issue describes in a small generated Python repository: "
    "search, read, edit, run_tests, submit; graded on hidden tests (SWE-Gym style, CPU).",
    reward_range=(0.0, 1.0),
    tools=TOOL_NAMES,
    has_oracle=True,
    has_privileged_info=True,
    slow_steps=True,
)
OPTION_NAMES = ("num_modules", "functions_per_module", "bug_kinds", "distance",
                "issue_detail", "visible_failing")
LISTED_TESTS = 20
"""``run_tests`` lists every test up to this many, else only the failures."""


class SweGenerated(SweEnvBase):
    """Generated repositories with one bug each.

    Args:
        tier: the difficulty preset, ``"tiny"`` (default), ``"small"``, ``"medium"`` or
            ``"hard"`` (:data:`turnrl.envs.swe.TIERS`).
        num_modules, functions_per_module, bug_kinds, distance, issue_detail,
            visible_failing: override the tier's option (:class:`~turnrl.envs.swe.SweOptions`);
            ``None`` keeps it.
        call_time_s: the time limit of one test (in ``run_tests``) and of one graded call.
        The other arguments are :class:`~turnrl.envs.swe.env.SweEnvBase`'s.
    """

    name = "swe-v0"

    def __init__(self, *, tier: str = "tiny", num_modules: int | None = None,
                 functions_per_module: int | None = None,
                 bug_kinds: list[str] | tuple[str, ...] | None = None,
                 distance: int | None = None, issue_detail: str | None = None,
                 visible_failing: bool | None = None, tool_format: ToolFormat = "auto",
                 max_turns: int = 12, partial_credit: bool = False,
                 system_prompt: str | None = None, tool_role: str = "tool",
                 wall_time_s: float = 10.0, grade_time_s: float = 60.0,
                 call_time_s: float = 2.0, memory_mb: int = 512, cpu_share: float = 0.5,
                 isolation: str = "auto") -> None:
        if tier not in TIERS:
            raise ValueError(f"swe-v0: tier {tier!r} is not one of {list(TIERS)}")
        chosen = {"num_modules": num_modules, "functions_per_module": functions_per_module,
                  "bug_kinds": tuple(bug_kinds) if bug_kinds is not None else None,
                  "distance": distance, "issue_detail": issue_detail,
                  "visible_failing": visible_failing}
        overrides = {key: value for key, value in chosen.items() if value is not None}
        try:
            self.options = options_for(tier, **overrides)
        except ValueError as error:
            raise ValueError(f"swe-v0: {error}") from None
        super().__init__(tool_format=tool_format, max_turns=max_turns,
                         partial_credit=partial_credit, system_prompt=system_prompt,
                         tool_role=tool_role, wall_time_s=wall_time_s,
                         grade_time_s=grade_time_s, memory_mb=memory_mb, cpu_share=cpu_share,
                         isolation=isolation)
        if isinstance(call_time_s, bool) or not isinstance(call_time_s, (int, float)) or \
                not 0 < call_time_s <= wall_time_s:
            raise ValueError(f"swe-v0: call_time_s must be a positive number of seconds no "
                             f"larger than wall_time_s={wall_time_s!r}, got {call_time_s!r}")
        self.call_time_s = float(call_time_s)
        self.spec = replace(SPEC, max_turns=max_turns, kwargs={
            "tier": tier, **{name: chosen[name] for name in OPTION_NAMES},
            "tool_format": tool_format, "max_turns": max_turns,
            "partial_credit": partial_credit, "system_prompt": system_prompt,
            "tool_role": tool_role, "wall_time_s": wall_time_s, "grade_time_s": grade_time_s,
            "call_time_s": call_time_s, "memory_mb": memory_mb, "cpu_share": cpu_share,
            "isolation": isolation})
        if self.spec.kwargs["bug_kinds"] is not None:
            self.spec.kwargs["bug_kinds"] = list(self.spec.kwargs["bug_kinds"])
        self.instance: SweInstance | None = None

    def _new_task(self, seed: int | None) -> Task:
        assert self._rng is not None
        instance_seed = seed if seed is not None else self._rng.randrange(2**31)
        self.instance = instance = generate_instance(instance_seed, self.options)
        location = instance.bug_location
        privileged = (f"{instance.bug_description} in {location.file}, function "
                      f"{location.function}, line {location.line}.\n{instance.patch}")
        info: dict[str, Any] = {"instance_id": instance.instance_id, "seed": instance_seed,
                                "bug_kind": instance.bug_kind,
                                "fail_to_pass": len(instance.fail_to_pass),
                                "pass_to_pass": len(instance.pass_to_pass)}
        return Task(instance.instance_id, instance.problem_statement, dict(instance.files),
                    dict(instance.solution_files), info, privileged)

    def _run_tests(self, target: str) -> str:
        settings = {"target": target, "per_test_s": self.call_time_s,
                    "list_up_to": LISTED_TESTS}
        files = {f"repo/{path}": text for path, text in self.workspace.files.items()}
        result = self.sandbox.run(script(VISIBLE_RUNNER, settings), files=files)
        if not result.stdout.strip() or result.error is not None:
            return result.observation()
        return result.stdout

    def _grade(self) -> Verdict:
        assert self._task is not None and self.instance is not None
        files = grading_files(self._task.files, self.workspace.files)
        return grade_calls(self.grader, files, self.instance.graded_calls,
                           self.instance.fail_to_pass, per_call_s=self.call_time_s,
                           budget_s=self.grade_time_s)
