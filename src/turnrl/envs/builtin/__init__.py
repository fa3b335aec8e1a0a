"""Built-in envs, one module each (the SWE envs are a package of their own,
``turnrl.envs.swe``, and the multi-agent ones live in ``turnrl.envs.multi``). ``turnrl.envs``
registers ``BUILTIN_SPECS`` at import."""

from turnrl.envs.builtin.arithmetic import SPEC as ARITHMETIC_SPEC
from turnrl.envs.builtin.dataset import SPEC as DATASET_SPEC
from turnrl.envs.builtin.frozenlake import SPEC as FROZENLAKE_SPEC
from turnrl.envs.builtin.guess import SPEC as GUESS_SPEC
from turnrl.envs.builtin.keypad import SPEC as KEYPAD_SPEC
from turnrl.envs.builtin.python_env import SPEC as PYTHON_SPEC
from turnrl.envs.builtin.search_qa import SPEC as SEARCH_QA_SPEC
from turnrl.envs.builtin.sokoban import SPEC as SOKOBAN_SPEC
from turnrl.envs.builtin.textworld_env import SPEC as TEXTWORLD_SPEC
from turnrl.envs.multi.bargaining import SPEC as BARGAINING_SPEC
from turnrl.envs.multi.referential import SPEC as REFERENTIAL_SPEC
from turnrl.envs.multi.tictactoe import SPEC as TICTACTOE_SPEC
from turnrl.envs.swe.generated_env import SPEC as SWE_SPEC
from turnrl.envs.swe.local_env import SPEC as SWE_LOCAL_SPEC

BUILTIN_SPECS = (ARITHMETIC_SPEC, BARGAINING_SPEC, DATASET_SPEC, FROZENLAKE_SPEC, GUESS_SPEC,
                 KEYPAD_SPEC, PYTHON_SPEC, REFERENTIAL_SPEC, SEARCH_QA_SPEC, SOKOBAN_SPEC,
                 SWE_SPEC, SWE_LOCAL_SPEC, TEXTWORLD_SPEC, TICTACTOE_SPEC)

__all__ = ["BUILTIN_SPECS"]
