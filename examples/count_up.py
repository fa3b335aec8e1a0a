"""``countup-v0``: a user's first env, as a newcomer writes it from docs/environments.md.

The user names a number; the agent replies with the next number, then the next, one per
reply, for three replies. Each correct number earns 1/3; an episode succeeds when all three
are right. ``turnrl train --import count_up env.id=countup-v0`` (run from this directory, or
with it on ``PYTHONPATH``). docs/environments.md ("My env does not learn") trains it from the
random init, reads ``turnrl doctor`` on that run, and trains it again from the base.
"""

from __future__ import annotations

import random

from turnrl.envs import register
from turnrl.types import StepResult


class CountUp:
    """Count up from a number the user names, one number per reply."""

    def __init__(self, *, high: int = 50, max_turns: int = 3) -> None:
        self.high, self.max_turns = high, max_turns
        self._rng = random.Random()
        self._next, self._turn, self._done, self._right = 0, 0, True, 0

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = random.Random(seed)
        start = self._rng.randint(0, self.high)
        self._next, self._turn, self._done, self._right = start + 1, 0, False, 0
        return [{"role": "user", "content": f"Count up from {start}: reply with the next "
                 "number, one number per reply."}], {}

    def step(self, action: str) -> StepResult:
        self._turn += 1
        correct = action.strip() == str(self._next)
        text = "Next." if correct else f"No, {self._next}. Next."
        self._next += 1
        self._right += correct
        self._done = self._turn >= self.max_turns
        return StepResult(observation=[{"role": "user", "content": text}],
                          reward=1 / 3 if correct else 0.0, terminated=self._done,
                          truncated=False, info={"correct": correct, "success": self._done
                                                 and self._right == self.max_turns})

    def oracle_action(self) -> str | None:
        return None if self._done else str(self._next)

    def sample_action(self, rng: random.Random) -> str:
        return str(rng.randint(0, self.high + self.max_turns + 1))

    def close(self) -> None:
        pass


register("countup-v0", CountUp, max_turns=3, has_oracle=True,
         description="Count up from a number, one number per reply.", high=50)
