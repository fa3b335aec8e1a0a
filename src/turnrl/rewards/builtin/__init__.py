"""The built-in rewards; importing this package registers them in ``REWARDS``.

``exact_match``, ``f1`` and ``grounded`` (text answers), ``math_verify`` (mathematical
equivalence), ``format``, ``tool_cost``, ``invalid_cost`` and ``length_penalty`` (shaping
terms).
"""

from turnrl.rewards.builtin import maths, shaping, text

__all__ = ["maths", "shaping", "text"]
