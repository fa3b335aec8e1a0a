"""Play an env in the terminal: a person types the actions, or the oracle plays.

``turnrl play ENV --seed N`` shows each observation and reads the next action from stdin;
``--oracle`` lets the env's oracle choose (and shows its moves), which is also a quick way
to see what a solved episode looks like. An empty line or end of input stops the episode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from turnrl.envs.protocol import Env
from turnrl.types import Message


@dataclass
class PlayResult:
    """How a played episode ended."""

    turns: int
    total_reward: float
    success: bool
    terminated: bool
    truncated: bool
    stopped: bool  # the player quit before the episode ended


def play(env: Env, *, seed: int, oracle: bool = False,
         read: Callable[[str], str] = input, show: Callable[[str], None] = print) -> PlayResult:
    """One episode of ``env`` from ``reset(seed=seed)``; actions from ``read`` or the oracle.

    ``read(prompt)`` returns the player's action (``EOFError`` or an empty line stops);
    ``show(text)`` displays messages. With ``oracle=True`` the env must declare
    ``has_oracle``. The env is closed at the end, also when the episode raises (or ``read``
    or ``show`` does, e.g. a ``KeyboardInterrupt`` at the prompt).
    """
    try:
        if oracle and not env.spec.has_oracle:
            raise ValueError(f"env {env.spec.id!r} has no oracle; play it yourself (drop "
                             "--oracle)")
        messages, _ = env.reset(seed=seed)
        _show_messages(messages, show)
        turns, total, success = 0, 0.0, False
        terminated = truncated = stopped = False
        while not (terminated or truncated):
            if oracle:
                action = env.oracle_action()  # type: ignore[attr-defined]
                if action is None:
                    show("(the oracle has no move here)")
                    stopped = True
                    break
                show(f"[assistant] {action}")
            else:
                try:
                    action = read(f"turn {turns + 1}/{env.spec.max_turns} > ")
                except EOFError:
                    action = ""
                if not action.strip():
                    stopped = True
                    break
            result = env.step(action)
            turns += 1
            total += float(result.reward)
            terminated, truncated = bool(result.terminated), bool(result.truncated)
            success = bool(result.info.get("success", False))
            _show_messages(result.observation, show)
            if result.reward:
                show(f"(reward {result.reward:g})")
        ending = "stopped" if stopped else ("success" if success else
                                            ("terminated" if terminated else "truncated"))
        show(f"-- {ending} after {turns} turns, total reward {total:g}")
    finally:
        env.close()
    return PlayResult(turns, total, success, terminated, truncated, stopped)


def _show_messages(messages: list[Message], show: Callable[[str], None]) -> None:
    for message in messages:
        show(f"[{message['role']}] {message['content']}")
