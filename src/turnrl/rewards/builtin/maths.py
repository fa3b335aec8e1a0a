"""Mathematical answers checked with Hugging Face's Math-Verify (``pip install math-verify``).

The helpers here are the one place where golds and replies are read as math, shared by the
``math_verify`` reward and ``dataset-v0``'s math checker:

* :func:`parse_gold`: a gold (reference) answer is LaTeX without delimiters, as datasets
  store it (``\\sqrt{2}``, ``\\pi``, ``\\{1,2\\}``, ``2\\sqrt{3}``), so it is read as ``$gold$``;
  Math-Verify would find nothing (or only the ``2`` of ``2\\sqrt{3}``) in the bare text.
* :func:`parse_reply`: a reply is free text (the last ``\\boxed{}``, ``$...$`` or expression
  in it is taken), except a bare expression (no ``$``/``\\boxed``/``\\(``/``\\[``, no words but
  math names such as ``sqrt`` or ``pi``), which is read as ``$reply$`` like a gold (and as it
  is when that finds nothing), so that a reply equal to the gold matches it and ``1 + 2x`` is
  not read as ``2``. Text is never wrapped: as LaTeX, ``Paris`` would be the product of its
  letters.
* :func:`math_equal`: both of the above, compared with ``math_verify.verify``.

Math-Verify's timeouts use ``signal.alarm``, which only works in the main thread: elsewhere
:func:`math_timeout` drops the limit.
"""

from __future__ import annotations

import importlib
import re
import threading
from typing import Any

from turnrl.packages import installed
from turnrl.rewards.answers import final_answer, reference_answers
from turnrl.rewards.registry import register_reward
from turnrl.types import Trajectory

__all__ = [
    "MATH_TIMEOUT_S",
    "MATH_WORDS",
    "import_math_verify",
    "looks_like_math",
    "math_equal",
    "math_timeout",
    "math_verify",
    "parse_gold",
    "parse_reply",
    "parses_as_math",
]

MATH_TIMEOUT_S = 5  # Math-Verify's default per-parse and per-comparison limit
#: Words that may appear in a bare math expression (besides LaTeX commands).
MATH_WORDS = frozenset({"sqrt", "sin", "cos", "tan", "log", "ln", "exp", "pi", "inf", "infty"})
_DELIMITERS = ("$", "\\boxed", "\\(", "\\[")


def import_math_verify(user: str = "reward 'math_verify'", alternative: str = "") -> Any:
    """The ``math_verify`` module, or an ImportError naming ``user`` (who needs it), how to
    install it, and ``alternative`` (e.g. ``"or use checker='exact'"``) when given."""
    try:
        return importlib.import_module("math_verify")
    except ImportError as error:
        other = f" ({alternative})" if alternative else ""
        raise ImportError(
            f"{user} needs the math-verify package, which cannot be imported ({error}); "
            f"install it with pip install 'math-verify>=0.9'{other}"
        ) from None


def math_timeout(seconds: int | None = MATH_TIMEOUT_S) -> int:
    """``seconds`` in the main thread; 0 (no limit) elsewhere, where ``signal.alarm`` fails."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    return (seconds or 0) if in_main_thread else 0


def has_only_math_words(text: str) -> bool:
    """No word of two or more letters other than :data:`MATH_WORDS` outside LaTeX commands
    (``2x + 1`` and ``\\frac{\\pi}{2}`` yes, ``12 apples`` and ``Paris`` no)."""
    words = re.findall(r"[A-Za-z]{2,}", re.sub(r"\\[a-zA-Z]+", " ", text))
    return all(word.lower() in MATH_WORDS for word in words)


def _is_bare_expression(text: str) -> bool:
    return bool(text.strip()) and not any(mark in text for mark in _DELIMITERS) and (
        has_only_math_words(text))


def parse_gold(gold: str, *, timeout: int | None = None) -> list[Any]:
    """The gold answer parsed by Math-Verify as LaTeX (wrapped in ``$...$`` unless it has
    ``$`` or ``\\boxed``; the bare text when that finds nothing): SymPy objects, possibly
    followed by the matched string (alone when SymPy cannot parse it); ``[]`` when nothing
    matched. ``timeout`` defaults to :func:`math_timeout`'s."""
    math_verify = import_math_verify()
    timeout = math_timeout() if timeout is None else timeout
    text = gold if "$" in gold or "\\boxed" in gold else f"${gold}$"
    return math_verify.parse(text, parsing_timeout=timeout) or math_verify.parse(
        gold, parsing_timeout=timeout)


def parse_reply(reply: str, *, timeout: int | None = None) -> list[Any]:
    """The answer in ``reply`` parsed by Math-Verify: a bare expression (see the module
    docstring) as ``$reply$``, retried as it is when that finds nothing; other text as it
    is (its last ``\\boxed{}``, LaTeX or plain expression); ``[]`` when nothing is found."""
    math_verify = import_math_verify()
    timeout = math_timeout() if timeout is None else timeout
    if _is_bare_expression(reply):
        parsed = math_verify.parse(f"${reply}$", parsing_timeout=timeout)
        if parsed:
            return parsed
    return math_verify.parse(reply, parsing_timeout=timeout)


def parses_as_math(gold: str, *, timeout: int | None = None) -> bool:
    """Math-Verify turns ``gold`` into a SymPy object (not just its fallback string)."""
    return any(not isinstance(item, str) for item in parse_gold(gold, timeout=timeout))


def looks_like_math(gold: str, *, timeout: int | None = None) -> bool:
    """A gold to check as math: a digit or LaTeX command, no words but math names
    (:func:`has_only_math_words`), and it parses (:func:`parses_as_math`)."""
    if not re.search(r"\d|\\[a-zA-Z]", gold):
        return False
    return has_only_math_words(gold) and parses_as_math(gold, timeout=timeout)


def math_equal(reply: str, gold: str, *, timeout_seconds: int | None = MATH_TIMEOUT_S) -> bool:
    """Whether the answer in ``reply`` (:func:`parse_reply`) is mathematically equal to
    ``gold`` (:func:`parse_gold`): ``"0.5"`` matches ``"\\frac{1}{2}"``, ``"\\sqrt{2}"`` matches
    ``"\\sqrt{2}"`` and ``"$2^{1/2}$"``. False when either has no math."""
    math_verify = import_math_verify()
    timeout = math_timeout(timeout_seconds)
    parsed_gold = parse_gold(gold, timeout=timeout)
    parsed_reply = parse_reply(reply, timeout=timeout)
    return bool(parsed_gold and parsed_reply
                and math_verify.verify(parsed_gold, parsed_reply, timeout_seconds=timeout))


def _is_not_math(reference: str, parsed: list[Any], timeout: int) -> bool:
    """A reference (``parsed`` by :func:`parse_gold`) that is no math: Math-Verify finds
    nothing in its plain text, and as LaTeX it gives no SymPy object (``???``) or is words
    (``Paris`` would be the product of its letters)."""
    if any(not isinstance(item, str) for item in parsed) and has_only_math_words(reference):
        return False
    return not import_math_verify().parse(reference, parsing_timeout=timeout)


def _check_installed(**_settings: Any) -> None:
    """At config time: math-verify is installed (found, not imported: that takes a second)."""
    if not installed("math_verify"):
        import_math_verify()  # the ImportError that says how to install it


@register_reward("math_verify", check=_check_installed, needs_reference=True)
def math_verify(trajectory: Trajectory, *, answer: Any = None, pattern: str | None = None,
                timeout_seconds: int | None = MATH_TIMEOUT_S) -> float:
    """1.0 if the final answer is mathematically equal to a reference, else 0.0.

    The reference is read with :func:`parse_gold` (LaTeX, with or without ``$``: ``\\sqrt{2}``,
    ``\\pi``, ``\\{1,2\\}``, ``\\frac{1}{2}``, ``42``) and the prediction with
    :func:`parse_reply` (``\\boxed{}``, ``$...$``, or the last expression of free text; a
    bare expression such as ``2\\sqrt{3}`` as a whole), and they are compared with
    ``math_verify.verify(gold, prediction)`` (numeric, symbolic, sets, intervals). A
    prediction with no parseable math scores 0; a reference that is not math (nothing
    parses, or words that only parse as a product of letters, like ``Paris``) raises, since
    it is a data error.

    Args:
        answer: the reference (e.g. ``"\\frac{1}{2}"``, ``"42"`` or a list); default
            ``trajectory.info["answer"]``.
        pattern: regex that extracts the answer from the last assistant message (usually
            unnecessary: Math-Verify finds ``\\boxed{}`` itself).
        timeout_seconds: limit of each parse and comparison. Math-Verify times out with
            ``signal.alarm``, which only works in the main thread: elsewhere the limit is
            dropped (run rewards in the main thread or in processes to keep it).
    """
    math_verify_module = import_math_verify()
    prediction = final_answer(trajectory, pattern=pattern, reward="math_verify")
    references = reference_answers(trajectory, answer, reward="math_verify")
    if prediction is None:
        return 0.0
    timeout = math_timeout(timeout_seconds)
    predicted = parse_reply(prediction, timeout=timeout)
    if not predicted:
        return 0.0
    for reference in references:
        gold = parse_gold(reference, timeout=timeout)
        if _is_not_math(reference, gold, timeout):
            raise ValueError(
                f"reward 'math_verify': cannot parse the reference answer {reference!r} of "
                f"episode {trajectory.env_id!r} (seed {trajectory.seed}) as math; fix the "
                "dataset's answer or use the exact_match reward for non-math answers"
            )
        if math_verify_module.verify(gold, predicted, timeout_seconds=timeout):
            return 1.0
    return 0.0
