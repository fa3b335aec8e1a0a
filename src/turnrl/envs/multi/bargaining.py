"""``bargaining-v0``: two agents split a pool of items they value differently (after Lewis et
al. 2017, "Deal or No Deal? End-to-End Learning for Negotiation Dialogues"), in a compact
text form a character-level model can learn.

The pool holds 1 to 3 books, hats and balls (at least 4 items). Each agent has private
points per item type, non-negative integers with Σ count × points = 10. The pair of value
vectors is drawn uniformly from those where the two differ (then, as both total 10 over the
same counts, each agent values some type more than the other does, so trading pays) and
every type is worth something to someone. Pools with no such pair are redrawn, and who
speaks first is drawn too: every choice comes from the ``random.Random(seed)`` of ``reset``.

Replies (case-insensitive): ``propose B H L``, the books, hats and balls the speaker keeps
(the rest go to the other); ``accept``, which accepts the latest proposal if the other made
it (the standing one); ``walk``, which ends without a deal. Anything else,
a count above the pool's, or ``accept`` with no standing proposal from the other is invalid:
``infos[agent]["invalid_action"]`` is true, the agent is told why, and it loses its turn.

Rewards: a deal gives each agent its points of what it gets / 10 (``reward_range (0, 1)``)
and terminates the episode; ``walk`` terminates it with 0 for both; ``max_turns`` steps (both
agents' together, invalid ones included) without a deal truncate it with 0 for both. Each
step's ``infos[agent]`` has ``invalid_action``; the last adds ``outcome`` (``"success"`` on a
deal, else ``"failure"``), ``deal`` (``{agent: (books, hats, balls)}``, ``None`` without one)
and ``value`` (the agent's points). Kwargs: ``max_turns`` (default 6, 2 to 20: longer games
overflow a 2,048-character context). An agent's points never appear in the other's
conversation; ``reset``'s info has the seed, the pool and who starts, not the values.

The oracle (it never walks) uses only what its agent is shown (its points, the pool, the
other's proposals, the step count ``k``: messages say how many turns are left), so a model
can imitate it. Its threshold falls from 7
points at the first step to 4 at the last: ``t = 7 - 3k / (max_turns - 1)``. With a standing
offer worth ``>= t`` to it, it accepts. Otherwise it proposes, among the splits worth ``>= t``
to it, the one that leaves the other the most items it might value, counting each item of a
type the other kept in its latest proposal twice (every type once before it proposed); ties
go to the split worth more to the oracle, then to the lexicographically larger one.

A game (seed 3, oracle against oracle; each agent's system message states the rules)::

    bob user:   Pool: books 1, hats 3, balls 3. Your points each: book 1, hat 1, ball 2.
                You start; 6 turns left.
    bob:        propose 1 0 3
    alice user: Bob proposes: you get 0 3 0 (6 points), Bob gets 1 0 3. 5 turns left.
    alice:      propose 1 3 0
    bob user:   Alice proposes: you get 0 0 3 (6 points), Alice gets 1 3 0. 4 turns left.
    bob:        accept                    rewards: alice 0.7, bob 0.6; terminated
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from functools import lru_cache
from typing import Any

from turnrl.envs.multi.protocol import MultiStepResult
from turnrl.envs.multi.turns import TurnTable, TurnTableEnv
from turnrl.envs.protocol import EnvSpec
from turnrl.types import Message

AGENTS = ("alice", "bob")
ITEMS = ("book", "hat", "ball")
TOTAL = 10  # each agent's points for the whole pool
MAX_TURNS_RANGE = (2, 20)
SPEC = EnvSpec(
    id="bargaining-v0",
    entry_point="turnrl.envs.multi.bargaining:Bargaining",
    max_turns=6,
    description="Two agents with private values split books, hats and balls (Deal or No Deal).",
    reward_range=(0.0, 1.0),
    has_oracle=True,
    agents=AGENTS,
    kwargs={"max_turns": 6},
)
PROPOSE = re.compile(r"propose (\d{1,3}) (\d{1,3}) (\d{1,3})")
FORMAT = "reply propose B H L, accept or walk"

Items = tuple[int, int, int]  # (books, hats, balls)


def points(values: Items, items: Items) -> int:
    """An agent's points for ``items``."""
    return sum(v * n for v, n in zip(values, items, strict=True))


def splits(pool: Items) -> list[Items]:
    """Every ``(books, hats, balls)`` one agent may keep, in lexicographic order."""
    books, hats, balls = (range(count + 1) for count in pool)
    return [(b, h, n) for b in books for h in hats for n in balls]


def rest(pool: Items, kept: Items) -> Items:
    """What the other agent gets when one keeps ``kept``."""
    return (pool[0] - kept[0], pool[1] - kept[1], pool[2] - kept[2])


@lru_cache(maxsize=64)
def value_pairs(pool: Items) -> tuple[tuple[Items, Items], ...]:
    """The (alice, bob) value vectors that may go with ``pool`` (see the module docstring)."""
    vectors = [v for v in splits((TOTAL, TOTAL, TOTAL)) if points(v, pool) == TOTAL]
    return tuple((a, b) for a in vectors for b in vectors
                 if a != b and all(x or y for x, y in zip(a, b, strict=True)))


def draw_game(rng: random.Random) -> tuple[Items, dict[str, Items]]:
    """A pool and each agent's values (redrawn until the pool has a valid pair)."""
    while True:
        pool: Items = (rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 3))
        pairs = value_pairs(pool) if sum(pool) >= 4 else ()
        if pairs:
            alice, bob = rng.choice(pairs)
            return pool, {"alice": alice, "bob": bob}


def describe(items: Items) -> str:
    return " ".join(str(n) for n in items)


class Bargaining(TurnTableEnv):
    """Alice and Bob split a pool of books, hats and balls by proposals (module docstring)."""

    def __init__(self, *, max_turns: int = 6) -> None:
        low, high = MAX_TURNS_RANGE
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) \
                or not low <= max_turns <= high:
            raise ValueError(f"bargaining: max_turns must be an int in [{low}, {high}] (a deal "
                             f"takes two turns; more overflow the context), got {max_turns!r}")
        self.max_turns = max_turns
        self.spec = replace(SPEC, max_turns=max_turns, kwargs={"max_turns": max_turns})
        self.table = TurnTable(AGENTS)
        self.pool: Items = (0, 0, 0)
        self.values: dict[str, Items] = {}  # private: each agent sees only its own
        self._offer: tuple[str, Items] | None = None  # standing: (proposer, what it keeps)
        self._proposals: dict[str, tuple[str, Items]] = {}  # each agent's latest proposal
        self._steps = 0

    # -- the multi-agent protocol -----------------------------------------------------------

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> dict[str, Any]:
        """New game; returns ``{"seed", "pool": {"books": n, ...}, "first"}`` (no values)."""
        if options:
            raise ValueError(f"bargaining: unknown reset option(s) {sorted(options)}; none "
                             "are supported")
        rng = random.Random(seed)
        self.pool, self.values = draw_game(rng)
        first = rng.choice(AGENTS)
        self._offer, self._proposals, self._steps = None, {}, 0
        self.table.start({agent: self._opening(agent, first) for agent in AGENTS}, first=first)
        pool = {f"{item}s": n for item, n in zip(ITEMS, self.pool, strict=True)}
        return {"seed": seed, "pool": pool, "first": first}

    def step(self, action: str) -> MultiStepResult:
        if not self.table.live:
            raise RuntimeError("bargaining: the episode is over; call reset() first")
        agent = self.table.current
        other = _other(agent)
        self.table.reply(agent, action)
        self._steps += 1
        reply = " ".join(action.lower().split()).rstrip(".")
        move = PROPOSE.fullmatch(reply)
        if reply == "walk":
            self.table.tell(agent, "You walk away. No deal: 0 points.")
            self.table.tell(other, f"{agent.title()} walks away. No deal: 0 points.")
            return self._end(invalid=None, truncated=False)
        if reply == "accept" and self._offer is not None and self._offer[0] == other:
            return self._deal(agent)
        error = self._error(agent, reply, move)
        if error is None and move is not None:
            kept: Items = (int(move[1]), int(move[2]), int(move[3]))
            self._offer = self._proposals[agent] = (agent, kept)
            news = (f"{agent.title()} proposes: you get {describe(rest(self.pool, kept))} "
                    f"({points(self.values[other], rest(self.pool, kept))} points), "
                    f"{agent.title()} gets {describe(kept)}.")
        else:
            self.table.tell(agent, f"Invalid: {error}. Your turn is lost.")
            news = f"{agent.title()} made an invalid reply."
        invalid = {agent: error is not None}
        if self._steps >= self.max_turns:
            for name in AGENTS:
                self.table.tell(name, (news + " " if name == other else "")
                                + "Out of turns. No deal: 0 points.")
            return self._end(invalid=invalid, truncated=True)
        self.table.tell(other, f"{news} {self.max_turns - self._steps} turns left.")
        self.table.pass_turn(other)
        return self.table.result(infos={a: {"invalid_action": invalid.get(a, False)}
                                        for a in AGENTS})

    # -- capabilities -----------------------------------------------------------------------

    def oracle_action(self) -> str | None:
        """The scripted negotiator's reply for the agent whose turn it is (module docstring);
        ``None`` once the episode is over."""
        if not self.table.live:
            return None
        agent = self.table.current
        values = self.values[agent]
        span = self.max_turns - 1
        threshold = 7 - 3 * min(self._steps, span) / span
        offer = self._offer
        if offer is not None and offer[0] != agent and \
                points(values, rest(self.pool, offer[1])) >= threshold:
            return "accept"
        # the types the other might value: those it kept some of in its latest proposal
        theirs = self._proposals.get(_other(agent))
        wanted = (1, 1, 1) if theirs is None else tuple(1 + (n > 0) for n in theirs[1])
        candidates = [kept for kept in splits(self.pool) if points(values, kept) >= threshold]
        best = max(candidates, key=lambda kept: (
            sum(w * n for w, n in zip(wanted, rest(self.pool, kept), strict=True)),
            points(values, kept), kept))
        return f"propose {describe(best)}"

    def sample_action(self, rng: random.Random) -> str:
        """A random legal reply from the caller's ``rng``: with a standing offer from the
        other, ``accept`` 1/3 of the time and ``walk`` 1/20; otherwise a uniform random
        split (``walk`` 1/20 of the time)."""
        agent = self.table.current
        can_accept = self._offer is not None and self._offer[0] != agent
        roll = rng.random()
        if can_accept and roll < 1 / 3:
            return "accept"
        if roll > 19 / 20:
            return "walk"
        return f"propose {describe(rng.choice(splits(self.pool)))}"

    # -- helpers ----------------------------------------------------------------------------

    def _opening(self, agent: str, first: str) -> list[Message]:
        other = _other(agent).title()
        values = ", ".join(f"{item} {v}" for item, v in zip(ITEMS, self.values[agent],
                                                             strict=True))
        pool = ", ".join(f"{item}s {n}" for item, n in zip(ITEMS, self.pool, strict=True))
        starts = "You start" if agent == first else f"{first.title()} starts"
        return [
            {"role": "system", "content": f"Bargain with {other} over books, hats and balls. "
             f"Reply propose B H L (the books, hats, balls you keep; {other} gets the rest), "
             f"accept ({other}'s last proposal) or walk (no deal). No deal scores 0."},
            {"role": "user", "content": f"Pool: {pool}. Your points each: {values}. "
             f"{starts}; {self.max_turns} turns left."},
        ]

    def _error(self, agent: str, reply: str, move: re.Match[str] | None) -> str | None:
        """Why ``reply`` (not ``walk``, not a valid ``accept``) is invalid; ``None`` if it is
        a valid proposal."""
        if reply == "accept":
            return f"no proposal from {_other(agent).title()} to accept"
        if move is None:
            return FORMAT
        if any(int(move[i + 1]) > count for i, count in enumerate(self.pool)):
            return f"you can keep at most {describe(self.pool)}"
        return None

    def _deal(self, acceptor: str) -> MultiStepResult:
        assert self._offer is not None
        proposer, kept = self._offer
        deal = {proposer: kept, acceptor: rest(self.pool, kept)}
        for agent in AGENTS:
            other = _other(agent)
            opener = f"{acceptor.title()} accepts. " if agent == proposer else ""
            self.table.tell(agent, f"{opener}Deal: you get {describe(deal[agent])} "
                            f"({points(self.values[agent], deal[agent])} points), "
                            f"{other.title()} gets {describe(deal[other])}.")
        return self._end(invalid=None, truncated=False, deal=deal)

    def _end(self, *, invalid: dict[str, bool] | None, truncated: bool,
             deal: dict[str, Items] | None = None) -> MultiStepResult:
        value = {a: points(self.values[a], deal[a]) if deal else 0 for a in AGENTS}
        infos = {a: {"invalid_action": (invalid or {}).get(a, False),
                     "outcome": "success" if deal else "failure",
                     "deal": dict(deal) if deal else None, "value": value[a]}
                 for a in AGENTS}
        return self.table.result(rewards={a: value[a] / TOTAL for a in AGENTS}, infos=infos,
                                 ended=not truncated, truncated=truncated)


def _other(agent: str) -> str:
    return AGENTS[1 - AGENTS.index(agent)]
