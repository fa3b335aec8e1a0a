"""The system message an env opens its episodes with, and the ``system_prompt`` option that
replaces or drops it.

Envs with a fixed instruction (``search-qa-v0``, ``python-v0``, ``textworld-v0``) take a
``system_prompt`` keyword: ``None`` (the default) keeps the env's own text, a string replaces
it, and ``""`` drops the system message, for a small model trained from scratch that learns
the task from its demonstrations (the prompt is the same in every episode, and costs it
context and attention).
"""

from __future__ import annotations

from turnrl.types import Message


def system_messages(default: str, system_prompt: str | None, env: str) -> list[Message]:
    """``[{"role": "system", "content": text}]`` with ``text`` = ``system_prompt`` when given,
    else ``default``; ``[]`` when that text is empty. A ``system_prompt`` that is not a
    string raises a ValueError naming ``env`` and the values it takes."""
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise ValueError(f"{env}: system_prompt must be a string (\"\" for none) or null "
                         f"for the default, got {system_prompt!r}")
    text = default if system_prompt is None else system_prompt
    return [{"role": "system", "content": text}] if text else []
