"""``referential-v0``: a cooperative referential game of two agents, ``speaker`` and
``listener``.

Each episode draws ``num_candidates`` distinct objects (a size ``small big``, a colour ``red
blue green yellow`` and a shape ``circle square triangle star``; 32 objects in all) and a
target among them. The speaker sees the candidates and which is the target, and describes the
target in at most ``max_words`` words; the listener sees the description and the candidates,
listed in an order shuffled independently of the speaker's (so a position is useless), and
writes the one meant as it is listed (``big red star``; its number in the list is accepted
too). Two steps, the speaker first, then the episode ends for both (terminated). Writing a
listed item that a word singles out is the ``choose`` skill of the built-in base's corpus.

Kwargs: ``num_candidates`` (2 to 6, default 3), ``max_words`` (3 to 10, default 4: three
words single out any target), ``max_turns`` (at least 2, default 2) and ``oracle_words``
(``"fewest"``, the default, or ``"all"``: how the oracle speaker describes the target, see
below).

Rewards: a team reward, 1.0 to both agents if the listener picked the target and 0.0
otherwise (both at the listener's step; the speaker's step earns 0.0). At the end
``infos[agent]["outcome"]`` is ``"success"`` or ``"failure"`` for both.

Invalid replies never raise. A speaker reply that is empty, longer than ``max_words`` words
or holds a digit is invalid (``infos["speaker"]["invalid_action"]``); the speaker is told so
and the listener still gets it, digits removed, then cut to ``max_words`` words (and
:data:`MAX_DESCRIPTION_CHARS` characters). A listener reply that is neither a listed candidate
(case and spacing aside) nor a number ``1..n`` (whitespace and punctuation around it are
allowed: ``" 2."``) is invalid and a failure.

The oracle speaker names the fewest attributes of the target that no other candidate shares
(the first such set in the order size, colour, shape; words always in that order:
``"big star"``), or with ``oracle_words="all"`` every attribute, the target as listed
(``"big red star"``): then the game is one of copying, the target's name from the
speaker's prompt into the description and from the description to the list, the skill the
built-in base is best at (docs/pretraining.md), instead of choosing distinguishing
attributes and matching them. The oracle listener writes the first candidate that has every
attribute word of the description, and when none has, a candidate drawn from the episode's
rng at reset.
``sample_action(rng)`` is 1 to ``max_words`` random attribute words, or a random candidate.

::

    speaker  system:    Referential game. You are the speaker: ...
    speaker  user:      Objects: small red star, big blue circle, big red star. Target: big
                        red star. Describe the target in at most 4 words ...
    speaker  assistant: big red
    listener system:    Referential game. You are the listener: ...
    listener user:      The speaker says: "big red". Objects:
                        - big blue circle
                        - big red star
                        - small red star
                        Write the one meant, as listed.
    listener assistant: big red star              reward 1.0 to both, terminated
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import replace
from typing import Any

from turnrl.envs.multi.protocol import MultiStepResult
from turnrl.envs.multi.turns import TurnTable, TurnTableEnv
from turnrl.envs.protocol import EnvSpec
from turnrl.types import Message

SPEC = EnvSpec(
    id="referential-v0",
    entry_point="turnrl.envs.multi.referential:ReferentialGame",
    max_turns=2,
    description="Cooperative referential game: a speaker describes a target object in a few "
                "words; a listener picks it among the candidates.",
    reward_range=(0.0, 1.0),
    has_oracle=True,
    agents=("speaker", "listener"),
    kwargs={"num_candidates": 3, "max_words": 4},
)

AGENTS = ("speaker", "listener")
ORDER = ("size", "colour", "shape")  # an object is written in this order: "big red star"
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "size": ("small", "big"),
    "colour": ("red", "blue", "green", "yellow"),
    "shape": ("circle", "square", "triangle", "star"),
}
WORDS = tuple(value for name in ORDER for value in ATTRIBUTES[name])
OBJECTS: tuple[tuple[str, ...], ...] = tuple(itertools.product(*(ATTRIBUTES[n] for n in ORDER)))
CANDIDATES_RANGE = (2, 6)
MAX_WORDS_RANGE = (3, 10)
ORACLE_WORDS = ("fewest", "all")  # the oracle speaker's descriptions (oracle_words)
MAX_DESCRIPTION_CHARS = 80  # what the listener is shown of the speaker's reply, at most
LISTENER_REPLY = re.compile(r"[\s.,;:!?()\[\]'\"#*]*([0-9]{1,3})[\s.,;:!?()\[\]'\"*]*")
SPEAKER_ROLE = "Referential game. You are the speaker: the listener must pick the target from " \
               "your words."
LISTENER_ROLE = "Referential game. You are the listener: the speaker will describe one object " \
                "for you to pick."


class ReferentialGame(TurnTableEnv):
    """A speaker describes a target object in a few words; a listener picks it among the
    candidates (see the module docstring)."""

    def __init__(self, *, num_candidates: int = 3, max_words: int = 4,
                 max_turns: int = 2, oracle_words: str = "fewest") -> None:
        _check_int("num_candidates", num_candidates, *CANDIDATES_RANGE)
        _check_int("max_words", max_words, *MAX_WORDS_RANGE)
        _check_int("max_turns", max_turns, 2, None)
        if oracle_words not in ORACLE_WORDS:
            raise ValueError(f"referential: oracle_words must be one of {ORACLE_WORDS}, got "
                             f"{oracle_words!r}")
        self.num_candidates, self.max_words = num_candidates, max_words
        self.oracle_words = oracle_words
        self.spec = replace(SPEC, max_turns=max_turns, kwargs={
            "num_candidates": num_candidates, "max_words": max_words, "max_turns": max_turns,
            "oracle_words": oracle_words})
        self.table = TurnTable(AGENTS)
        self._rng: random.Random | None = None
        self._objects: list[tuple[str, ...]] = []  # the speaker's order
        self._shown: list[tuple[str, ...]] = []  # the listener's order (numbered from 1)
        self._target: tuple[str, ...] = ()
        self._description = ""  # what the listener was told
        self._fallback = 0  # the oracle listener's pick (0-based) when nothing matches

    # -- the multi-agent contract -------------------------------------------------------------

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> dict[str, Any]:
        """New episode; ``info``: the seed, the target and the candidates (speaker's order)."""
        if options:
            raise ValueError(f"referential: reset takes no options, got {sorted(options)}")
        if seed is not None or self._rng is None:
            self._rng = random.Random(seed)
        self._objects = self._rng.sample(OBJECTS, self.num_candidates)
        self._target = self._rng.choice(self._objects)
        self._shown = self._rng.sample(self._objects, self.num_candidates)
        self._fallback = self._rng.randrange(self.num_candidates)
        self._description = ""
        listing = ", ".join(_name(o) for o in self._objects)
        speaker: list[Message] = [
            {"role": "system", "content": SPEAKER_ROLE},
            {"role": "user", "content": f"Objects: {listing}. Target: {_name(self._target)}. "
             f"Describe the target in at most {self.max_words} words so the listener can "
             "pick it. Name no number or position."}]
        listener: list[Message] = [{"role": "system", "content": LISTENER_ROLE}]
        self.table.start({"speaker": speaker, "listener": listener}, first="speaker")
        return {"seed": seed, "target": _name(self._target),
                "candidates": [_name(o) for o in self._objects]}

    def step(self, action: str) -> MultiStepResult:
        if not self.table.live:
            raise RuntimeError("referential: the episode is over; call reset() first")
        agent = self.table.current
        self.table.reply(agent, action)
        return self._speak(action) if agent == "speaker" else self._pick(action)

    # -- optional capabilities ----------------------------------------------------------------

    def oracle_action(self) -> str | None:
        """The shortest distinguishing description (speaker) or the matching candidate as
        listed (listener); ``None`` once the episode is over."""
        if not self.table.live:
            return None
        if self.table.current == "speaker":
            if self.oracle_words == "all":
                return _name(self._target)
            return _shortest_description(self._target, self._objects)
        words = [w for w in re.findall(r"[a-z]+", self._description.lower()) if w in WORDS]
        matches = [i for i, o in enumerate(self._shown) if all(w in o for w in words)]
        return _name(self._shown[matches[0] if matches else self._fallback])

    def sample_action(self, rng: random.Random) -> str:
        """A random valid reply: 1 to ``max_words`` attribute words, or a listed candidate."""
        if self.table.current == "speaker":
            return " ".join(rng.choices(WORDS, k=rng.randint(1, self.max_words)))
        return _name(rng.choice(self._shown))

    # -- the two turns ------------------------------------------------------------------------

    def _speak(self, action: str) -> MultiStepResult:
        words = action.split()
        invalid = not words or len(words) > self.max_words or any(c.isdigit() for c in action)
        kept = "".join(c for c in action if not c.isdigit()).split()[:self.max_words]
        self._description = " ".join(kept)[:MAX_DESCRIPTION_CHARS]
        if invalid:
            self.table.tell("speaker", f"Invalid: use 1 to {self.max_words} words and no "
                            f"digits. The listener is told \"{self._description}\".")
        listed = "\n".join(f"- {_name(o)}" for o in self._shown)
        self.table.tell("listener", f"The speaker says: \"{self._description}\". Objects:\n"
                        f"{listed}\nWrite the one meant, as listed.")
        self.table.pass_turn("listener")
        return self.table.result(infos={"speaker": {"invalid_action": invalid}})

    def _pick(self, action: str) -> MultiStepResult:
        match = LISTENER_REPLY.fullmatch(action)
        number = int(match[1]) if match else 0
        written = " ".join(action.lower().split()).strip(" .")
        names = [_name(o) for o in self._shown]
        if written in names:
            number = names.index(written) + 1
        invalid = not 1 <= number <= self.num_candidates
        success = not invalid and self._shown[number - 1] == self._target
        target = _name(self._target)
        if invalid:
            verdict = f"Invalid: write one of the listed objects. Failure: the target was " \
                      f"{target}."
        elif success:
            verdict = f"Success: the listener picked {target}."
        else:
            verdict = f"Failure: the listener picked {_name(self._shown[number - 1])}; the " \
                      f"target was {target}."
        for agent in AGENTS:
            self.table.tell(agent, verdict)
        reward = 1.0 if success else 0.0
        outcome = "success" if success else "failure"
        return self.table.result(
            rewards=dict.fromkeys(AGENTS, reward), ended=True,
            infos={"speaker": {"outcome": outcome},
                   "listener": {"outcome": outcome, "invalid_action": invalid}})


def _name(obj: tuple[str, ...]) -> str:
    return " ".join(obj)


def _shortest_description(target: tuple[str, ...], objects: list[tuple[str, ...]]) -> str:
    """The target's values of the fewest attributes no other object shares all of (the first
    such set in ``ORDER``'s order), in ``ORDER``: ``"big star"``."""
    others = [o for o in objects if o != target]
    for size in range(1, len(ORDER) + 1):
        for positions in itertools.combinations(range(len(ORDER)), size):
            if all(any(o[p] != target[p] for p in positions) for o in others):
                return " ".join(target[p] for p in positions)
    return _name(target)  # unreachable: the candidates are distinct


def _check_int(name: str, value: Any, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or \
            (high is not None and value > high):
        allowed = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"referential: {name} must be an int {allowed}, got {value!r}")
