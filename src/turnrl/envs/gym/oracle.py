"""The oracle of adapted Gymnasium envs: value iteration on a deterministic tabular model.

Gymnasium's toy-text envs expose their model as ``env.unwrapped.P[state][action] = [(prob,
next_state, reward, terminated), ...]``. When every transition has probability 1 (non-slippery
FrozenLake, Taxi, CliffWalking) :func:`oracle_for` gives a :class:`TabularOracle` whose
:meth:`~TabularOracle.best_action` is the greedy action of value iteration (discount
``ORACLE_DISCOUNT``, so shorter routes to a reward win; ties go to the lowest action).
"""

from __future__ import annotations

from typing import Any

import numpy as np

ORACLE_DISCOUNT = 0.99  # value iteration's discount: shorter routes to a reward win ties

# P[state][action] = [(prob, next_state, reward, terminated), ...]
Transitions = dict[int, dict[int, list[tuple[Any, ...]]]]


def transitions(env: Any) -> Transitions | None:
    """The tabular model ``P`` of a toy-text env, when it has one that covers every state."""
    table = getattr(env.unwrapped, "P", None)
    space = env.observation_space
    if not isinstance(table, dict) or not hasattr(space, "n") or len(table) != int(space.n):
        return None
    return table


def is_deterministic(model: Transitions | None) -> bool:
    """Whether ``model`` exists and each of its transitions has a single, certain outcome."""
    return model is not None and all(
        len(outcomes) == 1 and float(outcomes[0][0]) == 1.0
        for by_action in model.values() for outcomes in by_action.values()
    )


def reward_bounds(model: Transitions | None) -> tuple[float, float] | None:
    """``(min, max)`` of the rewards in ``model`` (None without one)."""
    if model is None:
        return None
    rewards = [float(t[2]) for by_action in model.values()
               for outcomes in by_action.values() for t in outcomes]
    return min(rewards), max(rewards)


def oracle_for(env: Any, model: Transitions | None, actions: list[int]) -> TabularOracle | None:
    """The oracle of ``env`` when its model is deterministic, else None.

    Taxi's fickle passenger changes destination outside ``P``: no oracle then.
    """
    fickle = getattr(env.unwrapped, "fickle_passenger", False)
    if model is None or not is_deterministic(model) or fickle:
        return None
    return TabularOracle(model, actions)


class TabularOracle:
    """Greedy actions of value iteration on a deterministic model (Q-values computed once,
    on the first :meth:`best_action`)."""

    def __init__(self, model: Transitions, actions: list[int]) -> None:
        states = sorted(model)
        rows = [[model[s][a][0] for a in actions] for s in states]
        # (states, actions) arrays
        self.next_state = np.array([[int(t[1]) for t in row] for row in rows])
        self.reward = np.array([[float(t[2]) for t in row] for row in rows])
        self.terminated = np.array([[bool(t[3]) for t in row] for row in rows])
        self.actions = actions
        self._q_values: np.ndarray | None = None

    def best_action(self, state: int) -> int:
        """The Gymnasium action with the highest Q-value in ``state``."""
        if self._q_values is None:
            self._q_values = value_iteration(self.next_state, self.reward, self.terminated)
        return self.actions[int(np.argmax(self._q_values[int(state)]))]


def value_iteration(
    next_state: np.ndarray, reward: np.ndarray, terminated: np.ndarray
) -> np.ndarray:
    """Q-values (states, actions) of a deterministic model, discounted by ``ORACLE_DISCOUNT``."""
    values = np.zeros(next_state.shape[0])
    for _ in range(100_000):
        q_values = reward + ORACLE_DISCOUNT * np.where(terminated, 0.0, values[next_state])
        new_values = q_values.max(axis=1)
        if np.max(np.abs(new_values - values)) < 1e-12:
            break
        values = new_values
    return q_values
