"""``keypad-v0``: enter a code one digit a turn, reading each digit off a key given once.

A small multi-turn env written for the transfer test of the pretrained base (issue 40): no
part of it is in the pretraining corpus. The first user message is a key that gives each
symbol a digit; then the env shows one symbol per turn and the agent replies with its digit.
The key is never shown again, so every later turn has to look further back into the
conversation.

::

    system:    Enter the code. Reply with the digit of each symbol, one per turn.
    user:      Key: owl=4, fox=9, elk=0, bee=7, yak=2, emu=5
               Symbol 1 of 4: fox
    assistant: 9
    user:      Symbol 2 of 4: yak          reward 0.25
    ...
    assistant: 5
    user:      Open!                       reward 0.25, terminated, success

A wrong or malformed reply ends the episode (``Locked.``, reward 0, ``invalid_action`` for a
reply that is not one digit). Options: ``num_symbols`` (2-26, default 6: the key's size) and
``code_length`` (1-12, default 4: the turns). Each right digit earns ``1 / code_length``. The
oracle replies with the right digit; ``sample_action`` with a random one; ``state_key()`` is
(turn, the symbols still to enter), so episodes at the same place with the same task share it.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from turnrl.envs.protocol import EnvSpec
from turnrl.types import Message, StepResult

SPEC = EnvSpec(
    id="keypad-v0",
    entry_point="turnrl.envs.builtin.keypad:Keypad",
    max_turns=4,
    description="Enter a code one digit a turn, reading each digit off a key shown once.",
    reward_range=(0.0, 1.0),
    has_oracle=True,
    has_state_key=True,
)

SYMBOLS = ("owl", "fox", "elk", "bee", "yak", "emu", "cat", "dog", "ant", "bat", "cow",
           "eel", "hen", "jay", "koi", "ram", "pig", "rat", "asp", "gnu", "ape", "doe",
           "ewe", "hog", "kid", "tit")
INSTRUCTION = "Enter the code. Reply with the digit of each symbol, one per turn."


class Keypad:
    """The key maps ``num_symbols`` symbols to random digits; the code is ``code_length``
    symbols drawn from the key."""

    def __init__(self, *, num_symbols: int = 6, code_length: int = 4) -> None:
        if isinstance(num_symbols, bool) or not isinstance(num_symbols, int) \
                or not 2 <= num_symbols <= len(SYMBOLS):
            raise ValueError(f"keypad: num_symbols must be an int in [2, {len(SYMBOLS)}], "
                             f"got {num_symbols!r}")
        if isinstance(code_length, bool) or not isinstance(code_length, int) \
                or not 1 <= code_length <= 12:
            raise ValueError(f"keypad: code_length must be an int in [1, 12], got "
                             f"{code_length!r}")
        self.num_symbols, self.code_length = num_symbols, code_length
        self.spec = replace(SPEC, max_turns=code_length,
                            kwargs={"num_symbols": num_symbols, "code_length": code_length})
        self._key: dict[str, int] = {}
        self._code: list[str] = []
        self._turn = 0
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[list[Message], dict[str, Any]]:
        if options:
            raise ValueError(f"keypad: unknown reset option(s) {sorted(options)}")
        rng = random.Random(seed)
        symbols = rng.sample(SYMBOLS, self.num_symbols)
        self._key = {s: rng.randrange(10) for s in symbols}
        self._code = [rng.choice(symbols) for _ in range(self.code_length)]
        self._turn, self._done = 0, False
        key = ", ".join(f"{s}={d}" for s, d in self._key.items())
        return [{"role": "system", "content": INSTRUCTION},
                {"role": "user", "content": f"Key: {key}\n{self._prompt()}"}], {}

    def _prompt(self) -> str:
        return f"Symbol {self._turn + 1} of {self.code_length}: {self._code[self._turn]}"

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RuntimeError("keypad: the episode is over; call reset() first")
        reply = action.strip()
        right = reply == str(self._key[self._code[self._turn]])
        self._turn += 1
        success = right and self._turn == self.code_length
        self._done = not right or success
        text = "Open!" if success else self._prompt() if right else "Locked."
        return StepResult(observation=[{"role": "user", "content": text}],
                          reward=1.0 / self.code_length if right else 0.0,
                          terminated=self._done, truncated=False,
                          info={"success": success,
                                "invalid_action": not (len(reply) == 1 and reply.isdigit())})

    def close(self) -> None:
        pass

    def oracle_action(self) -> str | None:
        """The digit of the symbol shown; None once the episode is over."""
        return None if self._done else str(self._key[self._code[self._turn]])

    def sample_action(self, rng: random.Random) -> str:
        """A random digit (imperfect SFT demonstrations)."""
        return str(rng.randrange(10))

    def state_key(self) -> tuple[Any, ...]:
        """The turn and the digits still to enter."""
        return (self._turn, tuple(self._key[s] for s in self._code[self._turn:]))
