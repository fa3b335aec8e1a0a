"""``PettingZooEnv``: a PettingZoo classic AEC game behind turnrl's multi-agent contract.

``make("pz:tictactoe_v3")`` wraps PettingZoo's AEC env ``classic/tictactoe_v3``
(``ids.make_aec``); ``spec.id`` is ``pz/tictactoe-v3`` and ``make`` accepts that form too.
The agents keep PettingZoo's names (``player_1``/``player_2`` in tic-tac-toe,
``player_0``/``player_1`` in connect four); the first plays ``X``, the second ``O``.
A transcript of tic-tac-toe, as ``player_2`` sees it::

    system:    You play tic-tac-toe as O against X; X moves first. ... reply with the number
               of an empty square and nothing else, e.g. 5. ...
    user:      X played 5.
                1 | 2 | 3
               ---+---+---
                4 | X | 6
               ---+---+---
                7 | 8 | 9
               Your move (O). Legal moves: 1, 2, 3, 4, 6, 7, 8, 9.
    assistant: 1

* **Observations**: the rules (a system message) at reset; at each of its turns the
  opponent's last move, the board and the legal moves; at the end the last move, the final
  board and the result. The board is read from PettingZoo's ``observe(agent)`` (see
  ``boards`` for the rendering and the move numbering).
* **Replies**: a move number as shown (1-based; surrounding spaces and a final ``.`` are
  allowed). Anything else (not a number, a full square or column) never reaches PettingZoo:
  the agent is told what was wrong and keeps its turn, ``infos[agent]["invalid_action"]`` is
  true, and its ``max_invalid``-th invalid reply of the episode forfeits the game (-1 for
  it, +1 for the opponent, ``infos[...]["forfeit"]``).
* **Rewards**: PettingZoo's ``env.rewards`` after each move (+1 win, -1 loss, 0 draw, else
  0). The episode ends when PettingZoo terminates or truncates the game;
  ``infos[agent]["outcome"]`` is then ``"win"``, ``"loss"`` or ``"draw"`` (none if truncated).
  ``spec.max_turns`` is the game's longest length plus ``2 * max_invalid``.
* **Seeding**: ``reset(seed=...)`` passes the seed to PettingZoo (these games are
  deterministic). No oracle; ``sample_action(rng)`` is a random legal move and
  ``legal_moves()`` lists them.
"""

from __future__ import annotations

import random
import re
from typing import Any

from turnrl.envs.multi.pettingzoo.boards import BOARDS, MARKS
from turnrl.envs.multi.pettingzoo.ids import (
    PZ_NAMESPACE,
    PZ_PREFIX,
    make_aec,
    resolve_pz_id,
    turnrl_env_id,
)
from turnrl.envs.multi.protocol import MultiStepResult
from turnrl.envs.multi.turns import TurnTable, TurnTableEnv
from turnrl.envs.protocol import EnvSpec

ADAPTER_OPTIONS = ("max_invalid",)
_NUMBER = re.compile(r"\s*([+-]?\d+)\s*\.?\s*")


class PettingZooEnv(TurnTableEnv):
    """A PettingZoo classic game of two players as a turnrl ``MultiAgentEnv`` (see the module
    docstring). ``game`` is PettingZoo's module name (``"tictactoe_v3"``) or a ``pz:`` id."""

    def __init__(self, game: str, *, max_invalid: int = 2) -> None:
        env_id = game if game.startswith((PZ_PREFIX, PZ_NAMESPACE)) else PZ_PREFIX + game
        self.game = resolve_pz_id(env_id)
        if isinstance(max_invalid, bool) or not isinstance(max_invalid, int) or max_invalid < 1:
            raise ValueError(f"{env_id}: max_invalid must be an int >= 1, got {max_invalid!r}")
        self.max_invalid = max_invalid
        self.board = BOARDS[self.game]
        self._env: Any = make_aec(env_id, self.game)
        agents = tuple(self._env.possible_agents)
        if len(agents) != len(MARKS):
            raise ValueError(f"{env_id}: expected a game of two players, PettingZoo has {agents}")
        self.marks = dict(zip(agents, MARKS, strict=True))
        self.spec = EnvSpec(
            id=turnrl_env_id(self.game),
            entry_point="turnrl.envs.multi.pettingzoo.adapter:PettingZooEnv",
            max_turns=self.board.max_moves + 2 * max_invalid,
            description=(f"PettingZoo {self.game}: {self.board.title} for two players "
                         f"({agents[0]} plays X, {agents[1]} plays O); reply with a "
                         f"{self.board.move_word} number"),
            reward_range=(-1.0, 1.0),
            kwargs={"max_invalid": max_invalid},
            agents=agents,
        )
        self.table = TurnTable(agents)
        self._invalid = dict.fromkeys(agents, 0)
        self._returns = dict.fromkeys(agents, 0.0)

    # -- the MultiAgentEnv contract -----------------------------------------------------------

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> dict[str, Any]:
        """New game: ``seed`` and ``options`` go to PettingZoo's ``reset``."""
        self._env.reset(seed=seed, options=options)
        first = str(self._env.agent_selection)
        self.table.start({agent: [{"role": "system", "content": self.board.rules(
            mark, self._other_mark(agent), self.max_invalid)}]
            for agent, mark in self.marks.items()}, first=first)
        self.table.tell(first, f"You move first.\n\n{self._turn_text(first)}")
        self._invalid = dict.fromkeys(self.spec.agents, 0)
        self._returns = dict.fromkeys(self.spec.agents, 0.0)
        return {"game": self.game, "marks": dict(self.marks), "first": first}

    def step(self, action: str) -> MultiStepResult:
        if not self.table.live:
            raise RuntimeError(f"{self.spec.id}: the episode is over; call reset() first")
        agent = self.table.current
        self.table.reply(agent, action)
        number, problem = self._parse(action)
        if number is None:
            return self._invalid_reply(agent, problem)
        self._env.step(self.board.action(number))
        rewards = {a: float(self._env.rewards.get(a, 0.0)) for a in self.spec.agents}
        for a, reward in rewards.items():
            self._returns[a] += reward
        move = f"{self.marks[agent]} played {number}."
        infos: dict[str, dict[str, Any]] = {agent: {"invalid_action": False, "move": number}}
        terminated = any(self._env.terminations.values())
        if terminated or any(self._env.truncations.values()):
            for a in self.spec.agents:
                result = "stopped"
                if terminated:
                    outcome = infos.setdefault(a, {})["outcome"] = self._outcome(a)
                    result = {"win": "you win", "loss": "you lose", "draw": "a draw"}[outcome]
                mover = f"You played {number}." if a == agent else move
                self.table.tell(a, f"{mover}\n\n{self._board(a)}\n\nGame over: {result}.")
            return self.table.result(rewards=rewards, infos=infos, ended=terminated,
                                     truncated=not terminated)
        following = str(self._env.agent_selection)
        self.table.tell(following, f"{move}\n\n{self._turn_text(following)}")
        self.table.pass_turn(following)
        return self.table.result(rewards=rewards, infos=infos)

    def close(self) -> None:
        self._env.close()

    # -- helpers ------------------------------------------------------------------------------

    @property
    def pettingzoo_env(self) -> Any:
        """The wrapped PettingZoo AEC env."""
        return self._env

    def legal_moves(self) -> list[int]:
        """The move numbers (as shown to the model) the agent to move may play; ``[]`` once
        the episode is over."""
        return self._moves(self.table.current) if self.table.live else []

    def sample_action(self, rng: random.Random) -> str:
        """A uniformly random legal move of the agent to move, from the caller's ``rng``."""
        moves = self.legal_moves()
        if not moves:
            raise RuntimeError(f"{self.spec.id}: no legal move: the episode is over")
        return str(rng.choice(moves))

    def _other_mark(self, agent: str) -> str:
        return next(m for a, m in self.marks.items() if a != agent)

    def _opponent(self, agent: str) -> str:
        return next(a for a in self.spec.agents if a != agent)

    def _board(self, agent: str) -> str:
        planes = self._env.observe(agent)["observation"]
        return self.board.render(planes, self.marks[agent], self._other_mark(agent))

    def _turn_text(self, agent: str) -> str:
        moves = ", ".join(str(n) for n in self._moves(agent))
        return f"{self._board(agent)}\n\nYour move ({self.marks[agent]}). Legal moves: {moves}."

    def _moves(self, agent: str) -> list[int]:
        """The legal move numbers of ``agent`` (none unless it is its turn in PettingZoo)."""
        mask = self._env.observe(agent)["action_mask"]
        return sorted(self.board.number(i) for i, legal in enumerate(mask) if legal)

    def _parse(self, action: str) -> tuple[int | None, str]:
        """The move number of a reply, else None and what is wrong with it."""
        match = _NUMBER.fullmatch(action) if isinstance(action, str) else None
        word = self.board.move_word
        if match is None:
            shown = str(action) if len(str(action)) <= 40 else str(action)[:37] + "..."
            return None, f"{shown!r} is not a {word} number"
        number = int(match[1])
        if number in self.legal_moves():
            return number, ""
        size = len(self._env.observe(self.table.current)["action_mask"])
        if not 1 <= number <= size:
            return None, f"there is no {word} {number} (they are numbered 1-{size})"
        return None, f"{word} {number} is {'taken' if word == 'square' else 'full'}"

    def _invalid_reply(self, agent: str, problem: str) -> MultiStepResult:
        self._invalid[agent] += 1
        left = self.max_invalid - self._invalid[agent]
        info: dict[str, Any] = {"invalid_action": True, "move": None}
        if left > 0:
            moves = ", ".join(str(n) for n in self.legal_moves())
            warning = "1 more invalid reply" if left == 1 else f"{left} more invalid replies"
            self.table.tell(agent, f"Invalid reply: {problem}. It is still your move; legal "
                            f"moves: {moves}. {warning} and you forfeit.")
            return self.table.result(infos={agent: info})
        opponent = self._opponent(agent)
        times = f"{self._invalid[agent]} invalid repl{'y' if self._invalid[agent] == 1 else 'ies'}"
        self.table.tell(agent, f"Invalid reply: {problem}. After {times} you forfeit: you "
                        "lose.")
        self.table.tell(opponent, f"{self.marks[agent]} forfeited after {times}: you win.")
        rewards = {agent: -1.0, opponent: 1.0}
        for a, reward in rewards.items():
            self._returns[a] += reward
        infos = {agent: {**info, "outcome": "loss", "forfeit": True},
                 opponent: {"outcome": "win"}}
        return self.table.result(rewards=rewards, infos=infos, ended=True)

    def _outcome(self, agent: str) -> str:
        total = self._returns[agent]
        return "win" if total > 0 else "loss" if total < 0 else "draw"


# -- building one from an id ---------------------------------------------------------------------


def make_pz_env(env_id: str, **kwargs: Any) -> PettingZooEnv:
    """``make("pz:<game>", **kwargs)`` (also ``"pz/<turnrl id>"``): the adapted game."""
    game = resolve_pz_id(env_id)
    unknown = sorted(set(kwargs) - set(ADAPTER_OPTIONS))
    if unknown:
        raise TypeError(f"make({env_id!r}) got unknown keyword argument(s) "
                        f"{', '.join(unknown)}; PettingZoo games accept: "
                        f"{', '.join(ADAPTER_OPTIONS)}")
    return PettingZooEnv(game, **kwargs)


def pz_env_spec(env_id: str) -> EnvSpec:
    """``spec("pz:<game>")``: the spec of the adapted game with default options."""
    env = make_pz_env(env_id)
    env.close()
    return env.spec
