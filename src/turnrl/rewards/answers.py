"""Where a reward finds the agent's final answer and the reference, and how text is compared.

The final answer of an episode (:func:`final_answer`):

1. ``trajectory.info["final_answer"]`` when the env set it (an env that has an ``answer``
   tool, or that parses the reply itself, knows the answer best); ``pattern`` is then not used;
2. otherwise the content of the last ``assistant`` message, or ``None`` when there is none;
3. with a ``pattern`` (a regex, compiled with ``re.DOTALL``), the *last* match in that
   message: its group ``answer`` if the pattern names one, else its group 1 if it has
   groups, else the whole match; ``None`` when nothing matches.

The answer is stripped of surrounding whitespace. ``None`` means "no answer" and scores 0.

The reference (:func:`reference_answers`) is the ``answer`` keyword argument of the reward
when given, else ``trajectory.info["answer"]``; it is a string, a number, or a list of them
(any of which counts as correct, as in SQuAD).
"""

from __future__ import annotations

import functools
import re
import string
from typing import Any

from turnrl.types import Trajectory

__all__ = ["answer_tokens", "final_answer", "normalize_answer", "reference_answers"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, drop punctuation and the articles a/an/the, and
    collapse whitespace (Rajpurkar et al. 2016, the official ``evaluate-v1.1.py``).

    >>> normalize_answer("  The Eiffel-Tower! ")
    'eiffeltower'
    """
    text = str(text).lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    """The whitespace tokens of :func:`normalize_answer` (the units of SQuAD F1)."""
    return normalize_answer(text).split()


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str, reward: str, flags: int = re.DOTALL) -> re.Pattern[str]:
    """``re.compile`` with an error that names the reward and the pattern."""
    try:
        return re.compile(pattern, flags)
    except re.error as error:
        raise ValueError(
            f"reward {reward!r}: pattern {pattern!r} is not a valid regular expression "
            f"({error}); fix the 'pattern' kwarg"
        ) from None


def last_assistant_message(trajectory: Trajectory) -> str | None:
    """The content of the last ``assistant`` message, ``None`` when there is none."""
    for message in reversed(trajectory.messages):
        if message["role"] == "assistant":
            return message["content"]
    return None


def final_answer(trajectory: Trajectory, *, pattern: str | None = None,
                 reward: str = "final_answer") -> str | None:
    """The episode's final answer, found as the module docstring says (``None``: no answer)."""
    from_env = trajectory.info.get("final_answer")
    if from_env is not None:
        return str(from_env).strip()
    text = last_assistant_message(trajectory)
    if text is None or pattern is None:
        return None if text is None else text.strip()
    matches = list(compile_pattern(pattern, reward).finditer(text))
    if not matches:
        return None
    match = matches[-1]
    if "answer" in match.re.groupindex:
        found = match.group("answer")
    elif match.re.groups:
        found = match.group(1)
    else:
        found = match.group(0)
    return None if found is None else found.strip()


def reference_answers(trajectory: Trajectory, answer: Any = None, *,
                      reward: str) -> list[str]:
    """The reference answers: ``answer`` if given, else ``trajectory.info["answer"]``.

    Raises:
        ValueError: there is no reference, naming the reward and both ways to give one.
    """
    reference = answer if answer is not None else trajectory.info.get("answer")
    if reference is None:
        raise ValueError(
            f"reward {reward!r} needs a reference answer, but episode {trajectory.env_id!r} "
            f"(seed {trajectory.seed}) has no info['answer']; have the env put the answer in "
            "its info, or pass kwargs: {answer: ...} to the reward"
        )
    references = list(reference) if isinstance(reference, (list, tuple)) else [reference]
    if not references:
        raise ValueError(f"reward {reward!r}: the reference answer list is empty")
    return [str(item) for item in references]
