"""Tool use over episodes: what the runner counts per step (:func:`count_tool_use`) and its
summary (:func:`tool_metrics`: ``rollout/`` and ``eval/`` tool metrics, docs/metrics.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from turnrl.types import EpisodeCounts


def count_tool_use(counts: EpisodeCounts, step_info: Mapping[str, Any]) -> None:
    """Add one step's tool use (the :class:`~turnrl.envs.tools.Toolbox` keys of its info)
    to ``counts``: a call that ran counts under its tool's name; an attempt is a call that ran
    or one that failed before running for any reason but the reply having no call at all."""
    ran = int(step_info.get("tool_calls", 0))
    error = bool(step_info.get("tool_error", False))
    counts.tool_calls += ran
    counts.tool_errors += error
    if ran or (error and step_info.get("tool_error_kind") != "no_call"):
        counts.tool_attempts += 1
    if ran and not error:
        counts.valid_tool_calls += 1
    name = step_info.get("tool_name")
    if ran and isinstance(name, str):
        counts.tool_uses[name] = counts.tool_uses.get(name, 0) + ran


def tool_metrics(counts: Sequence[EpisodeCounts]) -> dict[str, float]:
    """Tool use over episodes: ``tool_call_rate`` (episodes with at least one call that ran),
    ``tool_calls`` (calls that ran, per episode), ``valid_call_rate`` (Σ valid calls /
    Σ attempts; 0 without an attempt), ``invalid_actions`` (per episode) and
    ``tool_calls/<name>`` (calls of each tool, per episode)."""
    if not counts:
        return {}
    n = len(counts)
    attempts = sum(c.tool_attempts for c in counts)
    names = sorted({name for c in counts for name in c.tool_uses})
    return {
        "tool_call_rate": sum(c.tool_calls > 0 for c in counts) / n,
        "tool_calls": sum(c.tool_calls for c in counts) / n,
        "valid_call_rate": sum(c.valid_tool_calls for c in counts) / attempts if attempts
        else 0.0,
        "invalid_actions": sum(c.invalid_actions for c in counts) / n,
        **{f"tool_calls/{name}": sum(c.tool_uses.get(name, 0) for c in counts) / n
           for name in names},
    }
