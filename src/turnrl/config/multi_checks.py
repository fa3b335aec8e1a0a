"""``multi.*`` checked against a multi-agent env before a run starts (docs/multi_agent.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from turnrl import envs
from turnrl.config.errors import ConfigError
from turnrl.config.schema import Config

PLAYERS = ("main", "oracle", "random", "frozen", "pool")
"""Who may play an agent of a multi-agent env (``multi.agents``)."""


def check_multi(cfg: Config, env: Any) -> None:
    """``multi.*`` against the env: agents it has, players it supports (an oracle, random
    replies), at least one agent the run trains, and the features multi-agent runs do not
    have yet (Ray workers, asynchronous training)."""
    agents = list(env.spec.agents)
    m, fail = cfg.multi, _fail(cfg)

    if not agents:
        if m.agents:
            raise fail("multi.agents", f"{cfg.env.id!r} is an env of one agent; multi.agents "
                       "maps the agents of a multi-agent env (tictactoe-v0, ...): remove it")
        if m.policies:
            raise fail("multi.policies", f"{cfg.env.id!r} is an env of one agent, played by "
                       "main; separate policies play the agents of a multi-agent env or answer "
                       "an agent program's calls by model name: remove it")
        return
    can = {"main": True, "oracle": env.spec.has_oracle,
           "random": isinstance(env, envs.HasActionSampler), "frozen": True, "pool": True,
           **dict.fromkeys(m.policies, True), **dict.fromkeys(m.frozen_models, True)}
    _check_policies(cfg, agents, fail)
    _check_frozen_models(cfg, fail)
    _check_players(cfg, agents, can, fail)
    if m.step_keys == "state" and not env.spec.has_state_key:
        raise fail("multi.step_keys", f"{cfg.env.id} declares no state keys; use turn (the "
                   "agent and its turn number) or none")
    if all(m.agents.get(a, "main") != "main" for a in agents):
        raise fail("multi.agents", f"no agent of {cfg.env.id} is played by main, so nothing "
                   "would be trained; leave at least one agent to main")
    _check_seatings(cfg, agents, can, fail)
    for opponent in m.eval_opponents:
        if opponent not in ("self", "random", "oracle", "frozen", *m.frozen_models):
            raise fail("multi.eval_opponents", f"{opponent!r} is not an opponent; choose from "
                       f"self, random, oracle, frozen{''.join(', ' + n for n in m.frozen_models)}"
                       " (a frozen model is named in multi.frozen_models first)")
        if opponent != "self" and not can[opponent]:
            raise fail("multi.eval_opponents", f"{cfg.env.id} has no {opponent} player; "
                       f"drop {opponent!r}")
    frozen = {p for p in [*m.agents.values(), *m.eval_opponents,
                          *(p for seating in m.seatings for p in seating.values())]
              if p in ("frozen", "pool", *m.frozen_models)}
    if frozen and cfg.rollout.engine != "hf":
        raise fail("rollout.engine", f"the players {sorted(frozen)} of multi.* run on engines "
                   "of their own, which only rollout.engine=hf starts so far")
    for key, on, what in (("distributed.backend", cfg.distributed.backend != "none",
                           "Ray workers"),
                          ("train.mode", cfg.train.mode != "sync", "asynchronous training"),
                          ("agent.entry_point", cfg.agent.entry_point is not None,
                           "agent programs"),
                          ("rollout.max_turns", cfg.rollout.max_turns is not None,
                           "a cap on turns"),
                          ("eval.max_turns", cfg.eval.max_turns is not None, "a cap on turns")):
        if on:
            raise fail(key, f"multi-agent envs ({cfg.env.id}) do not run with {what} yet: "
                       "leave it at its default")




def _fail(cfg: Config) -> Callable[[str, str], ConfigError]:
    def fail(key: str, message: str) -> ConfigError:
        where = cfg.origin_of(key)
        return ConfigError(f"{where + ': ' if where else ''}{key}: {message}")

    return fail


def check_policy_names(cfg: Config) -> None:
    """``multi.policies`` of an env run or an agent program: names that are not players (nor
    the agent program's ``agent.model_name``), each once, and the features separate policies
    do not run with yet."""
    fail, names = _fail(cfg), cfg.multi.policies
    taken = (*PLAYERS, cfg.agent.model_name) if cfg.agent.entry_point else PLAYERS
    for name in names:
        if name in taken or not name.isidentifier():
            raise fail("multi.policies", f"{name!r} cannot name a policy: use a word of letters, "
                       f"digits and _ other than {', '.join(taken)}")
    if len(set(names)) < len(names):
        raise fail("multi.policies", f"{names} names a policy twice; list each once")
    for key, on, what in (("rollout.engine", cfg.rollout.engine != "hf", "engines but hf"),
                          ("alarms.on_alarm", cfg.alarms.on_alarm == "rollback", "rollbacks")):
        if names and on:
            raise fail(key, f"separate policies (multi.policies) do not run with {what} yet: "
                       "leave it at its default")


def _check_policies(cfg: Config, agents: list[str],
                    fail: Callable[[str, str], ConfigError]) -> None:
    """``multi.policies`` of a multi-agent env: good names (:func:`check_policy_names`), each
    played by an agent."""
    names = cfg.multi.policies
    check_policy_names(cfg)
    unplayed = [p for p in names if p not in cfg.multi.agents.values()]
    if unplayed:
        raise fail("multi.policies", f"no agent of multi.agents is played by {unplayed}, so "
                   f"they would never be trained; give each an agent of {cfg.env.id} (its "
                   f"agents are {', '.join(agents)}), e.g. multi.agents.{agents[-1]}="
                   f"{unplayed[0]}, or remove them")


def _check_frozen_models(cfg: Config, fail: Callable[[str, str], ConfigError]) -> None:
    """``multi.frozen_models``: names free of the other players', each a model dir here."""
    from pathlib import Path

    for name, path in cfg.multi.frozen_models.items():
        key = f"multi.frozen_models.{name}"
        if name in PLAYERS or name in cfg.multi.policies or not name.isidentifier():
            raise fail(key, f"{name!r} cannot name a frozen model: use a word of letters, "
                       f"digits and _ other than {', '.join([*PLAYERS, *cfg.multi.policies])}")
        folder = Path(path).expanduser()
        if not (folder / "config.json").is_file() and \
                not (folder / "adapter_config.json").is_file():
            raise fail(key, f"{path!r} is not a model dir (no config.json or "
                       "adapter_config.json); give a checkpoint (RUN/checkpoints/step_<n>) or "
                       "a saved model dir")


def _check_players(cfg: Config, agents: list[str], can: dict[str, bool],
                   fail: Callable[[str, str], ConfigError], seating: dict[str, str] | None = None,
                   key: str = "multi.agents") -> None:
    """Each agent of ``seating`` (``multi.agents`` by default, under ``key``) one of the env's,
    each player one it can have."""
    for agent, player in (cfg.multi.agents if seating is None else seating).items():
        if agent not in agents:
            raise fail(f"{key}.{agent}", f"{cfg.env.id} has no agent {agent!r}; its "
                       f"agents are {', '.join(agents)}")
        named = [*cfg.multi.policies, *cfg.multi.frozen_models]
        if player not in PLAYERS and player not in named:
            raise fail(f"{key}.{agent}", f"{player!r} is not a player; choose one of "
                       f"{', '.join([*PLAYERS, *named])} (a separate policy is named in "
                       "multi.policies first, a frozen model in multi.frozen_models)")
        if not can[player]:
            raise fail(f"{key}.{agent}", f"{cfg.env.id} has no {player} player (no "
                       f"{'oracle_action' if player == 'oracle' else 'sample_action'})")


def _check_seatings(cfg: Config, agents: list[str], can: dict[str, bool],
                    fail: Callable[[str, str], ConfigError]) -> None:
    """``multi.seatings``: each a seating of the env's agents with main in one seat at least,
    and no separate policies (their seats are multi.agents')."""
    seatings = cfg.multi.seatings
    if seatings and cfg.multi.policies:
        raise fail("multi.seatings", "seatings do not run with separate policies "
                   "(multi.policies) yet: seat them with multi.agents and leave "
                   "multi.seatings empty")
    for index, seating in enumerate(seatings):
        key = f"multi.seatings[{index}]"
        _check_players(cfg, agents, can, fail, seating, key)
        if all(seating.get(a, "main") != "main" for a in agents):
            raise fail(key, f"{seating} seats no agent of {cfg.env.id} with main, so its "
                       "groups would train nothing; leave at least one agent to main")
