"""``GymEnv``: a Gymnasium env behind the turnrl ``Env`` protocol, built from a ``gym:`` id.

``make("gym:<id>", **kwargs)`` looks the id up in Gymnasium's own registry (see ``ids``). The
instance's ``spec.id`` is the turnrl form of the id, ``gym/<id lower-cased>`` (a namespace
``ns/Id`` becomes ``gym/ns.id``), and ``make`` accepts that form too, so
``make(env.spec.id, **env.spec.kwargs)`` rebuilds the env.
A transcript of ``gym:FrozenLake-v1`` (the escape codes of the ANSI rendering highlight the
agent's cell)::

    system:    Walk on a frozen lake from the start S to the goal G ... Valid actions: left (0),
               down (1), right (2), up (3). Reply with one action name or its number.
    user:      \\x1b[41mS\\x1b[0mFFF
               FHFH ...
    assistant: down
    user:        (Down)
               SFFF
               \\x1b[41mF\\x1b[0mHFH ...                reward 0.0

* **Observation**: the env's ANSI rendering (``render_mode="ansi"``) when it has one, else the
  observation as plain text (numbers rounded to 4 places); ``formatter(obs, info) -> str``
  replaces either. ``strip_ansi=True`` removes the escape codes, and with them whatever only
  colour shows (FrozenLake's agent, Taxi's taxi and stands: write a formatter for those).
  ``reset`` returns a system message (the task, from ``known.TASKS`` or ``instructions``, then
  the valid actions) and the first observation.
* **Actions**: a name (case-insensitive) or the action's number, e.g. ``"down"`` or ``"1"``.
  Names come from ``action_names``, else ``known.ACTION_NAMES``, else only numbers are
  accepted. Anything else is an invalid action: the env is not stepped, the observation says
  ``Invalid action.`` and lists the valid actions, the reward is ``invalid_reward`` (0 by
  default), ``info["invalid_action"]`` is True, and the turn counts.
* **Rewards, ``terminated``, ``truncated``**: Gymnasium's, passed through; ``truncated`` is
  also set when ``max_turns`` turns (valid or not) have been played. ``max_turns`` defaults to
  the env's ``max_episode_steps`` (its TimeLimit), else ``DEFAULT_MAX_TURNS``.
* **``info["success"]``**: ``success_fn(obs, reward, terminated, info)`` after each env step,
  else ``known.SUCCESS_FNS``, else a terminal step with a positive reward.
  ``info["gym_info"]`` holds Gymnasium's info dict.
* **Seeding**: ``reset(seed=...)`` passes the seed to ``gymnasium.Env.reset``.
* **Capabilities**, declared on the spec and present on the instance only when declared:
  ``state_key()`` (``has_state_key``: the observation, when the observation space is
  discrete) and ``oracle_action()`` (``has_oracle``: when the env has a deterministic tabular
  model ``P``, see ``oracle``); ``sample_action(rng)`` always. ``spec.reward_range`` is the
  range of the rewards in ``P``, else ``known.REWARD_RANGES``, else unbounded (override with
  ``reward_range``); it always includes ``invalid_reward``.
"""

from __future__ import annotations

import numbers
import random
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from turnrl.envs.gym import known, oracle
from turnrl.envs.gym.ids import GYM_PREFIX, import_gymnasium, resolve_gym_id, turnrl_env_id
from turnrl.envs.protocol import EnvSpec
from turnrl.types import Message, StepResult

DEFAULT_MAX_TURNS = 100  # the turn budget of an env without a TimeLimit
INVALID = "Invalid action."
ADAPTER_OPTIONS = (
    "formatter",
    "action_names",
    "success_fn",
    "instructions",
    "strip_ansi",
    "max_turns",
    "reward_range",
    "invalid_reward",
)

Formatter = Callable[[Any, dict[str, Any]], str]

# Why an instance lacks a capability method its spec does not declare.
_UNDECLARED = {
    "oracle_action": "spec.has_oracle is False: only envs with a deterministic tabular model P "
                     "(e.g. FrozenLake with is_slippery=False) have an oracle",
    "state_key": "spec.has_state_key is False: only envs with discrete observations have one",
}


class GymEnv:
    """A Gymnasium env behind the turnrl ``Env`` protocol (see the module docstring).

    ``gym_id`` is Gymnasium's id (``"FrozenLake-v1"``); every keyword argument that is not an
    adapter option (``ADAPTER_OPTIONS``) goes to ``gymnasium.make``.
    """

    # Capabilities: bound in __init__ only where the spec declares them (has_oracle,
    # has_state_key), so that what the instance has always matches what its spec says.
    oracle_action: Callable[[], str | None]
    state_key: Callable[[], Hashable]

    def __init__(
        self,
        gym_id: str,
        *,
        formatter: Formatter | None = None,
        action_names: Sequence[str] | None = None,
        success_fn: known.SuccessFn | None = None,
        instructions: str | None = None,
        strip_ansi: bool = False,
        max_turns: int | None = None,
        reward_range: tuple[float, float] | None = None,
        invalid_reward: float = 0.0,
        **gym_kwargs: Any,
    ) -> None:
        gym_id = gym_id.removeprefix(GYM_PREFIX)
        gym = import_gymnasium(GYM_PREFIX + gym_id)
        gym_id = resolve_gym_id(GYM_PREFIX + gym_id)
        gym_spec = gym.spec(gym_id)
        self.gym_id, self.strip_ansi = gym_id, strip_ansi
        if isinstance(invalid_reward, bool) or not isinstance(invalid_reward, numbers.Real):
            raise TypeError(f"gym:{gym_id}: invalid_reward must be a number, got "
                            f"{invalid_reward!r}")
        self.invalid_reward = float(invalid_reward)
        if formatter is not None and not callable(formatter):
            raise TypeError(f"gym:{gym_id}: formatter must be a callable (obs, info) -> str, "
                            f"got {formatter!r}")
        self._ansi = (formatter is None and "render_mode" not in gym_kwargs
                      and "ansi" in known.render_modes(gym_spec))
        self._env = _gym_make(gym, gym_id, gym_kwargs, "ansi" if self._ansi else None)
        try:
            self._setup(gym, gym_spec.name, formatter, action_names, success_fn, instructions,
                        max_turns, reward_range)
        except Exception:
            self._env.close()
            raise
        kwargs = {
            "formatter": formatter,
            "action_names": action_names,
            "success_fn": success_fn,
            "instructions": instructions,
            "strip_ansi": strip_ansi,
            "max_turns": self.max_turns,
            "reward_range": reward_range,
            "invalid_reward": invalid_reward,
            **gym_kwargs,
        }
        self.spec = EnvSpec(
            id=turnrl_env_id(gym_id),
            entry_point="turnrl.envs.gym.adapter:GymEnv",
            max_turns=self.max_turns,
            description=f"Gymnasium {gym_id}: {self._task}",
            reward_range=self._reward_range,
            kwargs=kwargs,
            has_oracle=self._oracle is not None,
            has_state_key=known.discrete(self._env.observation_space),
        )
        if self.spec.has_oracle:
            self.oracle_action = self._oracle_action
        if self.spec.has_state_key:
            self.state_key = self._state_key
        self._obs: Any = None
        self._text = ""
        self._turn = 0
        self._done = True

    def _setup(
        self,
        gym: Any,
        name: str,
        formatter: Formatter | None,
        action_names: Sequence[str] | None,
        success_fn: known.SuccessFn | None,
        instructions: str | None,
        max_turns: int | None,
        reward_range: tuple[float, float] | None,
    ) -> None:
        space = self._env.action_space
        if not isinstance(space, gym.spaces.Discrete):
            raise ValueError(
                f"gym:{self.gym_id} has action space {space}; the gym adapter needs a Discrete "
                "action space (wrap the env to discretise its actions, or pick another env)"
            )
        self.actions = [int(space.start) + i for i in range(int(space.n))]
        self.action_names = known.action_names(self.gym_id, name, action_names,
                                               len(self.actions))
        self.max_turns = _max_turns(self.gym_id, max_turns, self._env.spec)
        self.formatter = formatter
        self.success_fn = success_fn or known.SUCCESS_FNS.get(name, known.positive_end)
        model = oracle.transitions(self._env)
        self._oracle = oracle.oracle_for(self._env, model, self.actions)
        low, high = known.reward_range(self.gym_id, name, reward_range,
                                       oracle.reward_bounds(model))
        self._reward_range = min(low, self.invalid_reward), max(high, self.invalid_reward)
        self._task = known.task_text(self.gym_id, name, instructions,
                                     oracle.is_deterministic(model))
        how = "one action name or its number" if self.action_names else "one action number"
        self.system_prompt = (f"{self._task} Valid actions: {self.valid_actions_text()}. "
                              f"Reply with {how}.")
        self._by_text = {str(value): value for value in self.actions}
        if self.action_names:
            for label, value in zip(self.action_names, self.actions, strict=True):
                self._by_text[label.lower()] = value

    # -- the Env protocol -------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        """New episode: ``seed`` and ``options`` go to the Gymnasium env's ``reset``."""
        obs, info = self._env.reset(seed=seed, options=options)
        self._obs, self._turn, self._done = obs, 0, False
        self._text = self._observe(obs, info)
        messages: list[Message] = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self._text},
        ]
        return messages, {"gym_info": info}

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RuntimeError(f"gym:{self.gym_id}: the episode is over; call reset() first")
        self._turn += 1
        value = self.parse_action(action)
        if value is None:
            text = f"{INVALID} Valid actions: {self.valid_actions_text()}.\n{self._text}"
            reward, terminated, gym_truncated, success, gym_info = (
                self.invalid_reward, False, False, False, {})
        else:
            obs, raw_reward, terminated, gym_truncated, gym_info = self._env.step(value)
            reward, terminated = float(raw_reward), bool(terminated)
            success = bool(self.success_fn(obs, reward, terminated, gym_info))
            self._obs = obs
            self._text = text = self._observe(obs, gym_info)
        truncated = bool(gym_truncated) or (not terminated and self._turn >= self.max_turns)
        self._done = terminated or truncated
        return StepResult(
            observation=[{"role": "user", "content": text}],
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            info={
                "success": success,
                "invalid_action": value is None,
                "action": value,
                "gym_info": gym_info,
            },
        )

    def close(self) -> None:
        self._env.close()

    # -- optional capabilities --------------------------------------------------------------

    def _oracle_action(self) -> str | None:
        """``oracle_action()``: the oracle's greedy action (see ``oracle``); ``None`` once the
        episode is over."""
        if self._done or self._oracle is None:
            return None
        return self.label(self._oracle.best_action(int(self._obs)))

    def _state_key(self) -> Hashable:
        """``state_key()``: the current observation as a hashable value."""
        return known.hashable(self._obs)

    def sample_action(self, rng: random.Random) -> str:
        """A uniformly random valid action from the caller's ``rng``."""
        return self.label(rng.choice(self.actions))

    def __getattr__(self, name: str) -> Any:
        """Only reached for missing attributes: say why an undeclared capability is absent."""
        if name in _UNDECLARED:
            gym_id = self.__dict__.get("gym_id", "?")
            raise AttributeError(f"gym:{gym_id} has no {name}(): {_UNDECLARED[name]}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- helpers ----------------------------------------------------------------------------

    @property
    def gym_env(self) -> Any:
        """The wrapped ``gymnasium.Env``."""
        return self._env

    def parse_action(self, action: str) -> int | None:
        """The Gymnasium action a reply names (name or number, case-insensitive), else None."""
        return self._by_text.get(action.strip().lower()) if isinstance(action, str) else None

    def label(self, value: int) -> str:
        """How the agent writes action ``value``: its name, else its number."""
        if self.action_names:
            return self.action_names[self.actions.index(value)]
        return str(value)

    def valid_actions_text(self) -> str:
        """``"left (0), down (1), right (2), up (3)"``, or ``"0, 1, 2"`` without names."""
        if self.action_names:
            return ", ".join(f"{n} ({v})" for n, v in zip(self.action_names, self.actions,
                                                           strict=True))
        return ", ".join(str(v) for v in self.actions)

    def _observe(self, obs: Any, info: dict[str, Any]) -> str:
        if self.formatter is not None:
            text = self.formatter(obs, info)
            if not isinstance(text, str):
                raise TypeError(f"gym:{self.gym_id}: formatter(obs, info) must return a str, "
                                f"got {type(text).__name__}")
            return text
        if self._ansi:
            text = str(self._env.render())
            return (known.strip_ansi_codes(text) if self.strip_ansi else text).strip("\n")
        return str(known.plain(obs))


# -- building one from an id ---------------------------------------------------------------------


def make_gym_env(env_id: str, **kwargs: Any) -> GymEnv:
    """``make("gym:<id>", **kwargs)``: adapt the Gymnasium env (also ``"gym/<turnrl id>"``)."""
    import_gymnasium(env_id)
    return GymEnv(resolve_gym_id(env_id), **kwargs)


def gym_env_spec(env_id: str) -> EnvSpec:
    """``spec("gym:<id>")``: the spec of the adapted env with default options."""
    env = make_gym_env(env_id)
    env.close()
    return env.spec


# -- construction helpers -------------------------------------------------------------------------


def _gym_make(gym: Any, gym_id: str, gym_kwargs: dict[str, Any], render_mode: str | None) -> Any:
    extra = {"render_mode": render_mode} if render_mode else {}
    try:
        return gym.make(gym_id, **gym_kwargs, **extra)
    except TypeError as exc:
        raise TypeError(
            f"make('gym:{gym_id}'): gymnasium.make rejected the keyword arguments "
            f"{sorted(gym_kwargs)}: {exc}. The adapter's own options are "
            f"{', '.join(ADAPTER_OPTIONS)}; every other keyword goes to gymnasium.make"
        ) from exc


def _max_turns(gym_id: str, max_turns: int | None, gym_spec: Any) -> int:
    if max_turns is None:
        limit = getattr(gym_spec, "max_episode_steps", None)
        return int(limit) if limit else DEFAULT_MAX_TURNS
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"gym:{gym_id}: max_turns must be an int >= 1, got {max_turns!r}")
    return max_turns
