"""The env pillar: the ``Env`` protocol, the registry (``register``/``make``) and ``check_env``.

Importing it registers the built-in envs and the ``gym:<id>`` prefix (``turnrl.envs.gym``,
whose resolver imports gymnasium only when such an id is used).

>>> from turnrl.envs import make
>>> env = make("arithmetic-v0")
>>> env.reset(seed=0)[0][0]["role"]
'user'

The contract is documented in ``docs/environments.md``.
"""

from turnrl.envs.builtin import BUILTIN_SPECS
from turnrl.envs.checker import EnvCheckError, check_env
from turnrl.envs.gym import PREFIXES as GYM_PREFIXES
from turnrl.envs.gym import RESOLVER as GYM_RESOLVER
from turnrl.envs.multi.pettingzoo import PREFIXES as PZ_PREFIXES
from turnrl.envs.multi.pettingzoo import RESOLVER as PZ_RESOLVER
from turnrl.envs.protocol import (
    CAPABILITIES,
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
    PrefixResolver,
    UnknownEnvError,
    import_modules,
    make,
    make_imported,
    register,
    register_prefix,
    register_spec,
    registered_ids,
    spec,
)
from turnrl.types import Message, StepResult

for _builtin_spec in BUILTIN_SPECS:
    register_spec(_builtin_spec)
for _prefix in GYM_PREFIXES:
    register_prefix(_prefix, GYM_RESOLVER)
for _prefix in PZ_PREFIXES:
    register_prefix(_prefix, PZ_RESOLVER)

__all__ = [
    "CAPABILITIES",
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
    "PrefixResolver",
    "StepResult",
    "UnknownEnvError",
    "check_env",
    "import_modules",
    "make",
    "make_imported",
    "parse_env_id",
    "register",
    "register_prefix",
    "register_spec",
    "registered_ids",
    "spec",
]
