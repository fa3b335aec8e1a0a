"""Shaping rewards: the reply's format, the cost of tool calls and of invalid replies, and
overlong replies."""

from __future__ import annotations

import re
from typing import Literal

from turnrl.rewards.answers import compile_pattern, last_assistant_message
from turnrl.rewards.registry import register_reward
from turnrl.types import Trajectory

__all__ = ["count_tool_calls", "format_reward", "invalid_cost", "length_penalty", "tool_cost"]


def _check_format(*, pattern: str, mode: str = "fullmatch") -> re.Pattern[str]:
    if mode not in ("fullmatch", "search"):
        raise ValueError(f"reward 'format': mode must be 'fullmatch' or 'search', got {mode!r}")
    return compile_pattern(pattern, "format")


@register_reward("format", check=_check_format)
def format_reward(trajectory: Trajectory, *, pattern: str,
                  mode: Literal["fullmatch", "search"] = "fullmatch") -> float:
    """1.0 if the last assistant message (stripped of surrounding whitespace) matches
    ``pattern``, else 0.0 (also when there is no assistant message).

    Args:
        pattern: a regex, compiled with ``re.DOTALL`` so ``.`` spans lines, e.g.
            ``"<think>.*</think>\\s*<answer>.*</answer>"``.
        mode: ``"fullmatch"`` (the whole message must match) or ``"search"`` (anywhere).
    """
    compiled = _check_format(pattern=pattern, mode=mode)
    text = last_assistant_message(trajectory)
    if text is None:
        return 0.0
    match = compiled.fullmatch(text.strip()) if mode == "fullmatch" else compiled.search(text)
    return float(match is not None)


def count_tool_calls(trajectory: Trajectory) -> int:
    """The episode's tool calls.

    * ``trajectory.counts.tool_calls``, which the runner always records: the sum over steps
      of the env's ``info["tool_calls"]``. ``Toolbox.call`` sets that to 1 for every tool it
      ran, **including** ``answer`` (the final answer is a call) and a call whose tool raised;
      replies without a valid call (no call, malformed, unknown tool, bad arguments) count 0.
    * Without counts (a trajectory built by hand), the number of ``tool``-role messages in the
      transcript. That is not the same count, and it cannot be made the same from the
      messages alone (which calls were valid depends on the env's toolbox): the built-in
      tool envs (``search-qa-v0``, ``python-v0``) show only an information tool that ran
      without error (``search``, ``python``) as a ``tool`` message, and the observation of
      ``answer`` and of a tool that raised as a ``user`` message, so this count leaves out
      the final answer and failed calls. Give a hand-built trajectory
      ``counts=EpisodeCounts(tool_calls=n)`` to get the runner's count.
    """
    if trajectory.counts is not None:
        return trajectory.counts.tool_calls
    return sum(message["role"] == "tool" for message in trajectory.messages)


def _check_tool_cost(*, cost: float = 0.1, free_calls: int = 0) -> None:
    if cost < 0 or free_calls < 0:
        raise ValueError(f"reward 'tool_cost': cost and free_calls must be >= 0, got "
                         f"cost={cost}, free_calls={free_calls}")


@register_reward("tool_cost", check=_check_tool_cost)
def tool_cost(trajectory: Trajectory, *, cost: float = 0.1, free_calls: int = 0) -> float:
    """A negative reward per tool call, for efficiency-aware training.

    r = −cost · max(0, n − free_calls), with n = :func:`count_tool_calls` (0.0, never −0.0,
    when nothing is charged).

    What counts as a call: in a runner's trajectory, every tool that ran, **the final**
    ``answer`` **call included** (and calls whose tool raised); so ``free_calls=1`` leaves
    the answer free and charges each search or computation, and an episode that answers
    at once costs nothing. A hand-built trajectory without ``counts`` is counted
    from its ``tool`` messages instead, which leave out the answer and failed calls (see
    :func:`count_tool_calls`): there ``free_calls=0`` already leaves the answer free.

    Args:
        cost: the price of one call (>= 0).
        free_calls: calls that cost nothing (>= 0).
    """
    _check_tool_cost(cost=cost, free_calls=free_calls)
    penalty = cost * max(0, count_tool_calls(trajectory) - free_calls)
    return -penalty if penalty else 0.0


def _check_invalid_cost(*, cost: float = 0.1) -> None:
    if cost < 0:
        raise ValueError(f"reward 'invalid_cost': cost must be >= 0, got cost={cost}")


@register_reward("invalid_cost", check=_check_invalid_cost)
def invalid_cost(trajectory: Trajectory, *, cost: float = 0.1) -> float:
    """A negative reward per reply the env could not parse (RAGEN's format penalty).

    r = −cost · n, with n = ``trajectory.counts.invalid_actions``: the turns whose step info
    said ``invalid_action`` (a malformed call, an unknown tool, bad arguments, an unparsable
    move), which the runner records for every episode (0.0, never −0.0, when n = 0).

    Outcome rewards alone let RL keep an episode that fumbled a call and then recovered as
    good as a clean one; this term tells them apart.

    Args:
        cost: the price of one invalid reply (>= 0).
    Raises:
        ValueError: ``trajectory.counts`` is None (a trajectory built by hand: which
            replies were invalid is the env's judgement, not the transcript's; give it
            ``counts=EpisodeCounts(invalid_actions=n)``).
    """
    _check_invalid_cost(cost=cost)
    if trajectory.counts is None:
        raise ValueError("reward 'invalid_cost' reads trajectory.counts.invalid_actions, "
                         "which the runner records; this trajectory has no counts (built "
                         "by hand?): give it counts=EpisodeCounts(invalid_actions=n)")
    penalty = cost * trajectory.counts.invalid_actions
    return -penalty if penalty else 0.0


def _check_length_penalty(*, budget: int, window: int, max_penalty: float = 1.0) -> None:
    if budget < 0 or window < 1 or max_penalty < 0:
        raise ValueError(f"reward 'length_penalty': need budget >= 0, window >= 1 and "
                         f"max_penalty >= 0, got budget={budget}, window={window}, "
                         f"max_penalty={max_penalty}")


@register_reward("length_penalty", check=_check_length_penalty)
def length_penalty(trajectory: Trajectory, *, budget: int, window: int,
                   max_penalty: float = 1.0) -> float:
    """A linear penalty on sampled tokens beyond a budget, saturating after ``window`` more.

    With L = the episode's sampled tokens (``trajectory.num_sampled_tokens``, every agent turn):

        r = −max_penalty · min(1, max(0, L − budget) / window)

    so r = 0 up to ``budget`` tokens, falls linearly, and is −max_penalty from
    ``budget + window`` on. This is DAPO's soft overlong punishment (Yu et al. 2025, eq. 13)
    with budget = L_max − L_cache and window = L_cache.

    Args:
        budget: tokens allowed without penalty (>= 0).
        window: tokens over the budget at which the penalty is full (>= 1).
        max_penalty: the largest penalty (>= 0).
    """
    _check_length_penalty(budget=budget, window=window, max_penalty=max_penalty)
    excess = max(0, trajectory.num_sampled_tokens - budget)
    return -max_penalty * min(1.0, excess / window)
