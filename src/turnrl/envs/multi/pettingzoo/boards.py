"""How each supported PettingZoo game is shown as text and how a reply becomes an action.

A :class:`Board` reads the board from PettingZoo's observation of an agent,
``observation["observation"]``: two planes from that agent's point of view (plane 0 its own
pieces, plane 1 the opponent's), so the same code renders for either seat. Moves are numbered
from 1 in the order the model sees them on the board; ``action(number)`` is PettingZoo's
action index and ``number(action)`` its inverse.

**Tic-tac-toe** (``tictactoe_v3``, shape ``(3, 3, 2)``): PettingZoo numbers squares column by
column (action ``3 * column + row``, ``0 3 6 / 1 4 7 / 2 5 8``) and its planes are
``squares.reshape(3, 3)``, so square (row ``r``, column ``c``) is ``planes[c, r]``. The text
numbers the empty squares 1-9 row by row from the top left, so number ``n`` is row
``(n - 1) // 3``, column ``(n - 1) % 3``, action ``3 * c + r``::

     X | 2 | 3
    ---+---+---
     4 | O | 6
    ---+---+---
     7 | 8 | 9

**Connect four** (``connect_four_v3``, shape ``(6, 7, 2)``): ``planes[r, c]`` is row ``r`` from
the top, column ``c``; action ``c`` drops a piece in column ``c``. The text shows the 6 rows
top to bottom, ``.`` for empty, the two pieces as letters, and the column numbers 1-7 below;
number ``n`` is action ``n - 1``::

    . . . . . . .
    . . . . . . .
    . . . . . . .
    . . . . . . .
    . . . O . . .
    . . X X . . .
    1 2 3 4 5 6 7

The first player (seat 0) plays ``X``, the second ``O``, in both games.
"""

from __future__ import annotations

from typing import Any, Protocol

MARKS = ("X", "O")  # by seat: the first player's pieces, the second's


class Board(Protocol):
    """What the adapter needs of a game: its rules, the board as text, and move numbers."""

    title: str  # "tic-tac-toe"
    move_word: str  # what a move number names: "square", "column"
    max_moves: int  # the most moves a game can last

    def rules(self, mark: str, other: str, max_invalid: int) -> str:
        """The opening message of the player of ``mark`` (its opponent plays ``other``)."""
        ...

    def render(self, planes: Any, mark: str, other: str) -> str:
        """The board of the observing agent's ``planes`` (own pieces ``mark``)."""
        ...

    def action(self, number: int) -> int:
        """PettingZoo's action index of move ``number`` (1-based, as shown)."""
        ...

    def number(self, action: int) -> int:
        """The move number shown for PettingZoo's ``action``."""
        ...


def _forfeit_rule(max_invalid: int) -> str:
    times = "an invalid reply" if max_invalid == 1 else f"{max_invalid} invalid replies"
    return (f"An invalid reply (not a number, or not a legal move) keeps your turn; after "
            f"{times} you forfeit the game.")


def _cell(planes: Any, row: int, column: int, mark: str, other: str) -> str | None:
    """The piece at ``planes[row, column]``: ``mark``, ``other`` or None."""
    if planes[row, column, 0]:
        return mark
    if planes[row, column, 1]:
        return other
    return None


class TicTacToeBoard:
    """``tictactoe_v3``: squares 1-9 row by row (see the module docstring)."""

    title = "tic-tac-toe"
    move_word = "square"
    max_moves = 9

    def rules(self, mark: str, other: str, max_invalid: int) -> str:
        return (f"You play tic-tac-toe as {mark} against {other}; {MARKS[0]} moves first. "
                "The board is 3x3 and its empty squares are numbered 1-9, row by row from the "
                "top left. On your turn, reply with the number of an empty square and nothing "
                f"else, e.g. 5. Three of your marks in a row, column or diagonal win. "
                f"{_forfeit_rule(max_invalid)}")

    def render(self, planes: Any, mark: str, other: str) -> str:
        rows = []
        for row in range(3):
            cells = [_cell(planes, column, row, mark, other) or str(3 * row + column + 1)
                     for column in range(3)]  # planes[column, row]: see the docstring
            rows.append(" " + " | ".join(cells))
        return "\n---+---+---\n".join(rows)

    def action(self, number: int) -> int:
        row, column = divmod(number - 1, 3)
        return 3 * column + row

    def number(self, action: int) -> int:
        column, row = divmod(action, 3)
        return 3 * row + column + 1


class ConnectFourBoard:
    """``connect_four_v3``: columns 1-7 (see the module docstring)."""

    title = "connect four"
    move_word = "column"
    max_moves = 42
    rows, columns = 6, 7

    def rules(self, mark: str, other: str, max_invalid: int) -> str:
        return (f"You play connect four as {mark} against {other}; {MARKS[0]} moves first. "
                "The board has 6 rows and 7 columns, numbered 1-7 at the bottom; '.' is "
                "empty. A piece dropped in a column falls to its lowest empty cell. On your "
                "turn, reply with the number of a column that is not full and nothing else, "
                "e.g. 4. Four of your pieces in a row, column or diagonal win. "
                f"{_forfeit_rule(max_invalid)}")

    def render(self, planes: Any, mark: str, other: str) -> str:
        lines = [" ".join(_cell(planes, row, column, mark, other) or "."
                          for column in range(self.columns)) for row in range(self.rows)]
        lines.append(" ".join(str(column + 1) for column in range(self.columns)))
        return "\n".join(lines)

    def action(self, number: int) -> int:
        return number - 1

    def number(self, action: int) -> int:
        return action + 1


BOARDS: dict[str, Board] = {
    "tictactoe_v3": TicTacToeBoard(),
    "connect_four_v3": ConnectFourBoard(),
}
"""The board of each supported game, by PettingZoo's module name (``ids.SUPPORTED_GAMES``)."""
