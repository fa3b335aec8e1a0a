"""What the adapter knows about particular Gymnasium envs, and how observations become text.

The tables are keyed by Gymnasium's env name (the id without namespace and version,
``"FrozenLake"``): action names (``ACTION_NAMES``), task texts (``TASKS``), reward bounds of
envs without a tabular model (``REWARD_RANGES``) and success rules (``SUCCESS_FNS``). The
rendering helpers turn observations into text (``strip_ansi_codes``, ``plain``) and into state
keys (``hashable``, for the observation spaces ``discrete`` accepts).
"""

from __future__ import annotations

import importlib
import numbers
import re
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

SuccessFn = Callable[[Any, float, bool, dict[str, Any]], bool]

# Per-env action names, by Gymnasium's env name (the id without namespace and version).
ACTION_NAMES: dict[str, tuple[str, ...]] = {
    "FrozenLake": ("left", "down", "right", "up"),
    "FrozenLake8x8": ("left", "down", "right", "up"),
    "Taxi": ("south", "north", "east", "west", "pickup", "dropoff"),
    "CliffWalking": ("up", "right", "down", "left"),
    "CliffWalkingSlippery": ("up", "right", "down", "left"),
    "Blackjack": ("stick", "hit"),
    "CartPole": ("left", "right"),
    "MountainCar": ("left", "coast", "right"),
}

_FROZENLAKE = (
    "Walk on a frozen lake from the start S to the goal G without falling into a hole H; F is "
    "frozen ice and your position is highlighted. Reaching G earns 1."
)
_CLIFF = (
    "Walk from the start (bottom left) to the goal T (bottom right) without stepping onto the "
    "cliff C; x marks you and o is safe ground. Each step costs 1; the cliff costs 100 and "
    "sends you back to the start."
)
TASKS: dict[str, str] = {
    "FrozenLake": _FROZENLAKE,
    "FrozenLake8x8": _FROZENLAKE,
    "Taxi": (
        "Drive the taxi to the passenger, pick them up and drop them off at their destination. "
        "R, G, Y and B are the four stands: the passenger's stand is blue, the destination "
        "magenta, and the taxi yellow (green with the passenger aboard); '|' is a wall. Each "
        "step costs 1, an illegal pickup or drop-off 10; the right drop-off earns 20."
    ),
    "CliffWalking": _CLIFF,
    "CliffWalkingSlippery": _CLIFF,
    "Blackjack": (
        "Play a hand of blackjack against the dealer: hit draws a card, stick stops. The "
        "observation is (your sum, the dealer's showing card, whether you hold a usable ace). "
        "A win earns 1, a loss costs 1."
    ),
    "CartPole": (
        "Keep a pole balanced on a cart by pushing the cart left or right; each step it stays "
        "up earns 1. The observation is (cart position, cart velocity, pole angle, pole "
        "angular velocity)."
    ),
    "MountainCar": (
        "Drive an underpowered car to the flag on the right hill by rocking back and forth to "
        "build momentum; each step costs 1. The observation is (position, velocity)."
    ),
}
SLIPPERY = " The ice is slippery: a move may go sideways."

# Reward bounds of envs without a tabular model P (those with one use the rewards in P).
REWARD_RANGES: dict[str, tuple[float, float]] = {
    "Blackjack": (-1.0, 1.5),
    "CartPole": (-1.0, 1.0),  # +1 a step; sutton_barto_reward=True: 0 a step, -1 on the fall
    "MountainCar": (-1.0, 0.0),
}


def _reached_goal(obs: Any, reward: float, terminated: bool, info: dict[str, Any]) -> bool:
    """Success is ending the episode (``terminated``; a time-limit cut is ``truncated``
    instead): the only terminal state is the goal, reached with a reward <= 0
    (CliffWalking -1, MountainCar -1, Acrobot 0), so ``positive_end`` never fires."""
    return terminated


def positive_end(obs: Any, reward: float, terminated: bool, info: dict[str, Any]) -> bool:
    """The default success rule: a terminal step with a positive reward."""
    return terminated and reward > 0


def _positive_reward(obs: Any, reward: float, terminated: bool, info: dict[str, Any]) -> bool:
    return reward > 0  # Blackjack: a won hand (it ends the episode)


SUCCESS_FNS: dict[str, SuccessFn] = {
    "CliffWalking": _reached_goal,
    "CliffWalkingSlippery": _reached_goal,
    "MountainCar": _reached_goal,
    "Acrobot": _reached_goal,
    "Blackjack": _positive_reward,
}


# -- per-env choices, with the caller's overrides -------------------------------------------------


def action_names(
    gym_id: str, name: str, names: Sequence[str] | None, n: int
) -> tuple[str, ...] | None:
    """The action names to use: ``names`` (checked), else ``ACTION_NAMES``, else None."""
    if names is None:
        known = ACTION_NAMES.get(name)
        return known if known is not None and len(known) == n else None
    given = tuple(names) if not isinstance(names, str) else ()
    lowered = [str(a).strip().lower() for a in given]
    if (
        len(given) != n
        or not all(isinstance(a, str) and a.strip() for a in given)
        or len(set(lowered)) != n
        or any(re.fullmatch(r"[+-]?\d+", a) for a in lowered)
    ):
        raise ValueError(
            f"gym:{gym_id}: action_names must be {n} distinct non-empty strings that are not "
            f"numbers (one per action of Discrete({n}), in order), got {names!r}"
        )
    return tuple(a.strip() for a in given)


def task_text(gym_id: str, name: str, instructions: str | None, deterministic: bool) -> str:
    """The task part of the system message: ``instructions``, else ``TASKS``, else generic."""
    if instructions is not None:
        return instructions
    task = TASKS.get(name, f"Play the Gymnasium environment {gym_id}.")
    if name.startswith("FrozenLake") and not deterministic:
        task += SLIPPERY
    return task


def reward_range(
    gym_id: str,
    name: str,
    given: tuple[float, float] | None,
    model_bounds: tuple[float, float] | None,
) -> tuple[float, float]:
    """``given`` (checked), else the bounds of the env's tabular model, else ``REWARD_RANGES``,
    else unbounded."""
    if given is not None:
        bounds = tuple(given) if isinstance(given, (tuple, list)) else ()
        if len(bounds) != 2 or not all(isinstance(b, numbers.Real) for b in bounds) or not (
            bounds[0] <= bounds[1]
        ):
            raise ValueError(f"gym:{gym_id}: reward_range must be (low, high) with low <= high, "
                             f"got {given!r}")
        return float(bounds[0]), float(bounds[1])
    if model_bounds is not None:
        return model_bounds
    return REWARD_RANGES.get(name, (-float("inf"), float("inf")))


# -- observations as text and as state keys -------------------------------------------------------


def render_modes(gym_spec: Any) -> list[str]:
    """The render modes a registered Gymnasium env declares (``[]`` if it cannot be loaded)."""
    creator = gym_spec.entry_point
    if isinstance(creator, str):
        module, _, attr = creator.partition(":")
        try:
            creator = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            return []  # gymnasium.make will report it
    return list(getattr(creator, "metadata", {}).get("render_modes", []))


def strip_ansi_codes(text: str) -> str:
    """``text`` without ANSI escape sequences (colours, highlights)."""
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)


def plain(obs: Any) -> Any:
    """numpy values as Python ones, floats rounded to 4 places (for text and keys)."""
    if isinstance(obs, np.ndarray):
        return plain(obs.tolist())
    if isinstance(obs, np.generic):
        return plain(obs.item())
    if isinstance(obs, tuple):
        return tuple(plain(x) for x in obs)
    if isinstance(obs, list):
        return [plain(x) for x in obs]
    if isinstance(obs, dict):
        return {k: plain(v) for k, v in obs.items()}
    if isinstance(obs, float) or (isinstance(obs, numbers.Real) and not isinstance(obs, int)):
        return round(float(obs), 4)
    return obs


def hashable(obs: Any) -> Hashable:
    """The observation as a hashable value: lists and dicts become tuples."""
    value = plain(obs)
    if isinstance(value, (list, tuple)):
        return tuple(hashable(x) for x in value)
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    return value


def discrete(space: Any) -> bool:
    """Whether observations of ``space`` make state keys: ``Discrete``, ``MultiDiscrete``,
    ``MultiBinary``, or a ``Tuple`` of those."""
    import gymnasium.spaces as spaces

    if isinstance(space, spaces.Tuple):
        return all(discrete(s) for s in space.spaces)
    return isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary))
