"""Text-answer rewards: SQuAD exact match and token F1, and grounding in retrieved evidence.

The final answer and the reference are found as :mod:`turnrl.rewards.answers` describes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from turnrl.rewards.answers import (
    answer_tokens,
    final_answer,
    normalize_answer,
    reference_answers,
)
from turnrl.rewards.registry import register_reward
from turnrl.types import Trajectory

__all__ = ["evidence_texts", "exact_match", "f1", "grounded", "token_f1"]


@register_reward("exact_match", needs_reference=True)
def exact_match(trajectory: Trajectory, *, answer: Any = None,
                pattern: str | None = None) -> float:
    """1.0 if the normalised final answer equals a normalised reference, else 0.0.

    Normalisation is SQuAD's (:func:`~turnrl.rewards.answers.normalize_answer`: case,
    punctuation, articles, whitespace). No final answer scores 0.

    Args:
        answer: the reference (a string or a list of acceptable strings); default
            ``trajectory.info["answer"]``.
        pattern: regex that extracts the answer from the last assistant message.
    """
    prediction = final_answer(trajectory, pattern=pattern, reward="exact_match")
    references = reference_answers(trajectory, answer, reward="exact_match")
    if prediction is None:
        return 0.0
    normalized = normalize_answer(prediction)
    return float(any(normalized == normalize_answer(ref) for ref in references))


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 of two strings.

    With the bags of normalised tokens P and G and their overlap c = |P ∩ G| (multiset):
    precision = c/|P|, recall = c/|G|, F1 = 2·precision·recall / (precision + recall), and
    0 when c = 0. When either side has no tokens, F1 is 1 if both are empty, else 0 (the
    SQuAD 2.0 script's rule).
    """
    pred, gold = answer_tokens(prediction), answer_tokens(reference)
    if not pred or not gold:
        return float(pred == gold)
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


@register_reward("f1", needs_reference=True)
def f1(trajectory: Trajectory, *, answer: Any = None, pattern: str | None = None) -> float:
    """SQuAD token F1 (:func:`token_f1`) of the final answer, the best over the references.

    Args:
        answer: the reference (a string or a list); default ``trajectory.info["answer"]``.
        pattern: regex that extracts the answer from the last assistant message.
    """
    prediction = final_answer(trajectory, pattern=pattern, reward="f1")
    references = reference_answers(trajectory, answer, reward="f1")
    if prediction is None:
        return 0.0
    return max(token_f1(prediction, ref) for ref in references)


def evidence_texts(trajectory: Trajectory, roles: Sequence[str] = ("tool",)) -> list[str]:
    """What the agent retrieved before its final reply.

    The contents of the messages whose role is in ``roles`` that come *before* the last
    assistant message (an ``answer`` tool's echo after the final reply is not evidence),
    plus ``trajectory.info["retrieved"]`` (a string or a list of strings) where an env
    records retrieved passages itself.
    """
    last = max((i for i, m in enumerate(trajectory.messages) if m["role"] == "assistant"),
               default=len(trajectory.messages))
    texts = [m["content"] for m in trajectory.messages[:last] if m["role"] in roles]
    retrieved = trajectory.info.get("retrieved")
    if isinstance(retrieved, str):
        texts.append(retrieved)
    elif retrieved is not None:
        texts.extend(str(item) for item in retrieved)
    return texts


@register_reward("grounded")
def grounded(trajectory: Trajectory, *, pattern: str | None = None,
             roles: Sequence[str] = ("tool",)) -> float:
    """1.0 if the final answer appears in evidence the agent retrieved, else 0.0.

    Both sides are normalised (:func:`~turnrl.rewards.answers.normalize_answer`) and the
    answer must occur as a whole run of tokens in one evidence text (:func:`evidence_texts`):
    "paris" is found in "capital is paris france" but not in "parisian". An empty or missing
    answer scores 0. This rewards answers taken from sources and penalises fabricated ones;
    combine it with a correctness reward, since grounded is not the same as correct.

    Args:
        pattern: regex that extracts the answer from the last assistant message.
        roles: message roles that count as retrieved evidence.
    """
    prediction = final_answer(trajectory, pattern=pattern, reward="grounded")
    needle = normalize_answer(prediction) if prediction is not None else ""
    if not needle:
        return 0.0
    return float(any(f" {needle} " in f" {normalize_answer(text)} "
                     for text in evidence_texts(trajectory, roles)))
