"""Playing whole episodes in env tests: the oracle, or a fixed list of actions."""

from __future__ import annotations

from typing import Any


def play_oracle(env: Any, seed: int | None = None, options: dict | None = None):
    """Reset, then follow ``oracle_action()`` to the end; returns (last result, transcript)
    with transcript ``[reset messages, (action, result), ...]``."""
    messages, _info = env.reset(seed=seed, options=options)
    transcript: list = [messages]
    while True:
        action = env.oracle_action()
        result = env.step(action)
        transcript.append((action, result))
        if result.terminated or result.truncated:
            return result, transcript


def play(env: Any, seed: int, actions: list[str]) -> list:
    """Reset with ``seed`` and play ``actions`` until the episode ends:
    ``[reset output, result, ...]``."""
    transcript: list = [env.reset(seed=seed)]
    for action in actions:
        result = env.step(action)
        transcript.append(result)
        if result.terminated or result.truncated:
            break
    return transcript
