"""Simulated env-step latency: an env wrapper that makes every ``reset``/``step`` slow.

Tool calls, search backends and code sandboxes answer in a long-tailed time: most calls are
quick, a few are very slow, and a synchronous batch waits for its slowest episode. This
wrapper sleeps a log-normal delay (median ``median_s``, shape ``sigma``: the p99 is
``median_s · e^(2.33·sigma)``, capped at ``max_s``) before each call, drawn from a generator
seeded by the episode's reset seed, so the same episode is slow in the same places. Used by
``bench/async.py`` and by anyone sizing an asynchronous setup (``env.latency.*``).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable
from typing import Any

from turnrl.envs.protocol import Env
from turnrl.types import Message, StepResult


class SimulatedLatency:
    """``env`` with a log-normal delay before every ``reset`` and ``step`` (its spec says
    ``slow_steps``, so the runner plays it off the event loop)."""

    def __init__(self, env: Env, *, median_s: float, sigma: float = 1.0,
                 max_s: float = 30.0) -> None:
        self.env = env
        self.spec = dataclasses.replace(env.spec, slow_steps=True)
        self.median_s, self.sigma, self.max_s = median_s, sigma, max_s
        self.rng = random.Random(0)

    def delay(self) -> float:
        """One delay in seconds: ``min(max_s, median_s · exp(sigma · N(0, 1)))``."""
        return min(self.max_s, self.median_s * math.exp(self.sigma * self.rng.gauss(0.0, 1.0)))

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[list[Message], dict[str, Any]]:
        self.rng = random.Random(f"latency-{seed}")
        time.sleep(self.delay())
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> StepResult:
        time.sleep(self.delay())
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()

    def __getattr__(self, name: str) -> Any:  # the optional capabilities of the wrapped env
        if name == "env":  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self.env, name)


def with_latency(make_env: Callable[[], Env], median_s: float, sigma: float,
                 max_s: float) -> SimulatedLatency:
    """``make_env()`` wrapped in :class:`SimulatedLatency` (a picklable env factory piece)."""
    return SimulatedLatency(make_env(), median_s=median_s, sigma=sigma, max_s=max_s)
