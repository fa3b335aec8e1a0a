"""Optional packages: whether one is installed, found without importing it.

Config checks ask before any work (``log.wandb=true`` without wandb, ``reward.terms`` with
``math_verify`` without math-verify) instead of failing at the first import mid-run; finding
a module's spec is cheap where importing it (wandb, sympy) takes seconds.
"""

from __future__ import annotations

import importlib.util


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (``"wandb"``, ``"math_verify"``). A bare namespace
    package (a directory of that name on ``sys.path``, such as ``tests/vllm`` beside the
    tests, with no file of the package itself) is not the package."""
    try:
        spec = importlib.util.find_spec(module)
        return spec is not None and spec.origin is not None
    except (ImportError, ValueError):  # a parent package missing, or sys.modules[module] None
        return False
