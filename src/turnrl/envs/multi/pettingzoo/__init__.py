"""``pz:<game>``: PettingZoo's classic two-player games, played as turnrl multi-agent text envs.

>>> from turnrl.envs import make
>>> env = make("pz:tictactoe_v3")                      # doctest: +SKIP
>>> env.spec.id, env.spec.agents                       # doctest: +SKIP
('pz/tictactoe-v3', ('player_1', 'player_2'))

This package owns the ``pz:`` ids: ``turnrl.envs`` registers :data:`RESOLVER` with the
registry under each of :data:`PREFIXES` (``register_prefix``), so ``make("pz:<game>")`` and
``make("pz/<turnrl id>")`` need no registration. The resolver imports the adapter, and with
it pettingzoo (the ``turnrl[multi]`` extra), only when such an id is used: importing this
package loads only the ids module. The modules:

* ``adapter``: ``PettingZooEnv``, a PettingZoo AEC game behind the ``MultiAgentEnv`` contract;
* ``boards``: each supported game's rules, board text and move numbering (tic-tac-toe: squares
  1-9 row by row; connect four: columns 1-7);
* ``ids``: the two prefixes, the supported games, PettingZoo's game of a ``pz:`` id and the
  turnrl id of a game.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from turnrl.envs.multi.pettingzoo.ids import PZ_NAMESPACE, PZ_PREFIX, SUPPORTED_GAMES

if TYPE_CHECKING:
    from turnrl.envs.multi.pettingzoo.adapter import PettingZooEnv
    from turnrl.envs.protocol import EnvSpec


class PettingZooResolver:
    """The registry's resolver of ``pz:<game>`` and ``pz/<turnrl id>`` (a ``PrefixResolver``)."""

    def spec(self, id: str) -> EnvSpec:
        """The spec of the adapted game with default options (built once to read it)."""
        from turnrl.envs.multi.pettingzoo.adapter import pz_env_spec  # on first use (above)

        return pz_env_spec(id)

    def make(self, id: str, **kwargs: Any) -> PettingZooEnv:
        """The adapted game; ``kwargs`` are adapter options (``max_invalid``)."""
        from turnrl.envs.multi.pettingzoo.adapter import make_pz_env

        return make_pz_env(id, **kwargs)


RESOLVER = PettingZooResolver()
PREFIXES = (PZ_PREFIX, PZ_NAMESPACE)  # the id prefixes RESOLVER answers for

__all__ = ["PREFIXES", "PZ_NAMESPACE", "PZ_PREFIX", "RESOLVER", "SUPPORTED_GAMES",
           "PettingZooResolver"]
