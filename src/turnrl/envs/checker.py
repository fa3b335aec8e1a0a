"""``check_env``: does an env keep the contract of ``turnrl.envs.protocol``?

Run it on every env you write (the test suite runs it over every registered id)::

    from turnrl.envs import check_env, make
    check_env(make("frozenlake-v0"))

For each seed it plays an episode of invalid replies twice and, when ``spec.has_oracle``, an
episode following ``oracle_action()`` twice, and checks types, reward bounds, the turn
budget, same-seed determinism and the capabilities: the spec declares exactly those the env
implements (``CAPABILITIES``), and what they return. A failure raises ``EnvCheckError`` (an
``AssertionError``) naming the env id, the seed and what was wrong.
"""

from __future__ import annotations

import copy
import functools
import math
import numbers
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from turnrl.envs.protocol import CAPABILITIES, Env, EnvSpec
from turnrl.types import StepResult

GARBAGE_ACTION = "%%%garbage%%%"
VALID_ROLES = ("system", "user", "assistant", "tool")
SEEDING_HINT = (
    "draw every random choice from a random.Random(seed) created in reset(), never from the "
    "global random/numpy RNG or the clock"
)

R = TypeVar("R")


class EnvCheckError(AssertionError):
    """An env broke the contract; the message names the env id, the seed and the problem."""


@dataclass
class _Context:
    env: Any
    env_id: str
    seed: int | None = None

    def error(self, what: str) -> EnvCheckError:
        where = self.env_id if self.seed is None else f"{self.env_id} (seed={self.seed})"
        return EnvCheckError(f"check_env: {where}: {what}")

    def call(self, what: str, fn: Callable[[], R], hint: str = "") -> R:
        try:
            return fn()
        except EnvCheckError:
            raise
        except Exception as exc:
            raise self.error(f"{what} raised {type(exc).__name__}: {exc}{hint}") from exc


@dataclass
class _Episode:
    transcript: list[Any] = field(default_factory=list)  # reset messages, then one row per step
    state_keys: list[Hashable] = field(default_factory=list)
    last: StepResult | None = None

    @property
    def ended(self) -> bool:
        return self.last is not None and (self.last.terminated or self.last.truncated)


def check_env(env: Env, *, seeds: Sequence[int] = (0, 1, 2), max_steps: int | None = None) -> None:
    """Check ``env`` against the env contract; raise ``EnvCheckError`` on the first problem.

    ``max_steps`` caps the steps of each probe episode (default ``spec.max_turns``); with a
    cap below ``max_turns`` the "episode ends within max_turns" check is skipped.
    """
    env_spec = _check_interface(env)
    limit = env_spec.max_turns if max_steps is None else min(max_steps, env_spec.max_turns)
    for seed in seeds:
        ctx = _Context(env, env_spec.id, seed)
        garbage = [_play(ctx, env_spec, _garbage_policy, limit) for _ in range(2)]
        _check_same(ctx, garbage, f"replying {GARBAGE_ACTION!r} every turn")
        if env_spec.has_oracle:
            oracle = [_play(ctx, env_spec, _oracle_policy(ctx), limit) for _ in range(2)]
            _check_same(ctx, oracle, "following oracle_action()")
            _check_oracle_finishes(ctx, oracle[0])
    ctx = _Context(env, env_spec.id)
    result = ctx.call("reset() without a seed", lambda: env.reset())
    _check_reset(ctx, result)


def _check_interface(env: Any) -> EnvSpec:
    env_spec = getattr(env, "spec", None)
    if not isinstance(env_spec, EnvSpec):
        raise EnvCheckError(
            f"check_env: {type(env).__name__}: env.spec must be an EnvSpec, got {env_spec!r}; "
            "build the env with turnrl.envs.make(id) or set self.spec in __init__"
        )
    ctx = _Context(env, env_spec.id)
    if env_spec.agents:
        raise ctx.error(f"is a multi-agent env (agents {list(env_spec.agents)}): check it with "
                        "turnrl.envs.multi.check_multi_env (turnrl check-env does)")
    for method in ("reset", "step", "close"):
        if not callable(getattr(env, method, None)):
            raise ctx.error(f"has no {method}() method (see turnrl.envs.Env)")
    implemented = {method for method in CAPABILITIES.values()
                   if callable(getattr(env, method, None))}
    for name, method in CAPABILITIES.items():  # declared but missing: the worse mistake first
        if method in env_spec.capabilities and method not in implemented:
            raise ctx.error(f"spec.{name} is {getattr(env_spec, name)!r} but the env has no "
                            f"{method}() method")
    for name, method in CAPABILITIES.items():
        if method in implemented and method not in env_spec.capabilities:
            raise ctx.error(_undeclared(env_spec, name, method))
    return env_spec


def _undeclared(env_spec: EnvSpec, name: str, method: str) -> str:
    declared = "is empty" if name == "tools" else f"is {getattr(env_spec, name)!r}"
    fix = "tools=[...] (the tool names)" if name == "tools" else f"{name}=True"
    return (f"the env implements {method}() but spec.{name} {declared}, so nothing calls it; "
            f"set {fix} in its EnvSpec (or in register(...)), or remove the method")


def _garbage_policy(ctx: _Context, turn: int) -> str:
    return GARBAGE_ACTION


def _oracle_policy(ctx: _Context) -> Callable[[_Context, int], str]:
    def policy(ctx: _Context, turn: int) -> str:
        action = ctx.call(f"oracle_action() at turn {turn}", ctx.env.oracle_action)
        if not isinstance(action, str):
            raise ctx.error(
                f"oracle_action() returned {action!r} at turn {turn} of an unfinished episode; "
                "it must return the expert's next action as a str"
            )
        return action

    return policy


def _play(
    ctx: _Context, env_spec: EnvSpec, policy: Callable[[_Context, int], str], limit: int
) -> _Episode:
    env, episode = ctx.env, _Episode()
    result = ctx.call(f"reset(seed={ctx.seed})", lambda: env.reset(seed=ctx.seed, options=None))
    messages, _info = _check_reset(ctx, result)
    episode.transcript.append(copy.deepcopy(messages))
    _check_tool_schemas(ctx, env_spec)
    _record_state(ctx, env_spec, episode)
    for turn in range(1, limit + 1):
        action = policy(ctx, turn)
        hint = ""
        if action == GARBAGE_ACTION:
            hint = "; an invalid action must return an observation saying what was wrong"
        step = ctx.call(f"step({action!r}) at turn {turn}",
                        functools.partial(env.step, action), hint)
        _check_step(ctx, env_spec, step, action, turn)
        episode.last = step
        episode.transcript.append(
            (action, copy.deepcopy(step.observation), step.reward, step.terminated, step.truncated)
        )
        if episode.ended:
            return episode
        _record_state(ctx, env_spec, episode)
    if limit == env_spec.max_turns:
        raise ctx.error(
            f"the episode neither terminated nor truncated within spec.max_turns={limit} steps; "
            "set truncated=True when the turn budget runs out"
        )
    return episode


def _check_tool_schemas(ctx: _Context, env_spec: EnvSpec) -> None:
    if not env_spec.tools:
        return
    schemas = ctx.call("tool_schemas()", ctx.env.tool_schemas)
    if not isinstance(schemas, list) or not all(isinstance(s, dict) for s in schemas):
        raise ctx.error(
            f"tool_schemas() must return a list of JSON schema dicts ([] when the tools are "
            f"described in the prompt), got {schemas!r:.200}"
        )


def _record_state(ctx: _Context, env_spec: EnvSpec, episode: _Episode) -> None:
    if env_spec.has_privileged_info:
        text = ctx.call("privileged_info()", ctx.env.privileged_info)
        if not isinstance(text, str):
            raise ctx.error(f"privileged_info() must return a str, got {type(text).__name__}")
    if not env_spec.has_state_key:
        return
    key = ctx.call("state_key()", ctx.env.state_key)
    try:
        hash(key)
    except TypeError as exc:
        raise ctx.error(f"state_key() returned an unhashable {type(key).__name__}: {exc}") from exc
    episode.state_keys.append(key)


def _check_reset(ctx: _Context, result: Any) -> tuple[list[Any], dict[str, Any]]:
    if not isinstance(result, tuple) or len(result) != 2:
        raise ctx.error(f"reset() must return (messages, info), got {type(result).__name__}")
    messages, info = result
    _check_messages(ctx, messages, "reset() messages")
    if not messages:
        raise ctx.error("reset() returned no messages; the agent needs a prompt")
    if not isinstance(info, dict):
        raise ctx.error(f"reset() info must be a dict, got {type(info).__name__}")
    return messages, info


def _check_messages(ctx: _Context, messages: Any, what: str) -> None:
    if not isinstance(messages, list):
        raise ctx.error(f"{what} must be a list of messages, got {type(messages).__name__}")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ctx.error(f"{what}[{index}] must be a dict, got {type(message).__name__}")
        if message.get("role") not in VALID_ROLES:
            raise ctx.error(
                f"{what}[{index}] has role {message.get('role')!r}; use one of {VALID_ROLES}"
            )
        if not isinstance(message.get("content"), str):
            raise ctx.error(
                f"{what}[{index}] content must be a str, got {message.get('content')!r}"
            )


def _check_step(ctx: _Context, env_spec: EnvSpec, step: Any, action: str, turn: int) -> None:
    what = f"step({action!r}) at turn {turn}"
    if not isinstance(step, StepResult):
        raise ctx.error(f"{what} must return a StepResult, got {type(step).__name__}")
    _check_messages(ctx, step.observation, f"{what} observation")
    if action == GARBAGE_ACTION and not step.observation:
        raise ctx.error(f"{what} returned no observation; tell the agent what was wrong")
    _check_reward(ctx, env_spec, step.reward, what)
    for flag in ("terminated", "truncated"):
        value = getattr(step, flag)
        if not isinstance(value, bool):
            raise ctx.error(f"{what} {flag} must be a bool, got {type(value).__name__} {value!r}")
    if not isinstance(step.info, dict):
        raise ctx.error(f"{what} info must be a dict, got {type(step.info).__name__}")


def _check_reward(ctx: _Context, env_spec: EnvSpec, reward: Any, what: str) -> None:
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real):
        raise ctx.error(
            f"{what} reward must be a real number, got {type(reward).__name__} {reward!r}"
        )
    low, high = env_spec.reward_range
    if math.isnan(float(reward)) or not low <= float(reward) <= high:
        raise ctx.error(
            f"{what} reward {reward!r} is outside spec.reward_range={env_spec.reward_range}"
        )


def _check_same(ctx: _Context, episodes: list[_Episode], how: str) -> None:
    first, second = episodes
    rows = max(len(first.transcript), len(second.transcript))
    for index in range(rows):
        a = first.transcript[index] if index < len(first.transcript) else "<episode ended>"
        b = second.transcript[index] if index < len(second.transcript) else "<episode ended>"
        if a != b:
            where = "reset" if index == 0 else f"turn {index}"
            raise ctx.error(
                f"two episodes {how} from the same seed differ at {where}: "
                f"first {a!r}, then {b!r}; {SEEDING_HINT}"
            )
    if first.state_keys != second.state_keys:
        raise ctx.error(
            f"two episodes {how} from the same seed visited identical states but state_key() "
            f"differs: {first.state_keys!r} vs {second.state_keys!r}"
        )


def _check_oracle_finishes(ctx: _Context, episode: _Episode) -> None:
    if episode.last is None or not episode.ended:
        return  # capped by max_steps
    if not episode.last.terminated:
        raise ctx.error(
            f"following oracle_action() did not finish the task: the episode was truncated "
            f"after {len(episode.transcript) - 1} turns"
        )
