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

This module owns the env (the spec, episodes, rewards, the oracle cache and argument checks);
the level model, the solver and the reverse-play pieces live in
:mod:`turnrl.envs.builtin.sokoban_levels`.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from turnrl.envs.builtin.sokoban_levels import (
    FLOOR,
    MOVE_NAMES,
    Level,
    State,
    parse_map,
    random_room,
    reverse_play,
    solve,
    with_targets,
)
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
MAX_LEVEL_ATTEMPTS = 1_000
MAX_SIDE = 8  # interior side: keeps the grid compact and the BFS oracle fast
MAX_BOXES = 3


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
            rows = random_room(rng, rng.randint(self.min_size, self.max_size), self.wall_prob)
            floor = [cell for cell, ch in enumerate("".join(rows)) if ch == FLOOR]
            if len(floor) < 2 * self.num_boxes + 2:
                continue
            level = with_targets(rows, rng.sample(floor, self.num_boxes))
            pulls = rng.randint(2, self.max_pulls)
            player, boxes, plan_moves = reverse_play(rng, level, pulls, self.max_turns)
            if boxes != level.targets and not level.solved_by_one_push(player, boxes):
                return level, player, boxes, plan_moves
        raise RuntimeError(
            f"sokoban: no level needing >= 2 pushes and <= max_turns={self.max_turns} moves after "
            f"{MAX_LEVEL_ATTEMPTS} draws; lower wall_prob or num_boxes, or raise max_turns"
        )


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
