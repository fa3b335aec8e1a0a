"""Mathematical answers checked with Hugging Face's Math-Verify (``pip install math-verify``)."""

from __future__ import annotations

import threading
from typing import Any

from turnrl.rewards.answers import final_answer, reference_answers
from turnrl.rewards.registry import register_reward
from turnrl.types import Trajectory

__all__ = ["math_verify"]


@register_reward("math_verify")
def math_verify(trajectory: Trajectory, *, answer: Any = None, pattern: str | None = None,
                timeout_seconds: int | None = 5) -> float:
    """1.0 if the final answer is mathematically equal to a reference, else 0.0.

    Both are read with ``math_verify.parse`` (LaTeX such as ``\\boxed{\\frac{1}{2}}`` or
    ``$0.5$``, and plain expressions; in free text the last math expression is taken) and
    compared with ``math_verify.verify(gold, prediction)`` (numeric, symbolic, sets,
    intervals). A prediction with no parseable math scores 0; a reference that cannot be
    parsed raises, since it is a data error.

    Args:
        answer: the reference (e.g. ``"\\frac{1}{2}"``, ``"42"`` or a list); default
            ``trajectory.info["answer"]``.
        pattern: regex that extracts the answer from the last assistant message (usually
            unnecessary: Math-Verify finds ``\\boxed{}`` itself).
        timeout_seconds: limit of each parse and comparison. Math-Verify times out with
            ``signal.alarm``, which only works in the main thread: elsewhere the limit is
            dropped (run rewards in the main thread or in processes to keep it).
    """
    try:
        from math_verify import parse, verify
    except ImportError as error:
        raise ImportError(
            f"reward 'math_verify' needs the math-verify package ({error}); install it with "
            "pip install 'math-verify>=0.9'"
        ) from None
    prediction = final_answer(trajectory, pattern=pattern, reward="math_verify")
    references = reference_answers(trajectory, answer, reward="math_verify")
    if prediction is None:
        return 0.0
    in_main_thread = threading.current_thread() is threading.main_thread()
    timeout = (timeout_seconds or 0) if in_main_thread else 0  # 0: Math-Verify sets no alarm
    predicted = parse(prediction, parsing_timeout=timeout)
    if not predicted:
        return 0.0
    for reference in references:
        gold = parse(reference, parsing_timeout=timeout)
        if not gold:
            raise ValueError(
                f"reward 'math_verify': cannot parse the reference answer {reference!r} of "
                f"episode {trajectory.env_id!r} (seed {trajectory.seed}) as math; fix the "
                "dataset's answer or use the exact_match reward for non-math answers"
            )
        if verify(gold, predicted, timeout_seconds=timeout):
            return 1.0
    return 0.0
