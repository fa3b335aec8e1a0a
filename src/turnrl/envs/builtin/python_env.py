"""``python-v0``: tool-integrated reasoning on arithmetic word problems with a Python sandbox.

Tests whether the agent offloads computation to a tool: each task is a short word problem
whose answer is an integer that takes several multi-digit operations (hard to do in the head,
one line of Python). The agent may call ``python(code)`` any number of times (each call runs
in :mod:`turnrl.sandbox`, a separate, limited process) and ends with ``answer(x)``::

    system:    Solve the problem. Use the python tool to compute, then give the answer.
               Tools: ...
    user:      A farm has 37 rows of 24 trees and each tree gives 118 apples. How many apples
               does the farm get?
    assistant: python[print(37 * 24 * 118)]
    tool:      104784
    assistant: answer[104784]
    user:      Correct.                                  reward 1.0, terminated

* ``python(code)``: the sandbox's observation (stdout, then stderr and the error line, e.g.
  ``TimeoutError: code ran longer than 5 s``, or ``(no output)``) as a ``tool`` message;
  reward 0. Code that misbehaves (infinite loop, memory bomb, fork bomb) is contained by the
  sandbox's limits and only costs the turn.
* ``answer(x)``: ends the episode (terminated); reward 1.0 when ``x`` parses as the gold
  integer (``"104,784"``, ``" 104784 "`` and ``"104784.0"`` count), else 0.0, with the reply
  ``Correct.`` or ``Wrong, the answer is N.``
* A reply without a valid call gets an observation that shows the expected format (from
  :class:`turnrl.envs.tools.Toolbox`) and uses the turn (``info["invalid_action"]``).

After ``max_turns`` turns (default 4) without an answer the episode is truncated, reward 0.
Tool calls use ``tool_format`` (``"auto"``: ``python[...]`` or ``<tool_call>{...}
</tool_call>``; ``"compact"``; ``"json"``). Env steps block on a child process, so the spec
declares ``slow_steps`` and the runner runs them in worker threads.

Info for :mod:`turnrl.rewards`: reset info ``answer`` (the gold, as a string) and
``problem_kind``; every step the Toolbox keys (``tool_calls``, ``tool_error``, ...),
``invalid_action``, ``success``; the last step ``final_answer`` (``""`` if the turns ran out).
Oracle: ``python[print(<expression>)]`` until a ``python`` call has run without error this
episode, then ``answer[<its output>]`` (at once when only one turn is left). It only reads
the state, so asking it twice gives the same action.
``privileged_info()``: the expression and the gold answer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from turnrl.envs.protocol import EnvSpec
from turnrl.envs.tools import TOOL_FORMATS, Toolbox, ToolFormat, check_tool_role
from turnrl.sandbox import Sandbox
from turnrl.types import Message, StepResult

SPEC = EnvSpec(
    id="python-v0",
    entry_point="turnrl.envs.builtin.python_env:PythonTool",
    max_turns=4,
    description="Arithmetic word problems; compute with a sandboxed python(code) tool, then "
    "answer(x).",
    reward_range=(0.0, 1.0),
    tools=["python", "answer"],
    has_oracle=True,
    has_privileged_info=True,
    slow_steps=True,
)

INSTRUCTION = "Solve the problem. Use the python tool to compute, then give the answer."
CORRECT = "Correct."
WRONG = "Wrong, the answer is {gold}."


@dataclass(frozen=True)
class Problem:
    """One task: its text, the Python expression that solves it and the integer answer."""

    kind: str
    text: str
    expression: str
    answer: int


def _farm(r: random.Random) -> Problem:
    a, b, c = r.randint(12, 99), r.randint(12, 99), r.randint(101, 499)
    return Problem("product", f"A farm has {a} rows of {b} trees and each tree gives {c} "
                   "apples. How many apples does the farm get?", f"{a} * {b} * {c}", a * b * c)


def _budget(r: random.Random) -> Problem:
    a, b, c, d = r.randint(5000, 9999), r.randint(13, 97), r.randint(11, 49), r.randint(101, 999)
    return Problem("budget", f"Tom has {a} dollars. He buys {c} books at {b} dollars each, "
                   f"then earns {d} dollars. How many dollars does he have now?",
                   f"{a} - {c} * {b} + {d}", a - c * b + d)


def _trip(r: random.Random) -> Problem:
    a, b, c, d = r.randint(41, 97), r.randint(3, 17), r.randint(31, 89), r.randint(2, 13)
    return Problem("trip", f"A train runs {a} km per hour for {b} hours, then {c} km per hour "
                   f"for {d} hours. How many km does it travel?", f"{a} * {b} + {c} * {d}",
                   a * b + c * d)


def _remainder(r: random.Random) -> Problem:
    a, b = r.randint(10_000, 99_999), r.randint(13, 97)
    return Problem("remainder", f"What is the remainder when {a} is divided by {b}?",
                   f"{a} % {b}", a % b)


def _series(r: random.Random) -> Problem:
    a = r.randint(10, 99)
    b = a + r.randint(50, 400)
    return Problem("series", f"What is the sum of all integers from {a} to {b}?",
                   f"sum(range({a}, {b + 1}))", sum(range(a, b + 1)))


def _boxes(r: random.Random) -> Problem:
    a, b, c = r.randint(23, 99), r.randint(24, 144), r.randint(17, 199)
    return Problem("boxes", f"{a} boxes hold {b} pens each and {c} pens are broken. How many "
                   "pens work?", f"{a} * {b} - {c}", a * b - c)


def _small_farm(r: random.Random) -> Problem:
    a, b, c = r.randint(2, 9), r.randint(2, 9), r.randint(2, 9)
    return Problem("small_product", f"A farm has {a} rows of {b} trees and each tree gives "
                   f"{c} apples. How many apples does the farm get?", f"{a} * {b} * {c}",
                   a * b * c)


GENERATORS: dict[str, Callable[[random.Random], Problem]] = {
    "product": _farm, "budget": _budget, "trip": _trip, "remainder": _remainder,
    "series": _series, "boxes": _boxes, "small_product": _small_farm,
}
# the templates python-v0 draws from by default; small_product (one-digit factors, for
# models too small to copy long numbers) is opt-in, so the default task mix is unchanged
DEFAULT_KINDS = ("product", "budget", "trip", "remainder", "series", "boxes")


class PythonTool:
    """Word problems with a ``python`` tool (sandboxed) and an ``answer`` tool.

    Args:
        kinds: problem templates to draw from (default :data:`DEFAULT_KINDS`: product,
            budget, trip, remainder, series, boxes; ``small_product``, the product of three
            one-digit numbers, is opt-in).
        tool_format: ``"auto"``, ``"compact"`` or ``"json"`` (see :mod:`turnrl.envs.tools`).
        wall_time_s, memory_mb: the sandbox's wall-clock and memory limits of one ``python``
            call (memory: the whole call where a cgroup can be made, else per process);
        cpu_share: the share of the host's cores one call may run on (pinned; 0.5: half);
        isolation: ``"auto"`` (namespace isolation, or an error naming the fix) or
            ``"process"`` (chosen explicitly: hides nothing of the host's files); the
            other limits are :class:`turnrl.sandbox.SandboxConfig`'s defaults.
        tool_role: role of the ``python`` results: ``"tool"``, or ``"user"`` for chat
            templates without a tool role (:func:`turnrl.envs.tools.check_tool_role`).
        max_turns: turn budget (>= 2: one computation and the answer).
        system_prompt: the system message; ``None`` (default): the instruction, the tools
            and how to call them; ``""``: none (a model trained from scratch on this env
            learns the tools from its demonstrations, and every turn reads ~280 characters
            less).
    """

    def __init__(self, *, kinds: tuple[str, ...] | list[str] | None = None,
                 tool_format: ToolFormat = "auto", wall_time_s: float = 5.0,
                 memory_mb: int = 256, tool_role: str = "tool", max_turns: int = 4,
                 system_prompt: str | None = None, cpu_share: float = 0.5,
                 isolation: str = "auto") -> None:
        kinds = tuple(kinds) if kinds is not None else DEFAULT_KINDS
        unknown = [k for k in kinds if k not in GENERATORS]
        if unknown or not kinds:
            raise ValueError(f"python-v0: kinds {unknown or kinds!r} not among "
                             f"{sorted(GENERATORS)}; pick a non-empty subset")
        if tool_format not in TOOL_FORMATS:
            raise ValueError(f"python-v0: tool_format {tool_format!r} is not one of "
                             f"{TOOL_FORMATS}")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 2:
            raise ValueError(f"python-v0: max_turns must be an int >= 2 (compute, then "
                             f"answer), got {max_turns!r}")
        self.kinds, self.tool_format, self.max_turns = kinds, tool_format, max_turns
        self.tool_role = check_tool_role(tool_role, "python-v0")
        self.sandbox = Sandbox(wall_time_s=wall_time_s, memory_mb=memory_mb,
                               cpu_share=cpu_share, isolation=isolation)
        self.spec = replace(SPEC, max_turns=max_turns, kwargs={
            "kinds": list(kinds), "tool_format": tool_format, "wall_time_s": wall_time_s,
            "memory_mb": memory_mb, "tool_role": tool_role, "max_turns": max_turns,
            "system_prompt": system_prompt, "cpu_share": cpu_share, "isolation": isolation})
        self.toolbox = Toolbox({"python": self.python, "answer": self.answer},
                               format=tool_format)
        self.system_messages = self.toolbox.system_messages(INSTRUCTION, system_prompt,
                                                            "python-v0")
        self._rng: random.Random | None = None
        self._problem: Problem | None = None
        self._turn = 0
        self._done = True
        self._final_answer: str | None = None
        self._code_ran = False  # a python call ran without error this episode

    # -- the Env protocol -------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[list[Message], dict[str, Any]]:
        if options:
            raise ValueError(f"python-v0: reset() takes no options, got {sorted(options)}")
        if seed is not None or self._rng is None:
            self._rng = random.Random(seed)
        kind = self._rng.choice(self.kinds)
        self._problem = GENERATORS[kind](self._rng)
        self._turn, self._done, self._final_answer, self._code_ran = 0, False, None, False
        return [*self.system_messages, {"role": "user", "content": self._problem.text}], {
                    "answer": str(self._problem.answer), "problem_kind": kind}

    def step(self, action: str) -> StepResult:
        if self._done or self._problem is None:
            raise RuntimeError("python-v0: the episode is over; call reset() first")
        self._turn += 1
        text, tool_info = self.toolbox.call(action)
        terminated = self._final_answer is not None
        success = terminated and self.is_correct(self._final_answer or "")
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        ran_code = tool_info["tool_name"] == "python" and not tool_info["tool_error"]
        info: dict[str, Any] = {**tool_info, "invalid_action": tool_info["tool_error"],
                                "success": success}
        if self._done:
            info["final_answer"] = self._final_answer if terminated else ""
        return StepResult(
            observation=[{"role": self.tool_role if ran_code else "user", "content": text}],
            reward=1.0 if success else 0.0, terminated=terminated, truncated=truncated,
            info=info)

    def close(self) -> None:
        pass

    # -- tools ------------------------------------------------------------------------------

    def python(self, code: str) -> str:
        """Run Python code in a sandbox and return what it prints.

        Args:
            code: A Python program; print the values you need.
        """
        result = self.sandbox.run(code)
        self._code_ran = self._code_ran or result.ok
        return result.observation()

    def answer(self, x: str) -> str:
        """Give your final answer (an integer); this ends the episode.

        Args:
            x: The answer.
        """
        assert self._problem is not None
        self._final_answer = x.strip()
        return CORRECT if self.is_correct(x) else WRONG.format(gold=self._problem.answer)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """JSON schemas for the chat template (``[]`` in the compact format)."""
        return self.toolbox.template_schemas()

    def is_correct(self, text: str) -> bool:
        """Whether ``text`` is the gold integer (commas, spaces and a ``.0`` allowed)."""
        if self._problem is None:
            return False
        cleaned = re.sub(r"[\s,]", "", text)
        try:
            value = float(cleaned)
        except ValueError:
            return False
        return value == self._problem.answer

    # -- optional capabilities --------------------------------------------------------------

    def oracle_action(self) -> str | None:
        """``python[print(<expression>)]`` until a python call has run without error, then the
        answer (also when only one turn is left). Pure: it does not change the env's state."""
        if self._done or self._problem is None:
            return None
        if not self._code_ran and self.max_turns - self._turn > 1:
            return self.toolbox.format_call("python", f"print({self._problem.expression})")
        return self.toolbox.format_call("answer", str(self._problem.answer))

    def privileged_info(self) -> str:
        """The solving expression and the gold answer (for a privileged critic)."""
        if self._problem is None:
            return "no problem yet"
        return f"{self._problem.expression} = {self._problem.answer}"

    def sample_action(self, rng: random.Random) -> str:
        """A random valid call: a computation on two of the problem's numbers, or an answer."""
        if self._problem is None:
            raise RuntimeError("python-v0: call reset() before sample_action()")
        numbers = re.findall(r"\d+", self._problem.text) or ["1"]
        if rng.random() < 0.6:
            a, b = rng.choice(numbers), rng.choice(numbers)
            return self.toolbox.format_call("python", f"print({a} {rng.choice('+-*')} {b})")
        return self.toolbox.format_call("answer", rng.choice(numbers))
