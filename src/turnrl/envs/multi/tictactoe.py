"""``tictactoe-v0``: tic-tac-toe for two agents, ``x`` (moves first) and ``o``, as text.

Each agent sees the board after the other's move, with the empty squares numbered, and
replies with a square's number::

    user:      Tic-tac-toe. You are X; O is the other player. Reply with the number of an
               empty square.
               1|2|3
               4|5|6
               7|8|9
               Your move.
    assistant: 5
    ...
    user:      O played 1.
               O|2|3
               4|X|6
               7|8|9
               Your move.

A reply that is not an empty square's number is an invalid action: the agent is told why
and keeps its turn; its ``max_invalid``-th invalid reply forfeits the game. Rewards at the
end: +1 for a win, -1 for a loss (a forfeit included), 0 for a draw (zero-sum, reward range
(-1, 1)); ``infos[agent]["outcome"]`` says ``win``, ``loss`` or ``draw``.

The oracle plays perfect minimax, choosing among equally good moves by a hash of the seed and
the board (so it varies over seeds but a replay is exact); it never loses. Scripted
opponents for evaluation are the oracle (``oracle_policy``) and random legal moves
(``sample_action``). Kwargs: ``max_invalid`` (default 2) and ``max_turns`` (default 13: nine
moves and up to four invalid replies); a game still open after ``max_turns`` steps is
truncated with rewards 0 and no outcome.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import replace
from typing import Any

from turnrl.envs.multi.protocol import MultiStepResult
from turnrl.envs.multi.turns import TurnTable, TurnTableEnv
from turnrl.envs.protocol import EnvSpec
from turnrl.types import Message

AGENTS = ("x", "o")
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8),
         (2, 4, 6))
DEFAULT_MAX_INVALID = 2
DEFAULT_MAX_TURNS = 13


def winner(board: str) -> str | None:
    """``"x"`` or ``"o"`` when that mark holds a line of ``board`` (nine characters of
    ``x``, ``o`` and ``.``), else ``None``."""
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


@functools.cache
def minimax(board: str, mark: str) -> int:
    """The game's value for ``mark``, who is to move on ``board``, under perfect play:
    +1 a win, 0 a draw, -1 a loss."""
    won = winner(board)
    if won is not None:
        return 1 if won == mark else -1
    if "." not in board:
        return 0
    other = "o" if mark == "x" else "x"
    return max(-minimax(board[:i] + mark + board[i + 1:], other)
               for i, cell in enumerate(board) if cell == ".")


def best_moves(board: str, mark: str) -> list[int]:
    """The squares (0-8) where ``mark`` keeps the best value it can get on ``board``."""
    other = "o" if mark == "x" else "x"
    values = {i: -minimax(board[:i] + mark + board[i + 1:], other)
              for i, cell in enumerate(board) if cell == "."}
    best = max(values.values())
    return [i for i, value in values.items() if value == best]


def render(board: str) -> str:
    """The board as three lines: marks as ``X``/``O``, empty squares as their number."""
    cells = [str(i + 1) if c == "." else c.upper() for i, c in enumerate(board)]
    return "\n".join("|".join(cells[row * 3:row * 3 + 3]) for row in range(3))


class TicTacToe(TurnTableEnv):
    """Tic-tac-toe for the agents ``x`` and ``o`` (see the module docstring)."""

    spec: EnvSpec

    def __init__(self, *, max_invalid: int = DEFAULT_MAX_INVALID,
                 max_turns: int = DEFAULT_MAX_TURNS) -> None:
        for name, value in (("max_invalid", max_invalid), ("max_turns", max_turns)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"tictactoe-v0: {name}={value!r} must be an int >= 1")
        self.max_invalid = max_invalid
        self.spec = replace(SPEC, max_turns=max_turns,
                            kwargs={"max_invalid": max_invalid, "max_turns": max_turns})
        self.table = TurnTable(AGENTS)
        self.board = "." * 9
        self.seed: int | None = None
        self.invalid = dict.fromkeys(AGENTS, 0)
        self.steps = 0

    # ------------------------------------------------------------------ the contract
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> dict[str, Any]:
        self.seed = seed
        self.board = "." * 9
        self.invalid = dict.fromkeys(AGENTS, 0)
        self.steps = 0
        rules = ("Tic-tac-toe. You are {me}; {other} is the other player. Reply with the "
                 "number of an empty square.")
        opening: dict[str, list[Message]] = {
            "x": [{"role": "user", "content": rules.format(me="X", other="O") +
                   f"\n{render(self.board)}\nYour move."}],
            "o": [{"role": "user", "content": rules.format(me="O", other="X") +
                   " X moves first."}]}
        self.table.start(opening, first="x")
        return {"seed": seed}

    def step(self, action: str) -> MultiStepResult:
        agent = self.table.current
        other = "o" if agent == "x" else "x"
        if not self.table.live:
            raise RuntimeError("tictactoe-v0: step() after the game ended; call reset()")
        self.table.reply(agent, action)
        self.steps += 1
        square = self._square(action)
        if square is None:
            result = self._invalid(agent, other, action)
            return result if not self.table.live or self.steps < self.spec.max_turns else \
                self._out_of_turns(result.infos)
        self.board = self.board[:square] + agent + self.board[square + 1:]
        won = winner(self.board)
        if won is not None or "." not in self.board:
            outcome = {agent: "win", other: "loss"} if won else dict.fromkeys(AGENTS, "draw")
            self.table.tell(other, f"{agent.upper()} played {square + 1}.\n"
                            f"{render(self.board)}")
            return self._end(outcome)
        self.table.tell(other, f"{agent.upper()} played {square + 1}.\n{render(self.board)}\n"
                        "Your move.")
        self.table.pass_turn(other)
        infos = {agent: {"invalid_action": False, "square": square + 1}}
        return self.table.result(infos=infos) if self.steps < self.spec.max_turns else \
            self._out_of_turns(infos)

    # ------------------------------------------------------------------ capabilities
    def oracle_action(self) -> str | None:
        """Perfect play for the agent to move (``None`` once the game is over)."""
        if not self.table.live:
            return None
        moves = best_moves(self.board, self.table.current)
        return str(random.Random(f"{self.seed}/{self.board}").choice(moves) + 1)

    def state_key(self) -> str:
        """The board (whose turn it is follows from it)."""
        return self.board

    def sample_action(self, rng: random.Random) -> str:
        """A random empty square."""
        return str(rng.choice(self.empty()) + 1)

    def empty(self) -> list[int]:
        """The empty squares, 0-based."""
        return [i for i, cell in enumerate(self.board) if cell == "."]

    # ------------------------------------------------------------------ internals
    def _square(self, action: str) -> int | None:
        match = re.fullmatch(r"\s*([1-9])\s*\.?\s*", action)
        if match is None:
            return None
        square = int(match[1]) - 1
        return square if self.board[square] == "." else None

    def _invalid(self, agent: str, other: str, action: str) -> MultiStepResult:
        self.invalid[agent] += 1
        if self.invalid[agent] >= self.max_invalid:
            self.table.tell(other, f"{agent.upper()} forfeits after {self.max_invalid} "
                            "invalid moves.")
            return self._end({agent: "loss", other: "win"}, invalid=agent)
        free = ", ".join(str(i + 1) for i in self.empty())
        match = re.fullmatch(r"\s*([1-9])\s*\.?\s*", action)
        why = f"square {match[1]} is taken" if match else "that is not a square's number"
        self.table.tell(agent, f"Invalid move: {why}. Empty squares: {free}. Your move.")
        return self.table.result(infos={agent: {"invalid_action": True}})

    def _out_of_turns(self, infos: dict[str, dict[str, Any]]) -> MultiStepResult:
        for agent in AGENTS:
            self.table.tell(agent, f"Out of turns after {self.steps} replies: no result.")
        return self.table.result(infos=infos, truncated=True)

    def _end(self, outcome: dict[str, str], invalid: str | None = None) -> MultiStepResult:
        score = {"win": 1.0, "loss": -1.0, "draw": 0.0}
        for agent, result in outcome.items():
            self.table.tell(agent, {"win": "You won.", "loss": "You lost.",
                                    "draw": "Draw."}[result])
        infos = {a: {"outcome": outcome[a], "invalid_action": a == invalid} for a in AGENTS}
        return self.table.result(rewards={a: score[outcome[a]] for a in AGENTS}, infos=infos,
                                 ended=True)


SPEC = EnvSpec(
    id="tictactoe-v0",
    entry_point=TicTacToe,
    max_turns=DEFAULT_MAX_TURNS,
    description="tic-tac-toe for two agents (x, o); reply with an empty square's number",
    reward_range=(-1.0, 1.0),
    has_oracle=True,
    has_state_key=True,
    agents=AGENTS,
    kwargs={"max_invalid": DEFAULT_MAX_INVALID},
    # demonstrations are the oracle's moves; a random move is legal play, worth showing
    demo_random_actions=True,
)
