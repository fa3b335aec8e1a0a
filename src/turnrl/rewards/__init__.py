"""Rewards: functions ``fn(trajectory, **kwargs) -> float`` registered by name, and their
weighted combination.

Built-ins (see :mod:`turnrl.rewards.builtin`): ``exact_match``, ``f1``, ``math_verify``,
``format``, ``tool_cost``, ``invalid_cost``, ``length_penalty``, ``grounded``. How the final
answer and the reference are found is described in :mod:`turnrl.rewards.answers`. A config
names rewards and weights; :func:`combine` turns that list into a :class:`CombinedReward`::

    reward = combine([{"name": "exact_match", "weight": 1.0},
                      {"name": "tool_cost", "weight": 1.0, "kwargs": {"cost": 0.05}}])
    total, parts = reward.score(trajectory)
"""

from turnrl.rewards import builtin  # registers the built-ins
from turnrl.rewards.answers import (
    final_answer,
    normalize_answer,
    reference_answers,
)
from turnrl.rewards.builtin.maths import math_verify
from turnrl.rewards.builtin.shaping import (
    count_tool_calls,
    format_reward,
    invalid_cost,
    length_penalty,
    tool_cost,
)
from turnrl.rewards.builtin.text import evidence_texts, exact_match, f1, grounded, token_f1
from turnrl.rewards.registry import (
    REWARDS,
    CombinedReward,
    RewardFn,
    RewardSpecError,
    RewardTerm,
    combine,
    load_reward,
    register_reward,
)

__all__ = [
    "REWARDS",
    "CombinedReward",
    "RewardFn",
    "RewardSpecError",
    "RewardTerm",
    "builtin",
    "combine",
    "count_tool_calls",
    "evidence_texts",
    "exact_match",
    "f1",
    "final_answer",
    "format_reward",
    "grounded",
    "invalid_cost",
    "length_penalty",
    "load_reward",
    "math_verify",
    "normalize_answer",
    "reference_answers",
    "register_reward",
    "token_f1",
    "tool_cost",
]
