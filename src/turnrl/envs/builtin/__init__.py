"""Built-in envs, one module each. ``turnrl.envs`` registers ``BUILTIN_SPECS`` at import."""

from turnrl.envs.builtin.arithmetic import SPEC as ARITHMETIC_SPEC
from turnrl.envs.builtin.frozenlake import SPEC as FROZENLAKE_SPEC

BUILTIN_SPECS = (ARITHMETIC_SPEC, FROZENLAKE_SPEC)

__all__ = ["BUILTIN_SPECS"]
