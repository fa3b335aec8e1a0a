"""Collapse alarms: rules over each RL step's metrics that name a failure mode.

Each rule reads one metric of the step and fires when it crosses its threshold for
``patience`` steps in a row:

- ``alarm/entropy_collapse``: ``loss/entropy`` (mean per-token policy entropy, nats) below
  ``min_entropy``: the policy has stopped exploring;
- ``alarm/reward_std_zero``: ``reward/frac_zero_std_groups`` at least ``max_zero_std_groups``:
  (nearly) every group's rewards are equal, so group-relative estimators get no signal;
- ``alarm/kl_blowup``: ``rollout/kl_ref`` above ``max_kl`` (only with a reference model);
- ``alarm/grad_norm_spike``: ``loss/grad_norm`` above ``grad_spike`` times the median of the
  previous (up to 10) steps, and above the clipping norm ``train.max_grad_norm`` (below it
  the step is no larger than an ordinary clipped one: a solved task's near-zero gradients
  make tiny values look like spikes);
- ``alarm/length_collapse``: ``rollout/sampled_tokens`` below ``min_length_ratio`` times its
  value at the first RL step: replies are shrinking towards nothing;
- ``alarm/repeated_outputs``: ``rollout/repeated_outputs`` (episodes whose sampled tokens
  repeat another episode's of the same group) at least ``max_repeated``.
- ``alarm/context_overflow``: ``rollout/context_overflow_rate`` (episodes that ended because
  their next turn did not fit ``rollout.max_context_tokens``; a prompt longer than the
  context leaves an episode without a single turn) at least ``max_context_overflow``. On
  such steps the rules about sampled tokens and their rewards (entropy, length, repeated
  outputs, equal rewards) are not read: episodes without turns have no tokens to measure,
  are all alike and all score 0, and the cause is the context, not a collapse.

A metric a step does not report (no reference, no groups of two or more), or a non-finite
value (a skipped update), leaves its rule as it was. ``reward_std_zero`` and
``repeated_outputs`` also describe a solved task (every reply right, and the same): they
warn, but never stop or roll back a run (``ACTIONABLE``).
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Rule:
    """``alarm/<name>`` fires when ``metric`` is ``op`` ``threshold`` (``relative_to``: the
    threshold scales the metric's first value, or the median of its recent values)."""

    name: str
    metric: str
    op: Literal["<", ">", ">="]
    threshold: float
    relative_to: Literal["none", "first", "recent_median"] = "none"
    floor: float = 0.0  # a relative limit is at least this
    absent: float | None = None  # the value of a step that does not report the metric
    suspended_by: str | None = None  # a rule that, past its threshold, explains this one
    hint: str = ""  # how to fix what the alarm reports

    def limit(self, first: float | None, recent: list[float]) -> float | None:
        if self.relative_to == "first":
            return None if first is None else self.threshold * first
        if self.relative_to == "recent_median":
            return (max(self.threshold * statistics.median(recent), self.floor)
                    if len(recent) >= 3 else None)
        return self.threshold

    def crossed(self, value: float, limit: float) -> bool:
        return {"<": value < limit, ">": value > limit, ">=": value >= limit}[self.op]


def default_rules(*, min_entropy: float = 0.01, max_zero_std_groups: float = 1.0,
                  max_kl: float = 1.0, grad_spike: float = 10.0, min_length_ratio: float = 0.2,
                  max_repeated: float = 1.0, max_grad_norm: float = 0.0,
                  max_context_overflow: float = 0.5) -> list[Rule]:
    """The rule set of the module docstring with the given thresholds."""
    overflow = "context_overflow"
    return [
        Rule("entropy_collapse", "loss/entropy", "<", min_entropy, suspended_by=overflow),
        Rule("reward_std_zero", "reward/frac_zero_std_groups", ">=", max_zero_std_groups,
             suspended_by=overflow),
        Rule("kl_blowup", "rollout/kl_ref", ">", max_kl),
        Rule("grad_norm_spike", "loss/grad_norm", ">", grad_spike, "recent_median",
             floor=max_grad_norm),
        Rule("length_collapse", "rollout/sampled_tokens", "<", min_length_ratio, "first",
             suspended_by=overflow),
        Rule("repeated_outputs", "rollout/repeated_outputs", ">=", max_repeated,
             suspended_by=overflow),
        Rule(overflow, "rollout/context_overflow_rate", ">=", max_context_overflow, absent=0.0,
             hint="episodes ran out of context: raise rollout.max_context_tokens, shorten "
                  "the prompts, or play fewer turns (env max_turns) or shorter ones "
                  "(rollout.max_new_tokens)"),
    ]


# alarms that alarms.on_alarm=stop|rollback acts on; the others only warn
ACTIONABLE = {"alarm/entropy_collapse": True, "alarm/reward_std_zero": False,
              "alarm/kl_blowup": True, "alarm/grad_norm_spike": True,
              "alarm/length_collapse": True, "alarm/repeated_outputs": False,
              "alarm/context_overflow": True}


@dataclass
class AlarmMonitor:
    """Feeds each step's metrics through the rules; keeps the streaks and histories."""

    rules: list[Rule]
    patience: int = 2
    streaks: dict[str, int] = field(default_factory=dict)
    first: dict[str, float] = field(default_factory=dict)
    recent: dict[str, deque[float]] = field(default_factory=dict)

    def check(self, metrics: dict[str, float]) -> tuple[list[str], dict[str, float]]:
        """The alarms that fire at this step (``alarm/<name>``) and the ``alarm/*`` metrics
        (1 firing, 0 quiet) of every rule whose metric the step reports."""
        fired: list[str] = []
        flags: dict[str, float] = {}
        suspended = {rule.name for rule in self.rules if self._over(rule, metrics)}
        for rule in self.rules:
            reported = rule.metric in metrics
            value = metrics.get(rule.metric, rule.absent)
            if value is None or not math.isfinite(value):
                continue
            if rule.suspended_by in suspended:  # explained by another alarm: left as it was
                flags[f"alarm/{rule.name}"] = 0.0
                continue
            history = self.recent.setdefault(rule.metric, deque(maxlen=10))
            limit = rule.limit(self.first.get(rule.metric), list(history))
            self.first.setdefault(rule.metric, value)
            history.append(value)
            crossed = limit is not None and rule.crossed(value, limit)
            self.streaks[rule.name] = self.streaks.get(rule.name, 0) + 1 if crossed else 0
            firing = self.streaks[rule.name] >= self.patience
            if reported or firing:
                flags[f"alarm/{rule.name}"] = float(firing)
            if firing:
                fired.append(f"alarm/{rule.name}")
        return fired, flags

    @staticmethod
    def _over(rule: Rule, metrics: dict[str, float]) -> bool:
        """Whether a fixed-threshold rule's metric is past its threshold at this step."""
        value = metrics.get(rule.metric, rule.absent)
        return (rule.relative_to == "none" and value is not None and math.isfinite(value)
                and rule.crossed(value, rule.threshold))

    def state(self) -> dict:
        """JSON-ready state (kept in checkpoints, so a resumed run raises the same alarms)."""
        return {"streaks": dict(self.streaks), "first": dict(self.first),
                "recent": {k: list(v) for k, v in self.recent.items()}}

    def load_state(self, state: dict) -> None:
        self.streaks = dict(state["streaks"])
        self.first = dict(state["first"])
        self.recent = {k: deque(v, maxlen=10) for k, v in state["recent"].items()}

    def reset_streaks(self) -> None:
        """Forget the streaks (after a rollback, the run starts over from good weights)."""
        self.streaks.clear()
