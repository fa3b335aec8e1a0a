"""The ``gym:`` ids: Gymnasium's id of a ``gym:<id>`` or ``gym/<turnrl id>``, and back.

``resolve_gym_id("gym:FrozenLake-v1")`` is ``"FrozenLake-v1"`` (``"gym:module:Id"`` imports
``module`` first, as ``gymnasium.make`` does), and so is ``resolve_gym_id("gym/frozenlake-v1")``;
``turnrl_env_id("FrozenLake-v1")`` is ``"gym/frozenlake-v1"``, the ``spec.id`` of the adapted
env. An id Gymnasium lacks is an ``UnknownEnvError`` saying what exists.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from turnrl.envs.registry import UnknownEnvError
from turnrl.wording import did_you_mean

GYM_PREFIX = "gym:"  # make("gym:<Gymnasium id>")
GYM_NAMESPACE = "gym/"  # the turnrl id of an adapted env: "gym/frozenlake-v1"


def import_gymnasium(env_id: str) -> Any:
    """``gymnasium``, or an ImportError naming the ``turnrl[gym]`` extra."""
    try:
        return importlib.import_module("gymnasium")
    except ImportError as exc:
        raise ImportError(
            f"env {env_id!r} needs gymnasium, which is not installed; install it with "
            "pip install 'turnrl[gym]'"
        ) from exc


def turnrl_env_id(gym_id: str) -> str:
    """The turnrl id of a Gymnasium id: ``"FrozenLake-v1"`` -> ``"gym/frozenlake-v1"``,
    ``"phys2d/CartPole-v1"`` -> ``"gym/phys2d.cartpole-v1"`` (``-v0`` if unversioned)."""
    stem = gym_id.split(":", 1)[-1].lower().replace("/", ".")
    stem = re.sub(r"[^a-z0-9_.\-]", "_", stem)
    if not re.search(r"-v\d+$", stem):
        stem += "-v0"
    return GYM_NAMESPACE + stem


def resolve_gym_id(env_id: str) -> str:
    """Gymnasium's id for ``"gym:<id>"`` or ``"gym/<turnrl form>"``; UnknownEnvError if none.

    ``"gym:module:Id"`` imports ``module`` first (it may register ``Id``).
    """
    gym = import_gymnasium(env_id)
    if env_id.startswith(GYM_NAMESPACE):
        by_turnrl_id = {turnrl_env_id(g): g for g in sorted(gym.registry)}
        if env_id in by_turnrl_id:
            return by_turnrl_id[env_id]
        raise UnknownEnvError(
            f"unknown env {env_id!r}: no Gymnasium env (gymnasium {gym.__version__}) has this "
            f"turnrl id{did_you_mean(env_id, by_turnrl_id, prefix=GYM_NAMESPACE, otherwise='.')}"
        )
    gym_id = env_id.removeprefix(GYM_PREFIX)
    if ":" in gym_id:
        module, gym_id = gym_id.split(":", 1)
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(
                f"env {env_id!r}: cannot import {module!r}, the module that registers "
                f"{gym_id!r} with gymnasium: {exc}; install the package that provides it"
            ) from exc
    if gym_id in gym.registry:
        return gym_id
    name = re.sub(r"-v\d+$", "", gym_id)
    versions = sorted(g for g in gym.registry if re.sub(r"-v\d+$", "", g) == name)
    if versions:
        hint = (f"; gymnasium {gym.__version__} has "
                f"{', '.join(GYM_PREFIX + g for g in versions)}.")
    else:
        hint = did_you_mean(GYM_PREFIX + gym_id, [GYM_PREFIX + g for g in gym.registry],
                            prefix=GYM_PREFIX, otherwise=".")
    raise UnknownEnvError(
        f"unknown Gymnasium env {gym_id!r} (from {env_id!r}){hint} List them all with "
        "gymnasium.pprint_registry(); envs of other packages register when imported "
        "('gym:module:Id')"
    )

