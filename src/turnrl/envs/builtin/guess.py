"""``guess-v0``: find a simulated user's secret by asking yes/no questions, then name it.

Tests collaborative information gathering: the user holds hidden information and answers
every well-formed question truthfully by rule, so the agent must ask good questions, keep
track of the answers and commit to one guess. The grammar is tiny so a character-level model
can learn it: a *question* ends with ``?`` and is answered ``yes`` or ``no``; a *guess* starts
with ``guess``. Replies are case-insensitive and spaces around symbols are ignored.

``mode="number"`` (default): the secret is an integer in ``[1, high]`` (default 16; ``high``
is ignored in object mode).

- ``>k?`` asks "is it greater than k?", ``<k?`` asks "is it less than k?" (``k`` a whole
  number, up to 7 digits);
- ``guess k`` names the secret.

::

    system:    Find my secret number. Ask >k? or <k? (yes/no), then reply guess k.
    user:      My number is 1 to 16.
    assistant: >8?
    user:      no                       reward 0.0
    assistant: >4?
    user:      yes
    ...
    assistant: guess 6
    user:      Correct!                 reward 1.0, terminated

``mode="object"``: the secret is an object with a size (``small big``), a colour (``red green
blue yellow``) and a shape (``circle square triangle star``), 32 objects in all.

- ``v?`` asks whether the object has the value ``v`` (``red?``, ``star?``, ``big?``);
- ``guess a b c`` names one size, one colour and one shape, in any order
  (``guess big red star``).

One guess per episode: a correct guess ends it with reward 1.0 (``Correct!``), a wrong one ends
it with reward 0.0 and reveals the secret (``Wrong, it was 11.``), so the agent has to find out
before it commits. Questions earn 0.0. A reply in neither form is answered with ``Invalid. ...``
restating the grammar (reward 0, the turn is used up). After ``max_turns`` turns without a
guess the episode is truncated. Step ``info``: ``success``, ``invalid_action`` and
``candidates`` (how many secrets are still consistent with the answers).

The oracle asks ``>m?`` at the midpoint of the candidates left (binary search) in number mode
and, in object mode, the first value not yet ruled out of the first undecided attribute
(colour, then shape, then size); it guesses once one candidate is left. It needs at most
``ceil(log2(high)) + 1`` turns in number mode (5 for ``high=16``) and ``3 + 3 + 1 + 1 = 8``
in object mode; ``max_turns`` (default 10) must be at least that. ``state_key()`` is the
sorted tuple of the candidates consistent with every answer so far, so episodes that reached
the same knowledge share a key whatever their secrets; ``privileged_info()`` names the secret.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from turnrl.envs.protocol import EnvSpec
from turnrl.types import Message, StepResult

SPEC = EnvSpec(
    id="guess-v0",
    entry_point="turnrl.envs.builtin.guess:Guess",
    max_turns=10,
    description="Find a simulated user's secret number or object with yes/no questions.",
    reward_range=(0.0, 1.0),
    has_oracle=True,
    has_state_key=True,
    has_privileged_info=True,
)

MODES = ("number", "object")
MAX_HIGH = 1_000_000
# Object attributes, in the order the oracle asks about them. Every value is unique across
# attributes, so a bare value is a question. An object is written size, colour, shape.
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "colour": ("red", "green", "blue", "yellow"),
    "shape": ("circle", "square", "triangle", "star"),
    "size": ("small", "big"),
}
ORDER = ("size", "colour", "shape")  # an object (and a guess as rendered): "big red star"
VALUE_TO_ATTRIBUTE = {value: name for name, values in ATTRIBUTES.items() for value in values}
CORRECT_TEXT = "Correct!"
GUESS = re.compile(r"guess (.+)")  # replies are lower-cased with whitespace runs collapsed
NUMBER_QUESTION = re.compile(r"([<>]) ?([0-9]{1,7}) ?\?")
VALUE_QUESTION = re.compile(r"([a-z]+) ?\?")
NUMBER = re.compile(r"[0-9]{1,7}")

SecretObject = tuple[str, str, str]  # (size, colour, shape)


class NumberSecrets:
    """Secrets ``1..high``; questions ``>k?`` / ``<k?``; guesses ``guess k``."""

    instruction = "Find my secret number. Ask >k? or <k? (yes/no), then reply guess k."
    invalid = "Invalid. Ask >k? or <k?, or reply guess k."

    def __init__(self, high: int) -> None:
        self.high = high
        self.opening = f"My number is 1 to {high}."

    def all(self) -> tuple[int, ...]:
        return tuple(range(1, self.high + 1))

    def question(self, reply: str) -> Callable[[int], bool] | None:
        match = NUMBER_QUESTION.fullmatch(reply)
        if match is None:
            return None
        bound = int(match[2])
        if match[1] == ">":
            return lambda secret: secret > bound
        return lambda secret: secret < bound

    def guess(self, reply: str) -> int | None:
        match = GUESS.fullmatch(reply)
        return int(match[1]) if match and NUMBER.fullmatch(match[1]) else None

    def oracle(self, candidates: tuple[int, ...]) -> str:
        """Binary search: is it above the midpoint of the (contiguous) candidates?"""
        return f">{(candidates[0] + candidates[-1]) // 2}?"

    def sample(self, rng: random.Random) -> str:
        if rng.random() < 0.2:
            return f"guess {rng.randint(1, self.high)}"
        return f"{rng.choice('<>')}{rng.randint(1, self.high)}?"

    def parse_secret(self, secret: Any) -> int:
        if isinstance(secret, bool) or not isinstance(secret, int) or not 1 <= secret <= self.high:
            raise ValueError(
                f"guess: option secret must be an int in [1, {self.high}], got {secret!r}"
            )
        return secret

    def worst_case_turns(self) -> int:
        return (self.high - 1).bit_length() + 1  # ceil(log2(high)) questions, then the guess


class ObjectSecrets:
    """Secrets (size, colour, shape); questions ``value?``; guesses ``guess a b c``."""

    instruction = (
        "Find my secret object. Ask a value like red? (yes/no), then reply guess size colour "
        "shape."
    )
    invalid = (
        "Invalid. Ask one value like red?, or reply guess with a size, colour and shape like "
        "guess big red star."
    )
    opening = "My object is " + "; ".join(
        f"{name}: {' '.join(ATTRIBUTES[name])}" for name in ORDER
    ) + "."

    def all(self) -> tuple[SecretObject, ...]:
        return tuple(
            sorted(
                (size, colour, shape)
                for size in ATTRIBUTES["size"]
                for colour in ATTRIBUTES["colour"]
                for shape in ATTRIBUTES["shape"]
            )
        )

    def question(self, reply: str) -> Callable[[SecretObject], bool] | None:
        match = VALUE_QUESTION.fullmatch(reply)
        if match is None or match[1] not in VALUE_TO_ATTRIBUTE:
            return None
        value = match[1]
        index = ORDER.index(VALUE_TO_ATTRIBUTE[value])
        return lambda secret: secret[index] == value

    def guess(self, reply: str) -> SecretObject | None:
        match = GUESS.fullmatch(reply)
        return parse_object(match[1]) if match else None

    def oracle(self, candidates: tuple[SecretObject, ...]) -> str:
        """Attribute elimination: the first value still possible of the first undecided
        attribute (colour, shape, size)."""
        for name, values in ATTRIBUTES.items():
            index = ORDER.index(name)
            left = [value for value in values if any(c[index] == value for c in candidates)]
            if len(left) > 1:
                return f"{left[0]}?"
        raise AssertionError("oracle: only one candidate is left; guess it")

    def sample(self, rng: random.Random) -> str:
        if rng.random() < 0.2:
            return "guess " + " ".join(rng.choice(ATTRIBUTES[name]) for name in ORDER)
        return f"{rng.choice(sorted(VALUE_TO_ATTRIBUTE))}?"

    def parse_secret(self, secret: Any) -> SecretObject:
        parsed = parse_object(" ".join(str(secret).lower().split()))
        if parsed is None:
            raise ValueError(
                f"guess: option secret={secret!r} must name one size, colour and shape, "
                "like 'big red star'"
            )
        return parsed

    def worst_case_turns(self) -> int:
        return sum(len(values) - 1 for values in ATTRIBUTES.values()) + 1  # 3 + 3 + 1, guess


class Guess:
    """A simulated user holds a secret (a number in ``[1, high]`` or an object) and answers
    yes/no questions about it truthfully; the agent wins by naming it in one guess."""

    def __init__(self, *, mode: str = "number", high: int = 16, max_turns: int = 10) -> None:
        self.secrets = _validate(mode, high, max_turns)
        self.mode, self.high, self.max_turns = mode, high, max_turns
        self.spec = replace(
            SPEC,
            max_turns=max_turns,
            kwargs={"mode": mode, "high": high, "max_turns": max_turns},
        )
        self._rng: random.Random | None = None
        self._secret: Any = None
        self._candidates: tuple[Any, ...] = ()  # sorted; consistent with every answer so far
        self._turn = 0
        self._done = True

    # -- the Env protocol -------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        """New episode. ``options={"secret": 7}`` (``{"secret": "big red star"}`` in object
        mode) fixes the secret instead of drawing it. ``info["candidates"]``: how many secrets
        are possible."""
        options = dict(options or {})
        secret = options.pop("secret", None)
        if options:
            raise ValueError(f"guess: unknown reset option(s) {sorted(options)}; only 'secret'")
        if seed is not None or self._rng is None:
            self._rng = random.Random(seed)
        self._candidates = self.secrets.all()
        if secret is None:
            self._secret = self._rng.choice(self._candidates)
        else:
            self._secret = self.secrets.parse_secret(secret)
        self._turn, self._done = 0, False
        return [
            {"role": "system", "content": self.secrets.instruction},
            {"role": "user", "content": self.secrets.opening},
        ], {"candidates": len(self._candidates)}

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RuntimeError("guess: the episode is over; call reset() first")
        self._turn += 1
        reply = " ".join(action.lower().split())
        guess = self.secrets.guess(reply)
        question = None if guess is not None else self.secrets.question(reply)
        success = guess is not None and guess == self._secret
        if guess is not None:
            text = CORRECT_TEXT if success else f"Wrong, it was {describe(self._secret)}."
        elif question is not None:
            answer = question(self._secret)
            self._candidates = tuple(c for c in self._candidates if question(c) == answer)
            text = "yes" if answer else "no"
        else:
            text = self.secrets.invalid
        terminated = guess is not None
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        return StepResult(
            observation=[{"role": "user", "content": text}],
            reward=1.0 if success else 0.0,
            terminated=terminated,
            truncated=truncated,
            info={
                "success": success,
                "invalid_action": guess is None and question is None,
                "candidates": len(self._candidates),
            },
        )

    def close(self) -> None:
        pass

    # -- optional capabilities --------------------------------------------------------------

    def oracle_action(self) -> str | None:
        """Binary search (number mode) or attribute elimination (object mode) over the
        candidates left, ``guess ...`` once one is left; ``None`` once the episode is over."""
        if self._done:
            return None
        if len(self._candidates) == 1:
            return f"guess {describe(self._candidates[0])}"
        return self.secrets.oracle(self._candidates)

    def privileged_info(self) -> str:
        """The secret (for a privileged critic, never the policy): ``"secret: 11"``;
        ``"no secret yet"`` before the first ``reset``."""
        if self._secret is None:
            return "no secret yet"
        return f"secret: {describe(self._secret)}"

    def state_key(self) -> tuple[Any, ...]:
        """The candidates consistent with every answer so far, sorted (so its ``repr`` is
        canonical): episodes with the same knowledge share a key, whatever their secrets."""
        return self._candidates

    def sample_action(self, rng: random.Random) -> str:
        """A random well-formed reply from the caller's ``rng``, a question 80% of the time and
        a guess otherwise (imperfect SFT demonstrations, random baselines)."""
        return self.secrets.sample(rng)


def parse_object(text: str) -> SecretObject | None:
    """``"red star big"`` -> ``("big", "red", "star")``: one value of each attribute, in any
    order, separated by single spaces; ``None`` otherwise."""
    by_attribute = {VALUE_TO_ATTRIBUTE.get(word): word for word in text.split(" ")}
    if len(text.split(" ")) != len(ORDER) or set(by_attribute) != set(ORDER):
        return None
    return by_attribute["size"], by_attribute["colour"], by_attribute["shape"]


def describe(secret: int | SecretObject) -> str:
    """How a secret is written: ``"11"`` or ``"big red star"``."""
    return str(secret) if isinstance(secret, int) else " ".join(secret)


def _validate(mode: str, high: int, max_turns: int) -> NumberSecrets | ObjectSecrets:
    if mode not in MODES:
        raise ValueError(f"guess: mode must be one of {MODES}, got {mode!r}")
    if isinstance(high, bool) or not isinstance(high, int) or not 2 <= high <= MAX_HIGH:
        raise ValueError(f"guess: high must be an int in [2, {MAX_HIGH}], got {high!r}")
    secrets = NumberSecrets(high) if mode == "number" else ObjectSecrets()
    needed = secrets.worst_case_turns()
    if max_turns < needed:
        if mode == "number":
            what, fix = f"high={high}", " or lower high"
        else:
            what, fix = "mode='object'", ""
        raise ValueError(
            f"guess: max_turns={max_turns} is too short for {what} (finding the secret takes up "
            f"to {needed - 1} questions and a guess); raise max_turns to >= {needed}{fix}"
        )
    return secrets
