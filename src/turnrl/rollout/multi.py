"""Playing multi-agent envs (``turnrl.envs.multi``) with a policy per agent: the token ledger
of each model-played agent, one trajectory per agent that a trained policy played.

Each agent of ``spec.agents`` is played by a *seat*: a model (a name of ``engines``: the
run's policy, a frozen copy of it, ...) or a script (``"oracle"``: the env's scripted expert;
``"random"``: a random legal reply). A model-played agent has a ledger of its own: before each
of its turns the runner appends what it was told since its last reply (its conversation,
``env.observe(agent)``, only grows) and samples its reply from its seat's engine. So a policy
only ever trains on the tokens it sampled itself, in its own context: two agents played by one
shared model (self-play) give two trajectories, each with the other agent's moves as text in
its prompt, never as trained tokens.

Rewards: an agent's reward at every step (anyone's) is credited to its last reply before it
(its turn reward), so a game's outcome lands on each agent's last turn. Group ids: with
``role_groups`` (the default), the trajectories of agent ``k`` of task group ``g`` get group
id ``g * len(spec.agents) + k``, so a group baseline compares an agent only with the same
agent on the same task (role-conditioned advantages, as in SPIRAL; Liu et al. 2025).

Step keys (``step_keys``) give each turn of an agent a state id for step-level grouping (the
``gigpo`` estimator): ``"state"`` hashes the agent with ``env.state_key()`` before its turn
(envs that declare state keys: the same agent in the same position), ``"turn"`` hashes the
agent with its turn number (AT-GRPO's grouping by agent and turn; Zhao et al. 2025),
``"none"`` records none.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

from transformers import PreTrainedTokenizerBase

from turnrl.envs.multi.protocol import MultiAgentEnv, MultiStepResult
from turnrl.envs.protocol import HasActionSampler, HasOracle, HasStateKey
from turnrl.eval.tool_use import count_tool_use
from turnrl.models.chat import TemplateLedger
from turnrl.rollout.engine import Engine, SamplingParams
from turnrl.rollout.runner import stable_hash
from turnrl.types import EpisodeCounts, Trajectory

SCRIPTS = ("oracle", "random")
"""Seats that are scripts, not models."""
WINNING = ("win", "success")
"""Outcomes that count as an agent's success."""
StepKeys = Literal["none", "state", "turn"]


@dataclasses.dataclass
class _Seat:
    """One agent's part of an episode."""

    agent: str
    player: str  # a model (an engines key) or a script
    ledger: TemplateLedger | None  # model-played agents only
    seen: int = 0  # messages of its conversation already in its ledger
    turn_rewards: list[float] = dataclasses.field(default_factory=list)
    early_reward: float = 0.0  # rewards before its first reply (credited to that reply)
    counts: EpisodeCounts = dataclasses.field(default_factory=EpisodeCounts)
    state_keys: list[int] = dataclasses.field(default_factory=list)  # one per turn
    outcome: str | None = None
    terminated: bool = False
    truncated: bool = False


class MultiRunner:
    """Plays episodes of a multi-agent env; ``collect`` keeps the runner protocol of the
    single-agent :class:`~turnrl.rollout.runner.Runner` (``turnrl.eval.evaluate`` and the
    collector use either).

    Args:
        engines: model name → the engine that samples its replies.
        tokenizer: renders each agent's messages with its chat template.
        params: sampling parameters of every model turn.
        seats: agent → its player: a key of ``engines`` or one of :data:`SCRIPTS`.
        trained: the players whose agents' trajectories are returned (the others play but
            are not trained on).
        max_context_tokens: an agent whose next prompt would not fit ends the episode
            (truncated for every agent).
        sampling_seed: derive each request's seed from (this, the task seed, the episode's
            index in its group, the agent, the turn), as the single-agent runner does.
        role_groups: group ids per agent and task (see the module docstring).
        step_keys: the state id of each turn (see the module docstring).
    """

    def __init__(self, engines: Mapping[str, Engine], tokenizer: PreTrainedTokenizerBase,
                 params: SamplingParams, *, seats: Mapping[str, str],
                 trained: Sequence[str], max_context_tokens: int = 2048,
                 sampling_seed: int | None = None, role_groups: bool = True,
                 step_keys: StepKeys = "none") -> None:
        unknown = sorted({p for p in seats.values() if p not in engines and p not in SCRIPTS})
        if unknown:
            raise ValueError(f"MultiRunner: seats played by {unknown}, which are neither "
                             f"models ({sorted(engines)}) nor scripts {SCRIPTS}")
        self.engines, self.tokenizer, self.params = dict(engines), tokenizer, params
        self.seats, self.trained = dict(seats), set(trained)
        self.max_context_tokens, self.sampling_seed = max_context_tokens, sampling_seed
        self.role_groups, self.step_keys = role_groups, step_keys
        self._sessions = 0

    def collect(self, make_env: Callable[[], Any], seeds: Sequence[int], group_size: int, *,
                first_group_id: int = 0, on_done: Callable[[], None] | None = None,
                group_ids: Sequence[int] | None = None) -> list[Trajectory]:
        """``group_size`` episodes per task seed; the trained agents' trajectories, seed by
        seed, episode by episode, in seat order (``on_done()`` as each episode ends). Seed
        ``i``'s group is ``first_group_id + i``, or ``group_ids[i]`` when given."""
        groups = list(group_ids) if group_ids is not None else [
            first_group_id + i for i in range(len(seeds))]
        jobs = [(seed, groups[i], member) for i, seed in enumerate(seeds)
                for member in range(group_size)]

        async def play(seed: int, group: int, member: int) -> list[Trajectory]:
            env = make_env()
            try:
                return await self.run_episode(env, seed, group, member=member)
            finally:
                env.close()
                if on_done is not None:
                    on_done()

        async def gather() -> list[list[Trajectory]]:
            return list(await asyncio.gather(*(play(*job) for job in jobs)))

        return [t for episode in asyncio.run(gather()) for t in episode]

    async def run_episode(self, env: MultiAgentEnv, seed: int, group_id: int, *,
                          member: int = 0) -> list[Trajectory]:
        """One episode; the trajectories of its trained agents that replied at least once,
        in seat order."""
        agents = list(env.spec.agents)
        missing = [a for a in agents if a not in self.seats]
        if missing:
            raise ValueError(f"MultiRunner: no seat for agent(s) {missing} of {env.spec.id}")
        seats = {a: _Seat(a, self.seats[a], None if self.seats[a] in SCRIPTS else
                          TemplateLedger(self.tokenizer)) for a in agents}
        rng = random.Random(stable_hash((self.sampling_seed, seed, member, "scripts")))
        error: str | None = None
        self._sessions += 1
        session = f"multi-{self._sessions}"
        try:
            env.reset(seed=seed)
            for _ in range(env.spec.max_turns):
                if not env.agents:
                    break
                agent = env.agent_selection
                key = self._step_key(env, seats[agent])
                action = await self._reply(env, seats[agent], seed, member, rng, session)
                if action is None:  # its prompt no longer fits: everyone is cut off here
                    break
                seats[agent].turn_rewards.append(0.0)
                if key is not None:
                    seats[agent].state_keys.append(key)
                _credit(seats, env.step(action), agent)
                _record_reply(env, seats[agent], action)
            for seat in seats.values():  # what each was told at the end ("You won."), untrained
                _read_rest(env, seat)
        except Exception as failure:  # this episode ends, the others go on
            error = (f"{env.spec.id} (seed {seed}): {type(failure).__name__}: {failure}; "
                     f"replay with turnrl play {env.spec.id} --seed {seed}")
        finally:
            for engine in self.engines.values():
                engine.end_session(session)
        # an agent that never replied (the other forfeited first) has nothing to train on
        return [self._trajectory(env, s, seed, group_id, index, error)
                for index, s in enumerate(seats.values())
                if s.player in self.trained and s.turn_rewards]

    def _step_key(self, env: MultiAgentEnv, seat: _Seat) -> int | None:
        if self.step_keys == "turn":
            return stable_hash((seat.agent, len(seat.turn_rewards)))
        if self.step_keys == "state":
            return stable_hash((seat.agent, cast(HasStateKey, env).state_key()))
        return None

    async def _reply(self, env: MultiAgentEnv, seat: _Seat, seed: int, member: int,
                     rng: random.Random, session: str) -> str | None:
        if seat.player == "oracle":
            action = cast(HasOracle, env).oracle_action()  # seats are checked at setup
            if action is None:
                raise RuntimeError(f"oracle_action() returned None for {seat.agent!r}")
            return str(action)
        if seat.player == "random":
            return str(cast(HasActionSampler, env).sample_action(rng))
        ledger = seat.ledger
        assert ledger is not None
        conversation = env.observe(seat.agent)
        told = conversation[seat.seen:]
        if any(m["role"] == "assistant" for m in told):
            raise RuntimeError(f"observe({seat.agent!r}) holds a reply the agent never gave")
        ledger.add_messages(told, turn=len(seat.turn_rewards) - 1, add_generation_prompt=False)
        seat.seen = len(conversation)
        full, header = ledger.delta([], add_generation_prompt=True)
        if len(ledger.token_ids) + len(header) + self.params.max_new_tokens > \
                self.max_context_tokens:
            seat.counts.context_overflow = 1
            return None
        turn = len(seat.turn_rewards)
        ledger.commit([], full, header, turn=turn - 1)
        params = self.params if self.sampling_seed is None else dataclasses.replace(
            self.params, seed=stable_hash((self.sampling_seed, seed, member, seat.agent, turn)))
        completion = await self.engines[seat.player].generate(
            ledger.token_ids, params, session=f"{session}/{seat.agent}")
        seat.counts.length_finishes += completion.finish_reason == "length"
        return ledger.add_sampled(completion.token_ids, completion.logprobs, turn=turn,
                                  eos_token_id=self.tokenizer.eos_token_id)

    def _trajectory(self, env: MultiAgentEnv, seat: _Seat, seed: int, group_id: int,
                    index: int, error: str | None) -> Trajectory:
        ledger = seat.ledger
        assert ledger is not None
        cut = not (seat.terminated or seat.truncated)  # out of context, or an error
        group = group_id * len(env.spec.agents) + index if self.role_groups else group_id
        return Trajectory(
            env_id=env.spec.id, seed=seed, group_id=group, messages=ledger.messages,
            token_ids=ledger.token_ids, loss_mask=ledger.loss_mask, logprobs=ledger.logprobs,
            turn_index=ledger.turn_index, turn_rewards=seat.turn_rewards,
            terminated=seat.terminated and error is None,
            truncated=seat.truncated or cut or error is not None,
            success=seat.outcome in WINNING and error is None, error=error,
            counts=seat.counts, agent=seat.agent, policy=seat.player,
            state_keys=list(seat.state_keys) if self.step_keys != "none" else None,
            info={"outcome": seat.outcome,
                  "seats": {a: p for a, p in self.seats.items() if a in env.spec.agents}})


def _credit(seats: Mapping[str, _Seat], result: MultiStepResult, acting: str) -> None:
    """Add the step's rewards to each agent's last turn and note who is done."""
    for agent, seat in seats.items():
        reward = float(result.rewards.get(agent, 0.0))
        if seat.turn_rewards:
            seat.turn_rewards[-1] += reward
        else:
            seat.early_reward += reward
        info = result.infos.get(agent, {})
        if agent == acting:
            seat.counts.invalid_actions += bool(info.get("invalid_action", False))
            count_tool_use(seat.counts, info)
        if info.get("outcome") is not None:
            seat.outcome = str(info["outcome"])
        seat.terminated |= bool(result.terminations.get(agent, False))
        seat.truncated |= bool(result.truncations.get(agent, False)) and not seat.terminated
        if seat.early_reward and seat.turn_rewards:
            seat.turn_rewards[0] += seat.early_reward
            seat.early_reward = 0.0


def _record_reply(env: MultiAgentEnv, seat: _Seat, action: str) -> None:
    """Account for the agent's reply in its conversation (its ledger has the tokens)."""
    if seat.ledger is None:
        return
    conversation = env.observe(seat.agent)
    reply = conversation[seat.seen] if len(conversation) > seat.seen else None
    if reply != {"role": "assistant", "content": action}:
        raise RuntimeError(f"observe({seat.agent!r}) does not hold its reply where it was "
                           "given (a conversation only grows)")
    seat.seen += 1


def _read_rest(env: MultiAgentEnv, seat: _Seat) -> None:
    """Append what ``seat``'s agent was told after its last reply to its ledger (context,
    never trained), so its transcript ends as the episode did."""
    if seat.ledger is None or not seat.turn_rewards:
        return
    told = env.observe(seat.agent)[seat.seen:]
    if told and not any(m["role"] == "assistant" for m in told):
        seat.ledger.add_messages(told, turn=len(seat.turn_rewards) - 1,
                                 add_generation_prompt=False)
        seat.seen += len(told)
