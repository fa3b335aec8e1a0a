"""``arithmetic-v0``: one integer-arithmetic question, answered in one turn.

Tests whether the agent can compute ``a op b`` for small integers. The prompt is as short
as it can be (a tiny character-level model reads it)::

    user:      37+48=
    assistant: 85
    user:      Correct.          reward 1.0, terminated

Reward 1.0 when the reply, stripped, is an integer equal to the answer, else 0.0.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from typing import Any

from turnrl.envs.protocol import EnvSpec
from turnrl.types import Message, StepResult

SPEC = EnvSpec(
    id="arithmetic-v0",
    entry_point="turnrl.envs.builtin.arithmetic:Arithmetic",
    max_turns=1,
    description="One question 'a+b=' with integer operands; reply with the integer result.",
    reward_range=(0.0, 1.0),
    has_oracle=True,
)

OPERATIONS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
INTEGER = re.compile(r"[+-]?\d+")


class Arithmetic:
    """``a op b =`` with ``a, b`` uniform in ``[min_value, max_value]`` and ``op`` from ``ops``."""

    def __init__(self, *, min_value: int = 0, max_value: int = 99, ops: str = "+") -> None:
        if min_value > max_value:
            raise ValueError(f"arithmetic: min_value={min_value} exceeds max_value={max_value}")
        unknown = [op for op in ops if op not in OPERATIONS]
        if not ops or unknown:
            raise ValueError(
                f"arithmetic: ops={ops!r} must be a non-empty string of {''.join(OPERATIONS)!r}"
            )
        self.min_value, self.max_value, self.ops = min_value, max_value, ops
        self.spec = replace(
            SPEC, kwargs={"min_value": min_value, "max_value": max_value, "ops": ops}
        )
        self._rng: random.Random | None = None
        self._answer: int | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        if options:
            raise ValueError(f"arithmetic: reset takes no options, got {sorted(options)}")
        if seed is not None or self._rng is None:
            self._rng = random.Random(seed)
        a = self._rng.randint(self.min_value, self.max_value)
        b = self._rng.randint(self.min_value, self.max_value)
        op = self._rng.choice(self.ops)
        self._answer = OPERATIONS[op](a, b)
        return [{"role": "user", "content": f"{a}{op}{b}="}], {}

    def step(self, action: str) -> StepResult:
        if self._answer is None:
            raise RuntimeError("arithmetic: call reset() before step() (the episode is over)")
        answer, self._answer = self._answer, None
        reply = action.strip()
        success = INTEGER.fullmatch(reply) is not None and int(reply) == answer
        text = "Correct." if success else f"Wrong, the answer is {answer}."
        return StepResult(
            observation=[{"role": "user", "content": text}],
            reward=1.0 if success else 0.0,
            terminated=True,
            truncated=False,
            info={"success": success},
        )

    def oracle_action(self) -> str | None:
        return None if self._answer is None else str(self._answer)

    def sample_action(self, rng: random.Random) -> str:
        """A random answer within 5 of the truth, from the caller's ``rng`` (imperfect demos)."""
        answer = 0 if self._answer is None else self._answer
        return str(answer + rng.randint(-5, 5))

    def close(self) -> None:
        pass
