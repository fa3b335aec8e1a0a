"""``frozenlake-v0``: walk across a frozen lake to the goal without falling into a hole.

Tests multi-turn planning from a fully observed, compact text grid (Gymnasium's FrozenLake,
non-slippery). Every character is a token for a tiny character-level model, so the grid is
bare: ``A`` agent, ``G`` goal, ``H`` hole, ``.`` frozen ice, rows joined by ``\\n``::

    system:    Reach G and avoid H. Reply up, down, left or right.
    user:      A...
               .H..
               ...H
               H..G
    assistant: right
    user:      .A..                      reward 0.0
               ...
    ...
    assistant: down
    user:      Goal!                     reward 1.0, terminated

Each seed draws a map: side uniform in ``[min_size, max_size]``, each other cell a hole with
probability ``hole_prob``, start top-left and goal bottom-right (random distinct cells with
``random_positions=True``); maps are redrawn until the goal is reachable in at most
``max_turns`` moves. A move into the edge leaves the agent in place (a valid turn). A reply
that is not ``up``/``down``/``left``/``right`` (after strip and lower-casing) is answered
with ``Invalid action. ...`` and the grid, reward 0, and uses up the turn. After
``max_turns`` turns without reaching G or a hole the episode is truncated.

Dense reward (opt-in, ``progress_reward=c > 0``): each turn also earns ``c`` × the drop in the
shortest-path distance to G (+c a step closer, −c a step away, 0 bumping an edge or falling
in a hole), potential-based shaping that keeps the optimal policy; 0 (the default) is the
sparse outcome-only reward.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import replace
from typing import Any

from turnrl.envs.protocol import EnvSpec
from turnrl.types import Message, StepResult

SPEC = EnvSpec(
    id="frozenlake-v0",
    entry_point="turnrl.envs.builtin.frozenlake:FrozenLake",
    max_turns=10,
    description="Walk an ASCII grid from A to G avoiding holes H; reply up/down/left/right.",
    reward_range=(0.0, 1.0),
    has_oracle=True,
    has_state_key=True,
    has_privileged_info=True,
)

INSTRUCTION = "Reach G and avoid H. Reply up, down, left or right."
INVALID = "Invalid action. Reply up, down, left or right.\n"
GOAL_TEXT = "Goal!"
HOLE_TEXT = "You fell in a hole."
# Row/column deltas; this order is also the oracle's tie-break.
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
MAX_MAP_ATTEMPTS = 10_000

Cell = tuple[int, int]


class FrozenLake:
    """Non-slippery FrozenLake on a random map per seed, rendered as a compact text grid."""

    def __init__(
        self,
        *,
        min_size: int = 4,
        max_size: int = 5,
        hole_prob: float = 0.2,
        random_positions: bool = False,
        max_turns: int = 10,
        progress_reward: float = 0.0,
    ) -> None:
        _validate(min_size, max_size, hole_prob, random_positions, max_turns)
        if isinstance(progress_reward, bool) or not 0.0 <= progress_reward <= 1.0:
            raise ValueError(f"frozenlake: progress_reward must be in [0, 1], got "
                             f"{progress_reward!r}")
        self.min_size, self.max_size, self.hole_prob = min_size, max_size, hole_prob
        self.random_positions, self.max_turns = random_positions, max_turns
        self.progress_reward = float(progress_reward)
        kwargs = {
            "min_size": min_size,
            "max_size": max_size,
            "hole_prob": hole_prob,
            "random_positions": random_positions,
            "max_turns": max_turns,
            "progress_reward": self.progress_reward,
        }
        self.spec = replace(SPEC, max_turns=max_turns, kwargs=kwargs,
                            reward_range=(-self.progress_reward, 1.0 + self.progress_reward))
        self._rng: random.Random | None = None
        self._rows: tuple[str, ...] = ()  # the map without the agent: '.', 'H', 'G'
        self._agent: Cell = (0, 0)
        self._turn = 0
        self._done = True

    # -- the Env protocol -------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        """New episode. ``options={"map": ["A..", ".H.", "..G"]}`` plays a given map."""
        options = dict(options or {})
        custom_map = options.pop("map", None)
        if options:
            raise ValueError(f"frozenlake: unknown reset option(s) {sorted(options)}; only 'map'")
        if seed is not None or self._rng is None:
            self._rng = random.Random(seed)
        if custom_map is None:
            self._rows, self._agent = self._random_map(self._rng)
        else:
            self._rows, self._agent = parse_map(custom_map)
        self._turn, self._done = 0, False
        distances = self._distances_to_goal()
        info = {"size": len(self._rows), "shortest_path": distances.get(self._agent)}
        return [
            {"role": "system", "content": INSTRUCTION},
            {"role": "user", "content": self.render()},
        ], info

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RuntimeError("frozenlake: the episode is over; call reset() first")
        self._turn += 1
        move = action.strip().lower()
        invalid = move not in MOVES
        before = self._agent
        if not invalid:
            self._agent = self._moved(self._agent, move)
        cell = self._cell(self._agent)
        progress = self._progress(before) if self.progress_reward else 0.0
        success = cell == "G"
        terminated = cell in "GH"
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        if terminated:
            text = GOAL_TEXT if success else HOLE_TEXT
        else:
            text = (INVALID if invalid else "") + self.render()
        return StepResult(
            observation=[{"role": "user", "content": text}],
            reward=(1.0 if success else 0.0) + progress,
            terminated=terminated,
            truncated=truncated,
            info={"success": success, "invalid_action": invalid},
        )

    def close(self) -> None:
        pass

    # -- optional capabilities --------------------------------------------------------------

    def oracle_action(self) -> str | None:
        """First move of a shortest path to G (ties broken up, down, left, right)."""
        if self._done:
            return None
        distances = self._distances_to_goal()
        here = distances.get(self._agent)
        if here is None:
            return None  # a custom map with no path
        for move in MOVES:
            if distances.get(self._moved(self._agent, move)) == here - 1:
                return move
        return None

    def privileged_info(self) -> str:
        """A shortest plan from the agent's cell to G (what a critic may know, not the agent):
        e.g. ``"shortest path: down, right (2 moves)"``, or ``"no path to G"``."""
        distances = self._distances_to_goal()
        cell, plan = self._agent, []
        if distances.get(cell) is None:
            return "no path to G"
        while distances[cell] > 0:
            move = next(m for m in MOVES
                        if distances.get(self._moved(cell, m)) == distances[cell] - 1)
            plan.append(move)
            cell = self._moved(cell, move)
        return f"shortest path: {', '.join(plan)} ({len(plan)} move{'s' * (len(plan) != 1)})"

    def state_key(self) -> tuple[tuple[str, ...], Cell]:
        return self._rows, self._agent

    def sample_action(self, rng: random.Random) -> str:
        """A uniformly random move from the caller's ``rng`` (imperfect SFT demonstrations)."""
        return rng.choice(list(MOVES))

    # -- helpers ------------------------------------------------------------------------------

    def render(self) -> str:
        """The grid with the agent drawn as ``A``."""
        row, col = self._agent
        rows = list(self._rows)
        rows[row] = rows[row][:col] + "A" + rows[row][col + 1 :]
        return "\n".join(rows)

    def _cell(self, cell: Cell) -> str:
        return self._rows[cell[0]][cell[1]]

    def _moved(self, cell: Cell, move: str) -> Cell:
        row, col = cell[0] + MOVES[move][0], cell[1] + MOVES[move][1]
        if 0 <= row < len(self._rows) and 0 <= col < len(self._rows[0]):
            return row, col
        return cell  # bumped into the edge: stay

    def _progress(self, before: Cell) -> float:
        """The dense reward of a move from ``before``: ``progress_reward`` × the drop in the
        shortest-path distance to G (potential-based shaping, Ng et al. 1999, with
        Φ = −distance: it leaves the optimal policy unchanged); 0 for a fall into a hole."""
        distances = self._distances_to_goal()
        if self._cell(self._agent) == "H" or before not in distances:
            return 0.0
        return self.progress_reward * (distances[before] - distances[self._agent])

    def _distances_to_goal(self) -> dict[Cell, int]:
        return shortest_distances(self._rows)

    def _random_map(self, rng: random.Random) -> tuple[tuple[str, ...], Cell]:
        for _ in range(MAX_MAP_ATTEMPTS):
            size = rng.randint(self.min_size, self.max_size)
            cells = [(r, c) for r in range(size) for c in range(size)]
            if self.random_positions:
                start, goal = rng.sample(cells, 2)
            else:
                start, goal = cells[0], cells[-1]
            grid = [
                ["H" if rng.random() < self.hole_prob else "." for _ in range(size)]
                for _ in range(size)
            ]
            grid[start[0]][start[1]] = "."
            grid[goal[0]][goal[1]] = "G"
            rows = tuple("".join(row) for row in grid)
            distance = shortest_distances(rows).get(start)
            if distance is not None and distance <= self.max_turns:
                return rows, start
        raise RuntimeError(
            f"frozenlake: no map solvable within max_turns={self.max_turns} after "
            f"{MAX_MAP_ATTEMPTS} draws; lower hole_prob or raise max_turns"
        )


def shortest_distances(rows: tuple[str, ...]) -> dict[Cell, int]:
    """BFS distance (in moves) from every reachable non-hole cell to the goal ``G``."""
    height, width = len(rows), len(rows[0])
    goal = next((r, c) for r in range(height) for c in range(width) if rows[r][c] == "G")
    distances = {goal: 0}
    queue = deque([goal])
    while queue:
        row, col = queue.popleft()
        for d_row, d_col in MOVES.values():
            nxt = (row + d_row, col + d_col)
            if (
                0 <= nxt[0] < height
                and 0 <= nxt[1] < width
                and rows[nxt[0]][nxt[1]] != "H"
                and nxt not in distances
            ):
                distances[nxt] = distances[(row, col)] + 1
                queue.append(nxt)
    return distances


def parse_map(lines: list[str] | str) -> tuple[tuple[str, ...], Cell]:
    """``["A..", ".H.", "..G"]`` (or the same joined by newlines) -> (rows without A, agent)."""
    rows = lines.split("\n") if isinstance(lines, str) else list(lines)
    text = "".join(rows)
    if (
        not rows
        or any(len(row) != len(rows[0]) for row in rows)
        or set(text) - set("AGH.")
        or text.count("A") != 1
        or text.count("G") != 1
    ):
        raise ValueError(
            "frozenlake: a map is equal-length rows of 'A' (agent, once), 'G' (goal, once), "
            f"'H' (hole) and '.' (ice), got {rows!r}"
        )
    agent = divmod(text.index("A"), len(rows[0]))
    return tuple(row.replace("A", ".") for row in rows), agent


def _validate(
    min_size: int, max_size: int, hole_prob: float, random_positions: bool, max_turns: int
) -> None:
    if not 2 <= min_size <= max_size:
        raise ValueError(f"frozenlake: need 2 <= min_size <= max_size, got {min_size}, {max_size}")
    if not 0.0 <= hole_prob < 1.0:
        raise ValueError(f"frozenlake: hole_prob must be in [0, 1), got {hole_prob}")
    if max_turns < 1:
        raise ValueError(f"frozenlake: max_turns must be >= 1, got {max_turns}")
    corner_to_corner = 2 * (max_size - 1)
    if not random_positions and max_turns < corner_to_corner:
        raise ValueError(
            f"frozenlake: max_turns={max_turns} is too short for {max_size}x{max_size} maps "
            f"(start to goal takes at least {corner_to_corner} moves); raise max_turns to "
            f">= {corner_to_corner} or lower max_size"
        )
