"""The env pillar: the ``Env`` protocol, the registry (``register``/``make``) and ``check_env``.

>>> from turnrl.envs import make
>>> env = make("arithmetic-v0")
>>> env.reset(seed=0)[0][0]["role"]
'user'

The contract is documented in ``docs/environments.md``.
"""

from turnrl.envs.builtin import BUILTIN_SPECS
from turnrl.envs.checker import EnvCheckError, check_env
from turnrl.envs.protocol import (
    Env,
    EnvSpec,
    HasActionSampler,
    HasOracle,
    HasPrivilegedInfo,
    HasStateKey,
    HasTools,
    parse_env_id,
)
from turnrl.envs.registry import (
    ENTRY_POINT_GROUP,
    EnvPluginError,
    UnknownEnvError,
    make,
    register,
    register_spec,
    registered_ids,
    spec,
)
from turnrl.types import Message, StepResult

for _builtin_spec in BUILTIN_SPECS:
    register_spec(_builtin_spec)

__all__ = [
    "ENTRY_POINT_GROUP",
    "Env",
    "EnvCheckError",
    "EnvPluginError",
    "EnvSpec",
    "HasActionSampler",
    "HasOracle",
    "HasPrivilegedInfo",
    "HasStateKey",
    "HasTools",
    "Message",
    "StepResult",
    "UnknownEnvError",
    "check_env",
    "make",
    "parse_env_id",
    "register",
    "register_spec",
    "registered_ids",
    "spec",
]
