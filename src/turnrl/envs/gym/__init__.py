"""``gym:<id>``: any Gymnasium env with a discrete action space, played as a turnrl text env.

>>> from turnrl.envs import make
>>> env = make("gym:FrozenLake-v1", is_slippery=False)   # doctest: +SKIP
>>> env.spec.id                                           # doctest: +SKIP
'gym/frozenlake-v1'

This package owns the ``gym:`` ids: ``turnrl.envs`` registers :data:`RESOLVER` with the
registry under each of :data:`PREFIXES` (``register_prefix``), so ``make("gym:<id>")`` and
``make("gym/<turnrl id>")`` need no registration. The resolver imports the adapter, and with
it gymnasium (the ``turnrl[gym]`` extra), only when such an id is used: importing
``turnrl.envs`` loads only the ids module here (the two prefixes). The modules:

* ``adapter``: ``GymEnv``, the Gymnasium env behind the turnrl ``Env`` protocol;
* ``ids``: the two prefixes, Gymnasium's id of a ``gym:`` or ``gym/`` id, and the turnrl id of
  a Gymnasium one;
* ``known``: per-env tables (action names, task texts, rewards, success) and observation text;
* ``oracle``: value iteration on a deterministic tabular model, for ``oracle_action()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from turnrl.envs.gym.ids import GYM_NAMESPACE, GYM_PREFIX

if TYPE_CHECKING:
    from turnrl.envs.protocol import Env, EnvSpec


class GymResolver:
    """The registry's resolver of ``gym:<id>`` and ``gym/<turnrl id>`` (a ``PrefixResolver``)."""

    def spec(self, id: str) -> EnvSpec:
        """The spec of the adapted env with default options (built once to read it)."""
        from turnrl.envs.gym.adapter import gym_env_spec  # on first use (see above)

        return gym_env_spec(id)

    def make(self, id: str, **kwargs: Any) -> Env:
        """The adapted env; ``kwargs`` are adapter options and ``gymnasium.make`` arguments."""
        from turnrl.envs.gym.adapter import make_gym_env

        return make_gym_env(id, **kwargs)


RESOLVER = GymResolver()
PREFIXES = (GYM_PREFIX, GYM_NAMESPACE)  # the id prefixes RESOLVER answers for

__all__ = ["GYM_NAMESPACE", "GYM_PREFIX", "PREFIXES", "RESOLVER", "GymResolver"]
