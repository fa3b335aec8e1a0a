"""``check_multi_env``: does a multi-agent env keep the contract of
``turnrl.envs.multi.protocol``?

    from turnrl.envs import make
    from turnrl.envs.multi import check_multi_env
    check_multi_env(make("tictactoe-v0"))

For each seed it plays an episode of invalid replies, one of random legal replies (when the
env has ``sample_action``) and one of the oracle's (when ``spec.has_oracle``), each twice,
and checks: ``agent_selection`` is a live agent; every step's dictionaries name every agent
and each reward lies in ``spec.reward_range``; a done agent leaves ``agents`` and never acts
again; each agent's conversation only grows, holds valid messages, and records each of its
replies as an ``assistant`` message; the episode ends within ``spec.max_turns`` steps; an
outcome is one of :data:`~turnrl.envs.multi.protocol.OUTCOMES`; and the same seed with the
same replies gives the same conversations and rewards. A failure raises
:class:`~turnrl.envs.checker.EnvCheckError` naming the env, the seed and the problem.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from turnrl.envs.checker import GARBAGE_ACTION, VALID_ROLES, EnvCheckError
from turnrl.envs.multi.protocol import OUTCOMES, MultiStepResult
from turnrl.envs.protocol import EnvSpec, HasActionSampler

Chooser = Callable[[Any], str]


def check_multi_env(env: Any, *, seeds: Sequence[int] = (0, 1, 2)) -> None:
    """Check ``env`` against the multi-agent contract; raise ``EnvCheckError`` on the first
    problem (see the module docstring)."""
    env_spec = getattr(env, "spec", None)
    if not isinstance(env_spec, EnvSpec):
        raise EnvCheckError(f"check_multi_env: {type(env).__name__} has no EnvSpec 'spec'")
    if not env_spec.agents:
        raise EnvCheckError(f"check_multi_env: {env_spec.id}: spec.agents is empty; a "
                            "multi-agent env names its agents (register(..., agents=[...])); "
                            "an env of one agent is checked by check_env")
    for method in ("reset", "observe", "step", "close"):
        if not callable(getattr(env, method, None)):
            raise EnvCheckError(f"check_multi_env: {env_spec.id}: no method {method}()")
    if env_spec.has_oracle != callable(getattr(env, "oracle_action", None)):
        raise EnvCheckError(f"check_multi_env: {env_spec.id}: spec.has_oracle is "
                            f"{env_spec.has_oracle} but oracle_action() is "
                            f"{'missing' if env_spec.has_oracle else 'defined'}")
    choosers: dict[str, Chooser] = {"invalid": lambda _env: GARBAGE_ACTION}
    if isinstance(env, HasActionSampler):
        choosers["random"] = _sampler()
    if env_spec.has_oracle:
        choosers["oracle"] = lambda e: e.oracle_action()
    for seed in seeds:
        for name, choose in choosers.items():
            first = _play(env, env_spec, seed, name, choose)
            again = _play(env, env_spec, seed, name, _replay(first["actions"]))
            if again != first:
                raise _error(env_spec, seed, f"{name} play: the same seed and replies gave "
                             "different conversations or rewards; draw every random choice "
                             "from a random.Random(seed) created in reset()")


def _sampler() -> Chooser:
    rng = random.Random(0)
    return lambda e: e.sample_action(rng)


def _replay(actions: list[str]) -> Chooser:
    replies = iter(actions)
    return lambda _env: next(replies)


def _error(env_spec: EnvSpec, seed: int, what: str) -> EnvCheckError:
    return EnvCheckError(f"check_multi_env: {env_spec.id} (seed={seed}): {what}")


def _play(env: Any, env_spec: EnvSpec, seed: int, name: str, choose: Chooser
          ) -> dict[str, Any]:
    """One episode; returns its replies, rewards and final conversations."""
    info = env.reset(seed=seed)
    if not isinstance(info, dict):
        raise _error(env_spec, seed, f"reset() returned {type(info).__name__}, not a dict "
                     "of episode info")
    agents = list(env_spec.agents)
    if list(env.agents) != agents:
        raise _error(env_spec, seed, f"after reset() agents is {list(env.agents)}, not "
                     f"spec.agents {agents}")
    seen = {a: _conversation(env, env_spec, seed, a, []) for a in agents}
    actions: list[str] = []
    rewards: list[dict[str, float]] = []
    done: set[str] = set()
    while env.agents:
        if len(actions) >= env_spec.max_turns:
            raise _error(env_spec, seed, f"{name} play did not end within max_turns="
                         f"{env_spec.max_turns} steps")
        agent = env.agent_selection
        if agent not in env.agents or agent in done:
            raise _error(env_spec, seed, f"agent_selection {agent!r} is not a live agent "
                         f"({list(env.agents)})")
        action = choose(env)
        if not isinstance(action, str):
            raise _error(env_spec, seed, f"the {name} reply is {type(action).__name__}, "
                         "not str")
        result = env.step(action)
        actions.append(action)
        _check_result(env_spec, seed, result, agents)
        rewards.append(dict(result.rewards))
        for other in agents:
            before = seen[other]
            seen[other] = _conversation(env, env_spec, seed, other, before)
            if other == agent and {"role": "assistant", "content": action} not in \
                    seen[other][len(before):]:
                raise _error(env_spec, seed, f"{agent}'s reply {action[:40]!r} is not in its "
                             "conversation as an assistant message after the step")
        done |= {a for a in agents if result.done(a)}
        if any(a in env.agents for a in done):
            raise _error(env_spec, seed, f"agents {sorted(done & set(env.agents))} are done "
                         "but still in env.agents")
    if done != set(agents):
        raise _error(env_spec, seed, f"agents is empty but {sorted(set(agents) - done)} were "
                     "never terminated or truncated")
    return {"actions": actions, "rewards": rewards, "conversations": seen}


def _check_result(env_spec: EnvSpec, seed: int, result: Any, agents: list[str]) -> None:
    if not isinstance(result, MultiStepResult):
        raise _error(env_spec, seed, f"step() returned {type(result).__name__}, not a "
                     "MultiStepResult")
    low, high = env_spec.reward_range
    for field_name in ("rewards", "terminations", "truncations"):
        table = getattr(result, field_name)
        if set(table) != set(agents):
            raise _error(env_spec, seed, f"step().{field_name} has keys {sorted(table)}, not "
                         f"every agent {agents}")
    for agent, reward in result.rewards.items():
        if not isinstance(reward, (int, float)) or isinstance(reward, bool) or \
                not math.isfinite(reward) or not low <= reward <= high:
            raise _error(env_spec, seed, f"{agent}'s reward {reward!r} is not a finite number "
                         f"in spec.reward_range {env_spec.reward_range}")
    for agent, info in result.infos.items():
        outcome = info.get("outcome") if isinstance(info, dict) else None
        if outcome is not None and outcome not in OUTCOMES:
            raise _error(env_spec, seed, f"{agent}'s outcome {outcome!r} is not one of "
                         f"{OUTCOMES}")


def _conversation(env: Any, env_spec: EnvSpec, seed: int, agent: str,
                  before: list[Any]) -> list[Any]:
    messages = env.observe(agent)
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and m.get("role") in VALID_ROLES
            and isinstance(m.get("content"), str) for m in messages):
        raise _error(env_spec, seed, f"observe({agent!r}) must return a list of messages "
                     f"with a role in {VALID_ROLES} and str content")
    if messages[:len(before)] != before:
        raise _error(env_spec, seed, f"observe({agent!r}) changed a message it had shown: a "
                     "conversation only grows")
    return [dict(m) for m in messages]
