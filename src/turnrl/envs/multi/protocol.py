"""The multi-agent env contract: PettingZoo's AEC shape, with text in and out.

A multi-agent env has named agents (``spec.agents``, in seat order) that act one at a time.
``agent_selection`` names whose turn it is; ``step(action)`` takes that agent's reply as text
and returns every agent's reward for the step, and who is terminated or truncated;
``observe(agent)`` is that agent's conversation so far (its own replies included, as
``assistant`` messages), which only ever grows, so a policy appends what is new to its own
context and replies. An agent that is terminated or truncated leaves ``agents``; the episode
is over when ``agents`` is empty. Within ``spec.max_turns`` steps (all agents' together) it
always is.

The mapping to PettingZoo's AEC API (``env.agent_iter()``, ``env.last()``,
``env.step(action)``): ``agent_selection``, ``agents``, ``observe(agent)`` and ``rewards``,
``terminations``, ``truncations``, ``infos`` keep their names and meaning; ``step`` returns
the step's dictionaries (:class:`MultiStepResult`) instead of leaving them on the env, and a
finished agent is never stepped with ``None``: ``agent_selection`` moves to live agents only.

Capabilities are declared on the spec as for one agent (``turnrl.envs.protocol``):
``has_oracle`` with ``oracle_action()``, the scripted expert's reply for the agent whose turn
it is, and ``sample_action(rng)`` (detected with ``isinstance``), a random legal reply for it.
Each step's ``infos[agent]`` may carry ``invalid_action`` (the reply could not be used) and,
at the end, ``outcome``: ``"win"``, ``"loss"`` or ``"draw"`` in games, ``"success"`` or
``"failure"`` in cooperative envs. See ``docs/multi_agent.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from turnrl.envs.protocol import EnvSpec
from turnrl.types import Message

OUTCOMES = ("win", "loss", "draw", "success", "failure")
"""The values of ``infos[agent]["outcome"]`` at an agent's last step."""


@dataclass(frozen=True)
class MultiStepResult:
    """What :meth:`MultiAgentEnv.step` returns: for every agent of ``spec.agents``, its
    reward for this step (``0.0`` when none), whether it is terminated (its part ended) or
    truncated (a budget ran out), and its info (the env's extras)."""

    rewards: dict[str, float]
    terminations: dict[str, bool]
    truncations: dict[str, bool]
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)

    def done(self, agent: str) -> bool:
        """Whether ``agent`` is terminated or truncated after this step."""
        return self.terminations.get(agent, False) or self.truncations.get(agent, False)


@runtime_checkable
class MultiAgentEnv(Protocol):
    """Several agents, one at a time, text in and out (see the module docstring).

    ``reset`` seeds every random choice (the same seed and the same replies give the same
    conversations) and returns the episode's info. ``step`` never raises on a malformed
    reply: the acting agent is told what was wrong in its next observation (and
    ``infos[agent]["invalid_action"]`` is true), as the env's rules say (a lost turn, a
    random move, or a forfeit).
    """

    spec: EnvSpec

    @property
    def agents(self) -> list[str]:
        """The agents still in the episode, in seat order; empty once it is over."""
        ...

    @property
    def agent_selection(self) -> str:
        """The agent whose reply the next ``step`` takes (one of ``agents``)."""
        ...

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> dict[str, Any]: ...

    def observe(self, agent: str) -> list[Message]:
        """``agent``'s conversation so far: what it was told and what it replied."""
        ...

    def step(self, action: str) -> MultiStepResult: ...

    def close(self) -> None: ...


def is_multi_agent(env_spec: EnvSpec) -> bool:
    """Whether ``env_spec`` declares the multi-agent contract (a non-empty ``agents``)."""
    return bool(env_spec.agents)
