"""Sokoban levels for ``sokoban-v0``: the grid model, the BFS solver and reverse-play generation.

Owns everything about a level that is independent of an episode: the XSB-style map characters,
:class:`Level` (walls, targets, dead cells, moves and rendering), :func:`solve` (a shortest
solution by breadth-first search over (player, boxes) states), :func:`parse_map` (a given map),
and the pieces :class:`turnrl.envs.builtin.sokoban.Sokoban` draws random levels from
(:func:`random_room`, :func:`with_targets`, :func:`reverse_play`). The env itself (turns,
rewards, the oracle cache, validation) lives in :mod:`turnrl.envs.builtin.sokoban`.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable

MOVE_NAMES = ("up", "down", "left", "right")  # the solver tries moves in this order

# Map characters: the static map keeps '#', '_' and '.'; boxes and the player are drawn on it.
WALL, FLOOR, TARGET = "#", "_", "."
BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET = "$", "*", "@", "+"

State = tuple[int, frozenset[int]]  # (player cell, box cells); a cell is row * width + col


class Level:
    """The static part of a level: walls and targets on a rectangular grid enclosed by walls.

    Cells are ``row * width + col`` ints. ``corners`` are the non-target floor cells with a wall
    above or below and a wall left or right (a box there can never move again); ``dead`` are
    the floor cells from which no push sequence can bring a box to any target (a superset of
    ``corners``, used only to prune the solver).
    """

    def __init__(self, rows: Iterable[str]) -> None:
        self.rows = tuple(rows)
        self.width = len(self.rows[0])
        text = "".join(self.rows)
        self.walls = frozenset(i for i, ch in enumerate(text) if ch == WALL)
        self.targets = frozenset(i for i, ch in enumerate(text) if ch == TARGET)
        self.floor = frozenset(i for i, ch in enumerate(text) if ch != WALL)
        self.offsets = dict(zip(MOVE_NAMES, (-self.width, self.width, -1, 1), strict=True))
        self.corners = frozenset(
            cell
            for cell in self.floor - self.targets
            if (cell - self.width in self.walls or cell + self.width in self.walls)
            and (cell - 1 in self.walls or cell + 1 in self.walls)
        )
        self.dead = self.floor - self._live_cells()

    def _live_cells(self) -> set[int]:
        """Cells from which a box can be pushed to some target (reverse pushes from targets)."""
        live = set(self.targets)
        queue = deque(self.targets)
        while queue:
            cell = queue.popleft()
            for offset in self.offsets.values():
                # a box at cell - offset, pushed by a player at cell - 2 * offset, reaches cell
                before = cell - offset
                if before in self.floor and before - offset in self.floor and before not in live:
                    live.add(before)
                    queue.append(before)
        return live

    def render(self, player: int, boxes: frozenset[int]) -> str:
        chars = list("".join(self.rows))
        for cell in boxes:
            chars[cell] = BOX_ON_TARGET if cell in self.targets else BOX
        chars[player] = PLAYER_ON_TARGET if player in self.targets else PLAYER
        return "\n".join(
            "".join(chars[start : start + self.width])
            for start in range(0, len(chars), self.width)
        )

    def move(self, player: int, boxes: frozenset[int], name: str) -> tuple[int, frozenset[int]]:
        """The state after one move: walk, push one box, or stay (blocked)."""
        offset = self.offsets[name]
        ahead = player + offset
        if ahead in self.walls:
            return player, boxes
        if ahead in boxes:
            beyond = ahead + offset
            if beyond in self.walls or beyond in boxes:
                return player, boxes
            return ahead, (boxes - {ahead}) | {beyond}
        return ahead, boxes

    def walk_distances(self, player: int, boxes: frozenset[int]) -> dict[int, int]:
        """BFS distance from ``player`` to every floor cell it reaches without pushing."""
        distances = {player: 0}
        queue = deque([player])
        while queue:
            cell = queue.popleft()
            for offset in self.offsets.values():
                nxt = cell + offset
                if nxt in self.floor and nxt not in boxes and nxt not in distances:
                    distances[nxt] = distances[cell] + 1
                    queue.append(nxt)
        return distances

    def solved_by_one_push(self, player: int, boxes: frozenset[int]) -> bool:
        """Whether a single push (after any walk) puts the last off-target box on a target."""
        off_target = boxes - self.targets
        if len(off_target) != 1:
            return False
        (box,) = off_target
        reachable = self.walk_distances(player, boxes)
        return any(
            box + offset in self.targets and box + offset not in boxes and box - offset in reachable
            for offset in self.offsets.values()
        )


def solve(level: Level, player: int, boxes: frozenset[int]) -> list[str] | None:
    """A shortest solution (fewest moves) from ``(player, boxes)``, or ``None`` if there is none.

    Breadth-first search over (player, boxes), moves tried up, down, left, right (so the
    result is deterministic); pushes onto dead cells (``Level.dead``) are pruned.
    """
    start: State = (player, boxes)
    if boxes == level.targets:
        return []
    parents: dict[State, tuple[State, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        here, box_cells = state
        for name, offset in level.offsets.items():
            ahead = here + offset
            if ahead in level.walls:
                continue
            if ahead in box_cells:
                beyond = ahead + offset
                if beyond in level.walls or beyond in box_cells or beyond in level.dead:
                    continue
                nxt: State = (ahead, (box_cells - {ahead}) | {beyond})
            else:
                nxt = (ahead, box_cells)
            if nxt in parents:
                continue
            parents[nxt] = (state, name)
            if nxt[1] == level.targets:
                return _path_to(parents, nxt)
            queue.append(nxt)
    return None


def _path_to(parents: dict[State, tuple[State, str] | None], state: State) -> list[str]:
    moves = []
    link = parents[state]
    while link is not None:
        state, name = link
        moves.append(name)
        link = parents[state]
    return moves[::-1]


def random_room(rng: random.Random, side: int, wall_prob: float) -> list[str]:
    """A ``side`` x ``side`` interior in a wall border; interior walls drawn with ``wall_prob``,
    then every floor cell outside the largest connected floor area walled up."""
    width = side + 2
    floor = {
        row * width + col
        for row in range(1, side + 1)
        for col in range(1, side + 1)
        if rng.random() >= wall_prob
    }
    best: set[int] = set()
    unseen = set(floor)
    for cell in sorted(floor):  # row-major order: ties go to the first area found
        if cell not in unseen:
            continue
        area, queue = {cell}, deque([cell])
        while queue:
            here = queue.popleft()
            for nxt in (here - width, here + width, here - 1, here + 1):
                if nxt in unseen and nxt not in area:
                    area.add(nxt)
                    queue.append(nxt)
        unseen -= area
        if len(area) > len(best):
            best = area
    return [
        "".join(FLOOR if row * width + col in best else WALL for col in range(width))
        for row in range(width)
    ]


def with_targets(rows: list[str], targets: list[int]) -> Level:
    chars = list("".join(rows))
    for cell in targets:
        chars[cell] = TARGET
    width = len(rows[0])
    return Level("".join(chars[start : start + width]) for start in range(0, len(chars), width))


def reverse_play(
    rng: random.Random, level: Level, pulls: int, budget: int
) -> tuple[int, frozenset[int], int]:
    """Start with every box on a target and pull boxes off them ``pulls`` times.

    The player starts on a random non-target floor cell. Each pull walks the player (shortest
    path, boxes block) to a cell next to a box and steps away from it, dragging the box one
    cell; after the pulls the player walks to a random reachable cell. Reversed, these moves
    are a forward solution; a pull or final walk that would make the plan longer than
    ``budget`` moves is not taken. Returns (player, boxes, plan_moves).
    """
    boxes = level.targets
    player = rng.choice(sorted(level.floor - boxes))
    plan_moves = 0
    for _ in range(pulls):
        distances = level.walk_distances(player, boxes)
        options = [
            (box, offset, distances[box + offset] + 1)
            for box in sorted(boxes)
            for offset in level.offsets.values()
            if box + offset in distances
            and box + 2 * offset in level.floor
            and box + 2 * offset not in boxes
            and plan_moves + distances[box + offset] + 1 <= budget
        ]
        if not options:
            break
        box, offset, cost = rng.choice(options)
        boxes = (boxes - {box}) | {box + offset}
        player = box + 2 * offset
        plan_moves += cost
    distances = level.walk_distances(player, boxes)
    ends = sorted(cell for cell, steps in distances.items() if plan_moves + steps <= budget)
    end = rng.choice(ends)
    return end, boxes, plan_moves + distances[end]


def parse_map(lines: list[str] | str) -> tuple[Level, int, frozenset[int]]:
    """``["#####", "#@$.#", "#####"]`` (or joined by newlines) -> (level, player, boxes).

    Characters: ``#`` wall, ``_`` (or a space) floor, ``.`` target, ``$`` box, ``*`` box on a
    target, ``@`` player, ``+`` player on a target. Rows have equal length, the border is all
    walls, there is one player, as many boxes as targets (at least one), and some box is off
    its target.
    """
    rows = lines.split("\n") if isinstance(lines, str) else list(lines)
    rows = [row.replace(" ", FLOOR) for row in rows]
    text = "".join(rows)
    players = text.count(PLAYER) + text.count(PLAYER_ON_TARGET)
    boxes_count = text.count(BOX) + text.count(BOX_ON_TARGET)
    targets_count = text.count(TARGET) + text.count(BOX_ON_TARGET) + text.count(PLAYER_ON_TARGET)
    border = rows[0] + rows[-1] + "".join(row[0] + row[-1] for row in rows) if rows else ""
    if (
        not rows
        or not rows[0]
        or any(len(row) != len(rows[0]) for row in rows)
        or set(text) - set("#_.$*@+")
        or set(border) != {WALL}
        or players != 1
        or boxes_count != targets_count
        or text.count(BOX) == 0
    ):
        raise ValueError(
            "sokoban: a map is equal-length rows enclosed by '#' walls, of '_' floor, '.' target, "
            "'$' box, '*' box on target, '@' player or '+' player on target: one player, as many "
            f"boxes as targets and at least one box off target, got {rows!r}"
        )
    static = text.replace(BOX_ON_TARGET, TARGET).replace(PLAYER_ON_TARGET, TARGET)
    static = static.replace(BOX, FLOOR).replace(PLAYER, FLOOR)
    width = len(rows[0])
    level = Level(static[start : start + width] for start in range(0, len(static), width))
    player = next(i for i, ch in enumerate(text) if ch in (PLAYER, PLAYER_ON_TARGET))
    boxes = frozenset(i for i, ch in enumerate(text) if ch in (BOX, BOX_ON_TARGET))
    return level, player, boxes
