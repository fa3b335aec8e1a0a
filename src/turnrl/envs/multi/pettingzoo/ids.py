"""The ``pz:`` ids: PettingZoo's game of a ``pz:<game>`` or ``pz/<turnrl id>``, and back.

``resolve_pz_id("pz:tictactoe_v3")`` is ``"tictactoe_v3"`` (the module name in
``pettingzoo.classic``), and so is ``resolve_pz_id("pz/tictactoe-v3")``;
``turnrl_env_id("connect_four_v3")`` is ``"pz/connect_four-v3"``, the ``spec.id`` of the adapted
env. Only the games of :data:`SUPPORTED_GAMES` are adapted (their boards are read from
PettingZoo's observation planes, whose layout is checked per version); any other id is an
``UnknownEnvError`` naming them. Nothing here imports pettingzoo until :func:`make_aec`
builds an env.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from turnrl.envs.registry import UnknownEnvError
from turnrl.wording import did_you_mean

PZ_PREFIX = "pz:"  # make("pz:<game>"), the game as pettingzoo.classic names its module
PZ_NAMESPACE = "pz/"  # the turnrl id of an adapted env: "pz/tictactoe-v3"
SUPPORTED_GAMES = ("tictactoe_v3", "connect_four_v3")  # the games boards.py can render
EXTRA = "pip install 'turnrl[multi]'"


def turnrl_env_id(game: str) -> str:
    """The turnrl id of a PettingZoo game: ``"tictactoe_v3"`` -> ``"pz/tictactoe-v3"``."""
    return PZ_NAMESPACE + re.sub(r"_v(\d+)$", r"-v\1", game)


def supported_ids() -> str:
    """``"pz:tictactoe_v3 (pz/tictactoe-v3), ..."``: the ids an error lists."""
    return ", ".join(f"{PZ_PREFIX}{g} ({turnrl_env_id(g)})" for g in SUPPORTED_GAMES)


def resolve_pz_id(env_id: str) -> str:
    """PettingZoo's game name for ``"pz:<game>"`` or ``"pz/<turnrl id>"``; an
    ``UnknownEnvError`` naming the supported games if it is none of them."""
    by_id = {PZ_PREFIX + g: g for g in SUPPORTED_GAMES}
    by_id.update({turnrl_env_id(g): g for g in SUPPORTED_GAMES})
    if env_id in by_id:
        return by_id[env_id]
    stem = env_id.removeprefix(PZ_PREFIX).removeprefix(PZ_NAMESPACE)
    name = re.sub(r"[_-]v\d+$", "", stem.removeprefix("classic/"))
    versions = [g for g in SUPPORTED_GAMES if re.sub(r"_v\d+$", "", g) == name]
    if versions:
        hint = (f"; the adapter supports {', '.join(PZ_PREFIX + g for g in versions)} only "
                "(the version whose board layout it reads).")
    else:
        hint = did_you_mean(PZ_PREFIX + stem, [PZ_PREFIX + g for g in SUPPORTED_GAMES],
                            prefix=PZ_PREFIX, otherwise=".")
    raise UnknownEnvError(f"unknown PettingZoo game {env_id!r}{hint} Supported games: "
                          f"{supported_ids()}")


def make_aec(env_id: str, game: str) -> Any:
    """PettingZoo's AEC env of ``game``: ``pettingzoo.make("aec", "classic/<game>")`` where
    pettingzoo has a registry (1.27 and later), else ``pettingzoo.classic.<game>.env()``; an
    ImportError naming the ``turnrl[multi]`` extra when pettingzoo or what the game imports
    (pygame) is missing."""
    try:
        pettingzoo = importlib.import_module("pettingzoo")
    except ImportError as exc:
        missing = exc.name if isinstance(exc, ModuleNotFoundError) and exc.name else "pettingzoo"
        raise ImportError(f"env {env_id!r} needs pettingzoo, which cannot be imported ({missing} "
                          f"is missing); install it with {EXTRA}") from exc
    version = getattr(pettingzoo, "__version__", "?")
    if not callable(getattr(pettingzoo, "make", None)):
        return _import_game(env_id, game, version).env()
    errors = importlib.import_module("pettingzoo.env_registry.exceptions")
    try:
        return pettingzoo.make("aec", f"classic/{game}")
    except errors.PettingZooRegistryError as exc:
        cause = exc.__cause__
        if isinstance(cause, ModuleNotFoundError):
            raise ImportError(f"env {env_id!r}: PettingZoo's {game} imports {cause.name!r}, "
                              f"which is not installed; install it with {EXTRA}") from exc
        raise UnknownEnvError(f"env {env_id!r}: pettingzoo {version} cannot make "
                              f"classic/{game}: {exc}; install a pettingzoo that has it "
                              f"({EXTRA})") from exc


def _import_game(env_id: str, game: str, version: str) -> Any:
    """``pettingzoo.classic.<game>``, the module of a pettingzoo without a registry."""
    module = f"pettingzoo.classic.{game}"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            raise UnknownEnvError(f"env {env_id!r}: pettingzoo {version} has no {module}; "
                                  f"install a pettingzoo that has it ({EXTRA})") from exc
        raise ImportError(f"env {env_id!r}: {module} imports {exc.name!r}, which is not "
                          f"installed; install it with {EXTRA}") from exc
