"""``sokoban-v0``: push every box onto a target in a small, always-solvable warehouse.

Tests multi-step planning where moves cannot be undone (a box can be pushed, never pulled).
The level is a compact text grid in XSB notation with ``_`` for floor, so every character is
visible to a tiny character-level model: ``#`` wall, ``_`` floor, ``.`` target, ``$`` box,
``*`` box on a target, ``@`` player, ``+`` player on a target; rows are joined by ``\\n``::

    system:    Push every box $ onto a target . (you are @, # is a wall).
               Reply up, down, left or right.
    user:      ######
               #____#
               ##___#
               #_@$_#
               #___.#
               ######
    assistant: right
    user:      ######                    reward 0.0
               #____#
               ##___#
               #__@$#
               #___.#
               ######
    assistant: up
    ...
    assistant: down
    user:      Solved!                   reward 1.0, terminated

Each seed draws a square room: interior side uniform in ``[min_size, max_size]`` (default 4
to 5, so 6x6 or 7x7 characters) inside a border of walls, each interior cell a wall with
probability ``wall_prob`` (default 0.1; only the largest connected floor area is kept).
Levels are made by *reverse play*: boxes start on ``num_boxes`` (default 1, at most 3)
random targets and the player pulls them backwards ``2`` to ``max_pulls`` (default 4) times,
walking between pulls, so the forward replay of those moves solves the level. A level is
redrawn when that plan is longer than ``max_turns`` (default 20) moves, when it is already
solved, or when a single push solves it, so every level needs at least two pushes and its
solution fits the turn budget.

Moves: ``up``/``down``/``left``/``right`` (after strip and lower-casing). Walking into a wall,
or pushing a box into a wall or another box, leaves the player in place (a valid turn). Any
other reply is answered with ``Invalid action. ...`` and the grid, reward 0, and uses up the
turn.

Rewards and ends: reward 1.0 on the turn every box is on a target (terminated, ``Solved!``).
Pushing a box into a corner that is not a target (walls on one vertical and one horizontal
side) is a *deadlock*, which the env detects and ends the episode (terminated, reward 0,
``Deadlock! A box is stuck in a corner.``); other unsolvable states are not detected and run
on until ``max_turns``, when the episode is truncated. With ``box_reward > 0`` each push also
earns ``+box_reward`` for a box pushed onto a target and ``-box_reward`` for one pushed off
(potential-based shaping: the shaping of a whole episode is ``box_reward`` times the change in
boxes on targets); it is off by default, so the reward is the outcome only. ``box_reward`` is
at most 0.5, and ``spec.reward_range`` is ``(-0.5, 1.5)``, which bounds every setting (the
registry gives every instance the registered range).

The oracle is a breadth-first search over (player, boxes) states: ``oracle_action()`` is the
first move of a shortest solution (fewest moves), cached along that solution so following
the oracle costs one search per episode; ``privileged_info()`` spells that solution out.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from turnrl.envs.protocol import EnvSpec
from turnrl.types import Message, StepResult

MAX_BOX_REWARD = 0.5
SPEC = EnvSpec(
    id="sokoban-v0",
    entry_point="turnrl.envs.builtin.sokoban:Sokoban",
    max_turns=20,
    description="Push boxes $ onto targets . in a small ASCII warehouse; reply up/down/left/right.",
    reward_range=(-MAX_BOX_REWARD, 1.0 + MAX_BOX_REWARD),  # 0.0 or 1.0 without shaping
    has_oracle=True,
    has_state_key=True,
    has_privileged_info=True,
)

INSTRUCTION = (
    "Push every box $ onto a target . (you are @, # is a wall). Reply up, down, left or right."
)
INVALID = "Invalid action. Reply up, down, left or right.\n"
SOLVED_TEXT = "Solved!"
DEADLOCK_TEXT = "Deadlock! A box is stuck in a corner."
MOVE_NAMES = ("up", "down", "left", "right")  # the solver tries moves in this order
MAX_LEVEL_ATTEMPTS = 1_000
MAX_SIDE = 8  # interior side: keeps the grid compact and the BFS oracle fast
MAX_BOXES = 3

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


class Sokoban:
    """Sokoban on a reverse-play-generated level per seed, rendered as a compact text grid."""

    def __init__(
        self,
        *,
        min_size: int = 4,
        max_size: int = 5,
        num_boxes: int = 1,
        wall_prob: float = 0.1,
        max_pulls: int = 4,
        box_reward: float = 0.0,
        max_turns: int = 20,
    ) -> None:
        _validate(min_size, max_size, num_boxes, wall_prob, max_pulls, box_reward, max_turns)
        self.min_size, self.max_size, self.num_boxes = min_size, max_size, num_boxes
        self.wall_prob, self.max_pulls, self.box_reward = wall_prob, max_pulls, box_reward
        self.max_turns = max_turns
        kwargs = {
            "min_size": min_size,
            "max_size": max_size,
            "num_boxes": num_boxes,
            "wall_prob": wall_prob,
            "max_pulls": max_pulls,
            "box_reward": box_reward,
            "max_turns": max_turns,
        }
        self.spec = replace(SPEC, max_turns=max_turns, kwargs=kwargs)
        self._rng: random.Random | None = None
        # a one-push placeholder until the first reset
        self._level, self._player, self._boxes = parse_map(["#####", "#@$.#", "#####"])
        self._next_move: dict[State, str | None] = {}  # oracle cache for the current level
        self._turn = 0
        self._done = True

    # -- the Env protocol -------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        """New episode. ``options={"map": ["#####", "#@$.#", "#####"]}`` plays a given level.

        ``info``: ``size`` (interior side; rows - 2 for a given map), ``num_boxes`` and
        ``plan_moves``, the length of the reverse-play plan (an upper bound on the shortest
        solution; ``None`` for a given map).
        """
        options = dict(options or {})
        custom_map = options.pop("map", None)
        if options:
            raise ValueError(f"sokoban: unknown reset option(s) {sorted(options)}; only 'map'")
        if seed is not None or self._rng is None:
            self._rng = random.Random(seed)
        plan_moves: int | None = None
        if custom_map is None:
            self._level, self._player, self._boxes, plan_moves = self._random_level(self._rng)
        else:
            self._level, self._player, self._boxes = parse_map(custom_map)
        self._next_move = {}
        self._turn, self._done = 0, False
        info = {
            "size": len(self._level.rows) - 2,
            "num_boxes": len(self._boxes),
            "plan_moves": plan_moves,
        }
        return [
            {"role": "system", "content": INSTRUCTION},
            {"role": "user", "content": self.render()},
        ], info

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RuntimeError("sokoban: the episode is over; call reset() first")
        self._turn += 1
        move = action.strip().lower()
        invalid = move not in MOVE_NAMES
        pushed_to: int | None = None
        on_target_before = len(self._boxes & self._level.targets)
        if not invalid:
            player, boxes = self._level.move(self._player, self._boxes, move)
            if boxes != self._boxes:
                (pushed_to,) = boxes - self._boxes
            self._player, self._boxes = player, boxes
        success = self._boxes == self._level.targets
        deadlock = not success and pushed_to in self._level.corners
        terminated = success or deadlock
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        if terminated:
            text = SOLVED_TEXT if success else DEADLOCK_TEXT
        else:
            text = (INVALID if invalid else "") + self.render()
        shaping = self.box_reward * (len(self._boxes & self._level.targets) - on_target_before)
        return StepResult(
            observation=[{"role": "user", "content": text}],
            reward=(1.0 if success else 0.0) + shaping,
            terminated=terminated,
            truncated=truncated,
            info={"success": success, "invalid_action": invalid, "deadlock": deadlock},
        )

    def close(self) -> None:
        pass

    # -- optional capabilities --------------------------------------------------------------

    def oracle_action(self) -> str | None:
        """First move of a shortest solution (fewest moves); ``None`` once the episode is over
        or when no solution exists (after a bad push)."""
        if self._done:
            return None
        plan = self._solution()
        return plan[0] if plan else None

    def privileged_info(self) -> str:
        """A shortest solution from the current state (what a critic may know, not the agent):
        e.g. ``"shortest solution: up, right (2 moves)"``, or ``"no solution"``."""
        plan = self._solution()
        if plan is None:
            return "no solution"
        return f"shortest solution: {', '.join(plan)} ({len(plan)} move{'s' * (len(plan) != 1)})"

    def state_key(self) -> tuple[tuple[str, ...], int, tuple[int, ...]]:
        """(static map, player cell, sorted box cells): identical positions share a key."""
        return self._level.rows, self._player, tuple(sorted(self._boxes))

    def sample_action(self, rng: random.Random) -> str:
        """A uniformly random move from the caller's ``rng`` (imperfect SFT demonstrations)."""
        return rng.choice(MOVE_NAMES)

    # -- helpers ------------------------------------------------------------------------------

    def render(self) -> str:
        """The grid with boxes and the player drawn on the static map."""
        return self._level.render(self._player, self._boxes)

    def _solution(self) -> list[str] | None:
        """A shortest solution from the current state, searched once and cached along it."""
        state: State = (self._player, self._boxes)
        if state not in self._next_move:
            plan = solve(self._level, *state)
            if plan is None or not plan:
                self._next_move[state] = None
            else:
                for name in plan:
                    self._next_move[state] = name
                    state = self._level.move(*state, name)
                self._next_move[state] = None  # solved
            state = (self._player, self._boxes)
        plan = []
        while (name := self._next_move.get(state)) is not None:
            plan.append(name)
            state = self._level.move(*state, name)
        if state[1] != self._level.targets:
            return None
        return plan

    def _random_level(self, rng: random.Random) -> tuple[Level, int, frozenset[int], int]:
        for _ in range(MAX_LEVEL_ATTEMPTS):
            rows = _random_room(rng, rng.randint(self.min_size, self.max_size), self.wall_prob)
            floor = [cell for cell, ch in enumerate("".join(rows)) if ch == FLOOR]
            if len(floor) < 2 * self.num_boxes + 2:
                continue
            level = _with_targets(rows, rng.sample(floor, self.num_boxes))
            pulls = rng.randint(2, self.max_pulls)
            player, boxes, plan_moves = _reverse_play(rng, level, pulls, self.max_turns)
            if boxes != level.targets and not level.solved_by_one_push(player, boxes):
                return level, player, boxes, plan_moves
        raise RuntimeError(
            f"sokoban: no level needing >= 2 pushes and <= max_turns={self.max_turns} moves after "
            f"{MAX_LEVEL_ATTEMPTS} draws; lower wall_prob or num_boxes, or raise max_turns"
        )


def _random_room(rng: random.Random, side: int, wall_prob: float) -> list[str]:
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


def _with_targets(rows: list[str], targets: list[int]) -> Level:
    chars = list("".join(rows))
    for cell in targets:
        chars[cell] = TARGET
    width = len(rows[0])
    return Level("".join(chars[start : start + width]) for start in range(0, len(chars), width))


def _reverse_play(
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


def _validate(
    min_size: int,
    max_size: int,
    num_boxes: int,
    wall_prob: float,
    max_pulls: int,
    box_reward: float,
    max_turns: int,
) -> None:
    if not 3 <= min_size <= max_size <= MAX_SIDE:
        raise ValueError(
            f"sokoban: need 3 <= min_size <= max_size <= {MAX_SIDE} (interior side), "
            f"got min_size={min_size}, max_size={max_size}"
        )
    if not 1 <= num_boxes <= MAX_BOXES:
        raise ValueError(
            f"sokoban: num_boxes must be 1 to {MAX_BOXES} (the BFS oracle grows fast with more), "
            f"got {num_boxes}"
        )
    if not 0.0 <= wall_prob <= 0.5:
        raise ValueError(f"sokoban: wall_prob must be in [0, 0.5], got {wall_prob}")
    if not 2 <= max_pulls <= 100:
        raise ValueError(f"sokoban: max_pulls must be in [2, 100], got {max_pulls}")
    if not 0.0 <= box_reward <= MAX_BOX_REWARD:
        raise ValueError(
            f"sokoban: box_reward must be in [0, {MAX_BOX_REWARD}] (0 turns shaping off), "
            f"got {box_reward}"
        )
    if max_turns < 4:
        raise ValueError(
            f"sokoban: max_turns must be >= 4 (a level needs at least two pushes and some "
            f"walking), got {max_turns}"
        )
