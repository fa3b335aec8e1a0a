"""A run on a multi-agent env (``multi.*``, docs/multi_agent.md): who plays each agent, the
SFT demonstrations of the agents the run's model plays, and evaluation against fixed
opponents.

``multi.agents`` maps agents to players: ``main`` (the run's model, trained; several agents on
``main`` is self-play with one shared model), a separate trained policy of ``multi.policies``,
``oracle``, ``random``, ``frozen`` or ``pool``. RL episodes are played by
:class:`~turnrl.rollout.multi.MultiRunner` and give one trajectory per agent a trained policy
played (``Trajectory.policy`` names it), so the rest of the loop (scoring, advantages, the
learner) is the one of every run, once per policy.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import torch

from turnrl import envs
from turnrl.config import Config
from turnrl.envs.multi.protocol import MultiAgentEnv
from turnrl.envs.protocol import HasActionSampler, HasOracle
from turnrl.eval.evaluate import evaluate, summarize
from turnrl.models.policy import resolve_dtype
from turnrl.rollout.engine import Engine, SamplingParams
from turnrl.rollout.multi import WINNING, MultiRunner
from turnrl.train.players import FROZEN, POOL, Players
from turnrl.train.progress import Progress
from turnrl.types import Message, Trajectory

MAIN = "main"


def seats(cfg: Config, agents: Sequence[str]) -> dict[str, str]:
    """Agent → player, ``main`` for the agents ``multi.agents`` does not list."""
    return {agent: cfg.multi.agents.get(agent, MAIN) for agent in agents}


def seating_of(cfg: Config, agents: Sequence[str], group: int) -> dict[str, str]:
    """Agent → player in RL task group ``group``: ``multi.seatings[group % len]`` where
    seatings are given (a league), else :func:`seats`."""
    league = cfg.multi.seatings
    chosen = league[group % len(league)] if league else cfg.multi.agents
    return {agent: chosen.get(agent, MAIN) for agent in agents}


def trained_seats(cfg: Config, agents: Sequence[str]) -> dict[str, str]:
    """Agent → its trained policy (``main`` or one of ``multi.policies``), for the agents a
    trained policy plays."""
    trained = {MAIN, *cfg.multi.policies}
    return {a: p for a, p in seats(cfg, agents).items() if p in trained}


def uses_players(cfg: Config) -> bool:
    """Whether the run has frozen players (``frozen``, ``pool`` or a model of
    ``multi.frozen_models``, to play or to meet in evaluation): then it keeps
    :class:`~turnrl.train.players.Players`."""
    league = [p for seating in cfg.multi.seatings for p in seating.values()]
    return any(p in (FROZEN, POOL, *cfg.multi.frozen_models)
               for p in [*cfg.multi.agents.values(), *cfg.multi.eval_opponents, *league])


def players_for(cfg: Config, run_dir: Path, tokenizer: Any, device: torch.device,
                engine_options: dict[str, Any]) -> Players | None:
    """The run's frozen players, when a multi-agent run has any (:func:`uses_players`)."""
    if cfg.agent.entry_point is not None or not envs.spec(cfg.env.id).agents or \
            not uses_players(cfg):
        return None
    return Players(run_dir, tokenizer, device=device,
                   dtype=resolve_dtype(cfg.model.dtype, device), engine_options=engine_options,
                   pool_every=cfg.multi.pool_every, pool_size=cfg.multi.pool_size,
                   seed=cfg.run.seed,
                   models={n: Path(p).expanduser() for n, p in cfg.multi.frozen_models.items()})


def multi_runner(cfg: Config, engine: Engine, tokenizer: Any, params: SamplingParams,
                 seat_map: dict[str, str], *, role_groups: bool | None = None,
                 players: Players | None = None,
                 policies: Mapping[str, Engine] | None = None) -> MultiRunner:
    """The runner of the run's multi-agent episodes, its model as ``main`` and each separate
    policy (``policies``: name → its engine) as itself; a seat of a frozen player
    (``frozen``, or a pool member's name) plays on that player's engine."""
    keys = cfg.multi.step_keys
    if keys == "auto":
        keys = "state" if envs.spec(cfg.env.id).has_state_key else "none"
    engines = {MAIN: engine, **(policies or {})}
    for player in set(seat_map.values()) - {*engines, "oracle", "random"}:
        if players is None:
            raise ValueError(f"seat {player!r} needs the run's frozen players")
        engines[player] = players.engine(player)
    return MultiRunner(engines, tokenizer, params, seats=seat_map,
                       trained=[MAIN, *(policies or {})],
                       max_context_tokens=cfg.rollout.max_context_tokens,
                       sampling_seed=cfg.run.seed,
                       role_groups=cfg.multi.role_groups if role_groups is None
                       else role_groups, step_keys=keys)


def demonstrations(make_env: Callable[[], Any], seeds: Sequence[int], seat_map: dict[str, str],
                   *, random_action_prob: float, train_random_actions: bool, seed: int,
                   player: str = MAIN) -> list[list[Message]]:
    """Each seed played with the env's oracle in every seat (a reply replaced by a random
    legal one with probability ``random_action_prob``, kept as context only, ``"weight":
    0``, unless ``train_random_actions``); the conversation of each agent ``player`` (a
    trained policy) plays is one demonstration, so it learns every role it will play."""
    rng = random.Random(seed)
    conversations: list[list[Message]] = []
    for task_seed in seeds:
        env = cast(MultiAgentEnv, make_env())
        try:
            if not env.spec.has_oracle:
                raise ValueError(f"env {env.spec.id!r} has no oracle to demonstrate; use "
                                 "sft.source=jsonl or sft.enabled=false")
            env.reset(seed=task_seed)
            random_replies: dict[str, set[int]] = {a: set() for a in env.spec.agents}
            for _ in range(env.spec.max_turns):
                if not env.agents:
                    break
                agent = env.agent_selection
                action = expert = cast(HasOracle, env).oracle_action()
                if action is None:
                    break
                if random_action_prob and rng.random() < random_action_prob and \
                        env.spec.demo_random_actions:
                    action = cast(HasActionSampler, env).sample_action(rng)
                    if action != expert and not train_random_actions:
                        random_replies[agent].add(len(env.observe(agent)))
                env.step(action)
            for agent, seated in seat_map.items():
                if seated == player:
                    conversations.append(_weighted(env.observe(agent), random_replies[agent]))
        finally:
            env.close()
    return conversations


def _weighted(conversation: list[Message], untrained: set[int]) -> list[Message]:
    out: list[Message] = []
    for index, message in enumerate(conversation):
        copied: Message = {"role": message["role"], "content": message["content"]}
        if index in untrained:
            copied["weight"] = 0
        out.append(copied)
    return out


def opponent_seats(opponent: str, agents: Sequence[str], trained: Mapping[str, str]
                   ) -> list[dict[str, str]]:
    """The seatings of an evaluation against ``opponent``, given ``trained`` (agent → the
    trained policy that plays it): ``self``, every agent its trained policy (``main`` where
    none); otherwise one trained agent at a time in its policy's hands, the rest
    ``opponent``."""
    if opponent == "self":
        return [{a: trained.get(a, MAIN) for a in agents}]
    return [{a: trained[a] if a == seat else opponent for a in agents} for seat in trained]


def outcome_rates(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """``success`` (a win or a cooperative success), ``win``, ``draw`` and ``loss``: the
    shares of the trajectories' outcomes (an agent's episode without an outcome counts in
    none)."""
    n = max(len(trajectories), 1)
    outcomes = [t.info.get("outcome") for t in trajectories]
    return {"success": sum(o in WINNING for o in outcomes) / n,
            "win": outcomes.count("win") / n, "draw": outcomes.count("draw") / n,
            "loss": outcomes.count("loss") / n}


def play_groups(cfg: Config, engine: Engine, tokenizer: Any, params: SamplingParams,
                make_env: Callable[[], Any], seeds: Sequence[int], first: int,
                players: Players | None, policies: Mapping[str, Engine] | None = None
                ) -> list[Trajectory]:
    """The RL episodes of task groups ``first, first + 1, ...`` (one per seed), each seated
    by :func:`seating_of`, the separate policies (``policies``: name → engine) in their
    seats: each group meets one pool member where an agent's player is ``pool``; main's
    games against a frozen player are rated."""
    agents = list(envs.spec(cfg.env.id).agents)
    plans: dict[tuple[tuple[str, str], ...], list[tuple[int, int]]] = {}
    for i, seed in enumerate(seeds):
        base = seating_of(cfg, agents, first + i)
        member = players.choose(first + i) if players is not None and POOL in base.values() \
            else None
        seat_map = {a: member if p == POOL and member else p for a, p in base.items()}
        plans.setdefault(tuple(seat_map.items()), []).append((first + i, seed))
    played: dict[int, list[Trajectory]] = {}
    for seating, groups in plans.items():
        seat_map = dict(seating)
        runner = multi_runner(cfg, engine, tokenizer, params, seat_map, players=players,
                              policies=policies)
        games = runner.collect(make_env, [seed for _, seed in groups], cfg.train.group_size,
                               group_ids=[group for group, _ in groups])
        for group, _ in groups:
            played[group] = []
        width = len(agents) if cfg.multi.role_groups else 1
        for trajectory in games:
            played[trajectory.group_id // width].append(trajectory)
        if players is not None and len(agents) == 2:
            opponents = [seat_map[next(a for a in agents if a != t.agent)] for t in games]
            rated = [(t, o) for t, o in zip(games, opponents, strict=True)
                     if t.policy == MAIN and o not in (MAIN, "oracle", "random",
                                                       *(policies or {}))]
            players.rate([t for t, _ in rated], [o for _, o in rated])
    return [t for group in sorted(played) for t in played[group]]


def evaluate_multi(cfg: Config, engine: Engine, tokenizer: Any, params: SamplingParams,
                   make_env: Callable[[], Any], agents: Sequence[str],
                   on_done: Callable[[], None] | None = None, players: Players | None = None,
                   policies: Mapping[str, Engine] | None = None
                   ) -> tuple[dict[str, float], list[Trajectory]]:
    """Held-out evaluation against each of ``multi.eval_opponents``: the main summary (of
    :func:`~turnrl.eval.evaluate.evaluate`) against the first, and ``vs_<opponent>/<rate>``
    (:func:`outcome_rates`) against each; with separate policies (``policies``: name →
    engine) also ``vs_<opponent>/<policy>/<rate>`` for each trained policy; the episodes of
    all of them."""
    e = cfg.eval
    seeds = range(cfg.env.eval_seed_start, cfg.env.eval_seed_start + e.episodes)
    trained = trained_seats(cfg, agents)
    summary: dict[str, float] = {}
    episodes: list[Trajectory] = []
    for index, opponent in enumerate(cfg.multi.eval_opponents):
        played: list[Trajectory] = []
        for seat_map in opponent_seats(opponent, agents, trained):
            runner = multi_runner(cfg, engine, tokenizer, params, seat_map, role_groups=False,
                                  players=players, policies=policies)
            _, trajectories = evaluate(runner, make_env, seeds,
                                       samples_per_task=e.samples_per_task, pass_k=e.pass_k,
                                       on_done=on_done)
            played += trajectories
        if index == 0:  # the headline: every seating against the first opponent
            summary.update(summarize(played, pass_k=e.pass_k))
        summary.update({f"vs_{opponent}/{k}": v for k, v in outcome_rates(played).items()})
        for policy in [MAIN, *(policies or {})] if policies else []:
            mine = [t for t in played if t.policy == policy]
            summary.update({f"vs_{opponent}/{policy}/{k}": v
                            for k, v in outcome_rates(mine).items()} if mine else {})
        episodes += played
    return summary, episodes


def run_eval(cfg: Config, engine: Engine, tokenizer: Any, params: SamplingParams,
             make_env: Callable[[], Any], agents: Sequence[str], progress: Progress,
             label: str, players: Players | None = None,
             policies: Mapping[str, Engine] | None = None
             ) -> tuple[dict[str, float], list[Trajectory]]:
    """:func:`evaluate_multi` with a progress bar and a one-line note of its results."""
    trained = trained_seats(cfg, agents)
    seatings = sum(len(opponent_seats(o, agents, trained)) for o in cfg.multi.eval_opponents)
    total = seatings * cfg.eval.episodes * cfg.eval.samples_per_task
    with progress.task(f"eval ({label})", total) as advance:
        summary, episodes = evaluate_multi(cfg, engine, tokenizer, params, make_env, agents,
                                           on_done=lambda: advance(""), players=players,
                                           policies=policies)
    progress.note(f"eval ({label}): " + ", ".join(
        f"vs {o} success {summary[f'vs_{o}/success']:.3f}" for o in cfg.multi.eval_opponents))
    return summary, episodes
