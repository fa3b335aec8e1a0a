"""The book-keeping every turn-based text env of several agents repeats: each agent's
conversation, the live agents, whose turn it is, and the step's dictionaries.

An env holds a :class:`TurnTable` (composition, no base class) and implements the contract's
properties with it::

    self.table = TurnTable(("x", "o"))
    # reset:  self.table.start({"x": [first message], "o": [...]}, first="x")
    # step:   self.table.reply(agent, action); self.table.tell("o", "X played 5. ...")
    #         return self.table.result(rewards={...}, infos={...}, ended=True)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from turnrl.envs.multi.protocol import MultiStepResult
from turnrl.types import Message


class TurnTable:
    """Conversations, live agents and whose turn it is, for the agents ``agents`` (seat
    order)."""

    def __init__(self, agents: Iterable[str]) -> None:
        self.all_agents = tuple(agents)
        self.conversations: dict[str, list[Message]] = {a: [] for a in self.all_agents}
        self.live: list[str] = []
        self.current = self.all_agents[0]
        self.finished: dict[str, str] = {}  # agent -> "terminated" or "truncated"

    def start(self, first_messages: Mapping[str, list[Message]], *, first: str) -> None:
        """Begin an episode: every agent's opening messages, and who acts first."""
        self.conversations = {a: [_copy(m) for m in first_messages.get(a, [])]
                              for a in self.all_agents}
        self.live = list(self.all_agents)
        self.current = first
        self.finished = {}

    def observe(self, agent: str) -> list[Message]:
        """``agent``'s conversation so far (a copy)."""
        if agent not in self.conversations:
            raise KeyError(f"unknown agent {agent!r}; the agents are {list(self.all_agents)}")
        return [_copy(m) for m in self.conversations[agent]]

    def reply(self, agent: str, action: str) -> None:
        """Record ``agent``'s reply in its conversation."""
        self.conversations[agent].append({"role": "assistant", "content": action})

    def tell(self, agent: str, content: str,
             role: Literal["system", "user", "tool"] = "user") -> None:
        """Add a message to ``agent``'s conversation. A message shown to the agent is never
        changed afterwards (a conversation only grows), so two in a row stay two."""
        self.conversations[agent].append({"role": role, "content": content})

    def pass_turn(self, to: str | None = None) -> None:
        """Give the turn to ``to`` (default: the next live agent after the current one)."""
        if to is None:
            seats = [a for a in self.all_agents if a in self.live]
            after = self.all_agents.index(self.current)
            to = next((a for a in self.all_agents[after + 1:] + self.all_agents[:after + 1]
                       if a in seats), self.current)
        self.current = to

    def result(self, *, rewards: Mapping[str, float] | None = None,
               infos: Mapping[str, dict[str, Any]] | None = None, ended: bool = False,
               truncated: bool = False) -> MultiStepResult:
        """The step's :class:`MultiStepResult` for every agent (reward 0.0 where not
        given); ``ended`` terminates every live agent, ``truncated`` (without ``ended``)
        truncates them (a budget ran out), and either empties ``live``. An agent that left
        earlier stays terminated or truncated."""
        if ended or truncated:
            for agent in self.live:
                self.finished[agent] = "terminated" if ended else "truncated"
            self.live = []
        return MultiStepResult(
            rewards={a: float((rewards or {}).get(a, 0.0)) for a in self.all_agents},
            terminations={a: self.finished.get(a) == "terminated" for a in self.all_agents},
            truncations={a: self.finished.get(a) == "truncated" for a in self.all_agents},
            infos={a: dict((infos or {}).get(a, {})) for a in self.all_agents})


def _copy(message: Message) -> Message:
    return {"role": message["role"], "content": message["content"]}


class TurnTableEnv:
    """The contract's members that only read the :class:`TurnTable` (``self.table``):
    ``agents``, ``agent_selection``, ``observe`` and a ``close`` with nothing to release. The
    built-in multi-agent envs derive from it and write ``reset`` and ``step``."""

    table: TurnTable

    @property
    def agents(self) -> list[str]:
        """The agents still in the episode, in seat order."""
        return list(self.table.live)

    @property
    def agent_selection(self) -> str:
        """The agent whose reply the next ``step`` takes."""
        return self.table.current

    def observe(self, agent: str) -> list[Message]:
        """``agent``'s conversation so far."""
        return self.table.observe(agent)

    def close(self) -> None:
        """Nothing to release."""
