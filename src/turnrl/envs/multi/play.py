"""Playing a multi-agent episode with a policy per agent: scripted play, evaluation against
fixed opponents, demonstrations.

A policy is a function ``(env, agent) -> reply``: :func:`oracle_policy` (the env's scripted
expert), :func:`random_policy` (a random legal reply), or a model that reads
``env.observe(agent)`` and writes its reply.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from turnrl.envs.multi.protocol import MultiAgentEnv
from turnrl.envs.protocol import HasActionSampler, HasOracle
from turnrl.types import Message

Policy = Callable[[MultiAgentEnv, str], str]
"""``(env, agent) -> reply``: the reply of ``agent``, whose turn it is."""


def oracle_policy(env: MultiAgentEnv, agent: str) -> str:
    """The env's scripted expert (``spec.has_oracle``)."""
    if not env.spec.has_oracle or not isinstance(env, HasOracle):
        raise TypeError(f"env {env.spec.id!r} has no oracle (spec.has_oracle is false)")
    action = env.oracle_action()
    if action is None:
        raise RuntimeError(f"env {env.spec.id!r}: oracle_action() returned None for "
                           f"{agent!r}, whose turn it is")
    return action


def random_policy(rng: random.Random) -> Policy:
    """A random legal reply from ``env.sample_action(rng)``."""
    def policy(env: MultiAgentEnv, agent: str) -> str:
        if not isinstance(env, HasActionSampler):
            raise TypeError(f"env {env.spec.id!r} has no sample_action(rng)")
        return env.sample_action(rng)
    return policy


@dataclass
class MultiEpisode:
    """One episode: each agent's return, outcome (``infos[agent]["outcome"]`` at its last
    step, ``None`` if the env gave none), turns, invalid replies and conversation."""

    seed: int | None
    returns: dict[str, float]
    outcomes: dict[str, str | None]
    turns: dict[str, int]
    invalid_actions: dict[str, int]
    conversations: dict[str, list[Message]] = field(default_factory=dict)
    steps: int = 0
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)


def play_episode(env: MultiAgentEnv, policies: Mapping[str, Policy], *,
                 seed: int | None = None) -> MultiEpisode:
    """Play one episode of ``env`` from ``seed``, each agent replying with its policy.

    Raises ``KeyError`` naming an agent without a policy, and ``RuntimeError`` when the env
    does not end within ``spec.max_turns`` steps."""
    agents = list(env.spec.agents)
    missing = [a for a in agents if a not in policies]
    if missing:
        raise KeyError(f"play_episode: no policy for agent(s) {missing}; the agents of "
                       f"{env.spec.id!r} are {agents}")
    info = env.reset(seed=seed)
    episode = MultiEpisode(seed, dict.fromkeys(agents, 0.0), dict.fromkeys(agents),
                           dict.fromkeys(agents, 0), dict.fromkeys(agents, 0), info=info)
    while env.agents:
        if episode.steps >= env.spec.max_turns:
            raise RuntimeError(f"env {env.spec.id!r} did not end within max_turns="
                               f"{env.spec.max_turns} steps (seed {seed})")
        agent = env.agent_selection
        result = env.step(policies[agent](env, agent))
        episode.steps += 1
        episode.turns[agent] += 1
        episode.invalid_actions[agent] += bool(result.infos.get(agent, {}).get("invalid_action"))
        for name in agents:
            episode.returns[name] += float(result.rewards.get(name, 0.0))
            outcome = result.infos.get(name, {}).get("outcome")
            if outcome is not None:
                episode.outcomes[name] = outcome
            episode.truncated |= bool(result.truncations.get(name))
    episode.conversations = {a: env.observe(a) for a in agents}
    return episode


def play_terminal(env: MultiAgentEnv, *, seed: int, human: str | None = None,
                  opponent: str = "oracle", read: Callable[[str], str] = input,
                  show: Callable[[str], None] = print) -> MultiEpisode:
    """One episode in the terminal (``turnrl play``): ``human`` (an agent's name) types its
    replies at a prompt and every other agent plays ``opponent`` (``"oracle"`` or
    ``"random"``); with ``human=None`` every agent does. What each agent is told is shown
    with the agent's name as it arrives. Raises ``ValueError`` for an unknown agent or
    opponent (naming the choices). An empty reply or the end of input stops the episode
    where it is (returned with the conversations so far and no returns)."""
    agents = list(env.spec.agents)
    if human is not None and human not in agents:
        raise ValueError(f"--as {human!r}: {env.spec.id} has agents {', '.join(agents)}")
    scripted = _scripted(env, seed, opponent)
    screen = _Screen(env, human, show)

    def person(_env: MultiAgentEnv, agent: str) -> str:
        screen.update()
        try:
            reply = read(f"{agent} > ")
        except EOFError:
            reply = ""
        if not reply.strip():
            raise _Stopped
        return reply

    def machine(env_: MultiAgentEnv, agent: str) -> str:
        screen.update()
        return scripted(env_, agent)

    try:
        episode = play_episode(env, {a: person if a == human else machine for a in agents},
                               seed=seed)
    except _Stopped:
        show("-- stopped")
        return MultiEpisode(seed, {}, {}, {}, {}, {a: env.observe(a) for a in agents})
    screen.update()
    show("-- " + ", ".join(f"{a}: {episode.outcomes[a] or 'no outcome'} (return "
                           f"{episode.returns[a]:g})" for a in agents))
    return episode


def _scripted(env: MultiAgentEnv, seed: int, opponent: str) -> Policy:
    choices: dict[str, Policy] = {"random": random_policy(random.Random(seed))}
    if env.spec.has_oracle:
        choices["oracle"] = oracle_policy
    if opponent not in choices:
        raise ValueError(f"--opponent {opponent!r}: choose one of {', '.join(choices)} for "
                         f"{env.spec.id}")
    return choices[opponent]


class _Screen:
    """Shows each agent's new messages (a person's own replies, typed, are not echoed)."""

    def __init__(self, env: MultiAgentEnv, human: str | None,
                 show: Callable[[str], None]) -> None:
        self.env, self.human, self.show = env, human, show
        self.shown = dict.fromkeys(env.spec.agents, 0)

    def update(self) -> None:
        for agent, count in self.shown.items():
            conversation = self.env.observe(agent)
            for message in conversation[count:]:
                if message["role"] != "assistant" or agent != self.human:
                    self.show(f"[{agent} | {message['role']}] {message['content']}")
            self.shown[agent] = len(conversation)


class _Stopped(Exception):
    """The person at the prompt ended the episode."""
