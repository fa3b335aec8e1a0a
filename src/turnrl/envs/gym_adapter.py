"""``gym:<id>``: any Gymnasium env with a discrete action space, played as a turnrl text env.

>>> from turnrl.envs import make
>>> env = make("gym:FrozenLake-v1", is_slippery=False)   # doctest: +SKIP
>>> env.spec.id                                           # doctest: +SKIP
'gym/frozenlake-v1'

``make("gym:<id>", **kwargs)`` needs no registration: the id is looked up in Gymnasium's own
registry (``"gym:module:Id"`` imports ``module`` first, as ``gymnasium.make`` does). The
instance's ``spec.id`` is the turnrl form of the id, ``gym/<id lower-cased>`` (a namespace
``ns/Id`` becomes ``gym/ns.id``), and ``make`` accepts that form too, so ``make(env.spec.id,
**env.spec.kwargs)`` rebuilds the env. A transcript of ``gym:FrozenLake-v1`` (the escape codes
of the ANSI rendering highlight the agent's cell)::

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
  ``reset`` returns a system message (the task, from the built-in ``TASKS`` or
  ``instructions``, then the valid actions) and the first observation.
* **Actions**: a name (case-insensitive) or the action's number, e.g. ``"down"`` or ``"1"``.
  Names come from ``action_names``, else a built-in table (``ACTION_NAMES``: FrozenLake,
  Taxi, CliffWalking, Blackjack, CartPole, MountainCar), else only numbers are accepted.
  Anything else is an invalid action: the env is not stepped, the observation says
  ``Invalid action.`` and lists the valid actions, the reward is ``invalid_reward`` (0 by
  default), ``info["invalid_action"]`` is True, and the turn counts. In an env whose every
  step costs (Taxi, CliffWalking) a 0 makes stalling with invalid replies pay; set
  ``invalid_reward`` to the step cost (e.g. -1) to close that loophole.
* **Rewards, ``terminated``, ``truncated``**: Gymnasium's, passed through; ``truncated`` is
  also set when ``max_turns`` turns (valid or not) have been played. ``max_turns`` defaults to
  the env's ``max_episode_steps`` (its TimeLimit), else ``DEFAULT_MAX_TURNS``.
* **``info["success"]``**: ``success_fn(obs, reward, terminated, info)`` after each env step;
  by default a terminal step with a positive reward; a terminal step, whatever its reward,
  in envs whose only terminal state is the goal and whose steps all cost (CliffWalking,
  MountainCar, Acrobot: ``SUCCESS_FNS``). ``info["gym_info"]`` holds Gymnasium's info dict.
* **Seeding**: ``reset(seed=...)`` passes the seed to ``gymnasium.Env.reset``.
* **Capabilities**: ``state_key()`` (the observation) when the observation space is discrete
  (``Discrete``, ``MultiDiscrete``, ``MultiBinary`` or a ``Tuple`` of those);
  ``oracle_action()`` when the env has a deterministic tabular model ``P`` (non-slippery
  FrozenLake, Taxi, CliffWalking): the greedy action of value iteration on ``P``;
  ``sample_action(rng)``. ``spec.reward_range`` is the range of the rewards in ``P`` when the
  env has one, else a built-in table, else unbounded (override with ``reward_range``); it
  always includes ``invalid_reward``.
"""

from __future__ import annotations

import difflib
import importlib
import numbers
import random
import re
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from turnrl.envs.protocol import EnvSpec
from turnrl.envs.registry import GYM_PREFIX, UnknownEnvError
from turnrl.types import Message, StepResult

GYM_NAMESPACE = "gym/"  # the turnrl id of an adapted env: "gym/frozenlake-v1"
DEFAULT_MAX_TURNS = 100  # the turn budget of an env without a TimeLimit
INVALID = "Invalid action."
ORACLE_DISCOUNT = 0.99  # value iteration's discount: shorter routes to a reward win ties
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
SuccessFn = Callable[[Any, float, bool, dict[str, Any]], bool]

# Per-env action names, by Gymnasium's env name (the id without namespace and version).
ACTION_NAMES: dict[str, tuple[str, ...]] = {
    "FrozenLake": ("left", "down", "right", "up"),
    "FrozenLake8x8": ("left", "down", "right", "up"),
    "Taxi": ("south", "north", "east", "west", "pickup", "dropoff"),
    "CliffWalking": ("up", "right", "down", "left"),
    "CliffWalkingSlippery": ("up", "right", "down", "left"),
    "Blackjack": ("stick", "hit"),
    "CartPole": ("left", "right"),
    "MountainCar": ("left", "coast", "right"),
}

_FROZENLAKE = (
    "Walk on a frozen lake from the start S to the goal G without falling into a hole H; F is "
    "frozen ice and your position is highlighted. Reaching G earns 1."
)
_CLIFF = (
    "Walk from the start (bottom left) to the goal T (bottom right) without stepping onto the "
    "cliff C; x marks you and o is safe ground. Each step costs 1; the cliff costs 100 and "
    "sends you back to the start."
)
TASKS: dict[str, str] = {
    "FrozenLake": _FROZENLAKE,
    "FrozenLake8x8": _FROZENLAKE,
    "Taxi": (
        "Drive the taxi to the passenger, pick them up and drop them off at their destination. "
        "R, G, Y and B are the four stands: the passenger's stand is blue, the destination "
        "magenta, and the taxi yellow (green with the passenger aboard); '|' is a wall. Each "
        "step costs 1, an illegal pickup or drop-off 10; the right drop-off earns 20."
    ),
    "CliffWalking": _CLIFF,
    "CliffWalkingSlippery": _CLIFF,
    "Blackjack": (
        "Play a hand of blackjack against the dealer: hit draws a card, stick stops. The "
        "observation is (your sum, the dealer's showing card, whether you hold a usable ace). "
        "A win earns 1, a loss costs 1."
    ),
    "CartPole": (
        "Keep a pole balanced on a cart by pushing the cart left or right; each step it stays "
        "up earns 1. The observation is (cart position, cart velocity, pole angle, pole "
        "angular velocity)."
    ),
    "MountainCar": (
        "Drive an underpowered car to the flag on the right hill by rocking back and forth to "
        "build momentum; each step costs 1. The observation is (position, velocity)."
    ),
}
SLIPPERY = " The ice is slippery: a move may go sideways."

# Reward bounds of envs without a tabular model P (those with one use the rewards in P).
REWARD_RANGES: dict[str, tuple[float, float]] = {
    "Blackjack": (-1.0, 1.5),
    "CartPole": (-1.0, 1.0),  # +1 a step; sutton_barto_reward=True: 0 a step, -1 on the fall
    "MountainCar": (-1.0, 0.0),
}


def _reached_goal(obs: Any, reward: float, terminated: bool, info: dict[str, Any]) -> bool:
    """Success is ending the episode (``terminated``; a time-limit cut is ``truncated``
    instead): the only terminal state is the goal, reached with a reward <= 0
    (CliffWalking -1, MountainCar -1, Acrobot 0), so ``_positive_end`` never fires."""
    return terminated


def _positive_end(obs: Any, reward: float, terminated: bool, info: dict[str, Any]) -> bool:
    return terminated and reward > 0


def _positive_reward(obs: Any, reward: float, terminated: bool, info: dict[str, Any]) -> bool:
    return reward > 0  # Blackjack: a won hand (it ends the episode)


SUCCESS_FNS: dict[str, SuccessFn] = {
    "CliffWalking": _reached_goal,
    "CliffWalkingSlippery": _reached_goal,
    "MountainCar": _reached_goal,
    "Acrobot": _reached_goal,
    "Blackjack": _positive_reward,
}


class GymEnv:
    """A Gymnasium env behind the turnrl ``Env`` protocol (see the module docstring).

    ``gym_id`` is Gymnasium's id (``"FrozenLake-v1"``); every keyword argument that is not an
    adapter option (``ADAPTER_OPTIONS``) goes to ``gymnasium.make``.
    """

    def __init__(
        self,
        gym_id: str,
        *,
        formatter: Formatter | None = None,
        action_names: Sequence[str] | None = None,
        success_fn: SuccessFn | None = None,
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
                      and "ansi" in _render_modes(gym_spec))
        self._env = _gym_make(gym, gym_id, gym_kwargs, "ansi" if self._ansi else None)
        try:
            self._setup(gym_spec.name, formatter, action_names, success_fn, instructions,
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
            entry_point="turnrl.envs.gym_adapter:GymEnv",
            max_turns=self.max_turns,
            description=f"Gymnasium {gym_id}: {self._task}",
            reward_range=self._reward_range,
            kwargs=kwargs,
            has_oracle=self._model is not None,
            has_state_key=_discrete(self._env.observation_space),
        )
        self._obs: Any = None
        self._text = ""
        self._turn = 0
        self._done = True

    def _setup(
        self,
        name: str,
        formatter: Formatter | None,
        action_names: Sequence[str] | None,
        success_fn: SuccessFn | None,
        instructions: str | None,
        max_turns: int | None,
        reward_range: tuple[float, float] | None,
    ) -> None:
        gym = import_gymnasium(GYM_PREFIX + self.gym_id)
        space = self._env.action_space
        if not isinstance(space, gym.spaces.Discrete):
            raise ValueError(
                f"gym:{self.gym_id} has action space {space}; the gym adapter needs a Discrete "
                "action space (wrap the env to discretise its actions, or pick another env)"
            )
        self.actions = [int(space.start) + i for i in range(int(space.n))]
        self.action_names = _action_names(self.gym_id, name, action_names, len(self.actions))
        self.max_turns = _max_turns(self.gym_id, max_turns, self._env.spec)
        self.formatter = formatter
        self.success_fn = success_fn or SUCCESS_FNS.get(name, _positive_end)
        transitions = _transitions(self._env)
        deterministic = transitions is not None and all(
            len(outcomes) == 1 and float(outcomes[0][0]) == 1.0
            for by_action in transitions.values() for outcomes in by_action.values()
        )
        # Taxi's fickle passenger changes destination outside P: no oracle then.
        fickle = getattr(self._env.unwrapped, "fickle_passenger", False)
        self._model = None
        if transitions is not None and deterministic and not fickle:
            self._model = _model(transitions, self.actions)
        self._q_values: np.ndarray | None = None
        low, high = _reward_range(self.gym_id, name, reward_range, transitions)
        self._reward_range = min(low, self.invalid_reward), max(high, self.invalid_reward)
        task = instructions if instructions is not None else TASKS.get(
            name, f"Play the Gymnasium environment {self.gym_id}.")
        if instructions is None and name.startswith("FrozenLake") and not deterministic:
            task += SLIPPERY
        self._task = task
        how = "one action name or its number" if self.action_names else "one action number"
        self.system_prompt = (f"{task} Valid actions: {self.valid_actions_text()}. "
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

    def oracle_action(self) -> str | None:
        """The greedy action of value iteration on the env's deterministic model ``P``
        (ties go to the lowest action number); ``None`` once the episode is over."""
        if self._model is None:
            raise RuntimeError(
                f"gym:{self.gym_id} has no oracle (spec.has_oracle is False): only envs with a "
                "deterministic tabular model P (e.g. FrozenLake with is_slippery=False) have one"
            )
        if self._done:
            return None
        if self._q_values is None:
            self._q_values = _value_iteration(*self._model)
        return self.label(self.actions[int(np.argmax(self._q_values[int(self._obs)]))])

    def state_key(self) -> Hashable:
        """The current observation as a hashable value (declared for discrete observations)."""
        return _hashable(self._obs)

    def sample_action(self, rng: random.Random) -> str:
        """A uniformly random valid action from the caller's ``rng``."""
        return self.label(rng.choice(self.actions))

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
            return (strip_ansi_codes(text) if self.strip_ansi else text).strip("\n")
        return str(_plain(obs))


# -- ids and the registry -----------------------------------------------------------------------


def import_gymnasium(env_id: str) -> Any:
    """``gymnasium``, or an ImportError naming the ``turnrl[gym]`` extra."""
    try:
        return importlib.import_module("gymnasium")
    except ImportError as exc:
        raise ImportError(
            f"env {env_id!r} needs gymnasium, which is not installed; install it with "
            "pip install 'turnrl[gym]'"
        ) from exc


def turnrl_env_id(gym_id: str) -> str:
    """The turnrl id of a Gymnasium id: ``"FrozenLake-v1"`` -> ``"gym/frozenlake-v1"``,
    ``"phys2d/CartPole-v1"`` -> ``"gym/phys2d.cartpole-v1"`` (``-v0`` if unversioned)."""
    stem = gym_id.split(":", 1)[-1].lower().replace("/", ".")
    stem = re.sub(r"[^a-z0-9_.\-]", "_", stem)
    if not re.search(r"-v\d+$", stem):
        stem += "-v0"
    return GYM_NAMESPACE + stem


def resolve_gym_id(env_id: str) -> str:
    """Gymnasium's id for ``"gym:<id>"`` or ``"gym/<turnrl form>"``; UnknownEnvError if none.

    ``"gym:module:Id"`` imports ``module`` first (it may register ``Id``).
    """
    gym = import_gymnasium(env_id)
    if env_id.startswith(GYM_NAMESPACE):
        by_turnrl_id = {turnrl_env_id(g): g for g in sorted(gym.registry)}
        if env_id in by_turnrl_id:
            return by_turnrl_id[env_id]
        raise UnknownEnvError(
            f"unknown env {env_id!r}: no Gymnasium env (gymnasium {gym.__version__}) has this "
            f"turnrl id{_close(env_id, sorted(by_turnrl_id), prefix='')}"
        )
    gym_id = env_id.removeprefix(GYM_PREFIX)
    if ":" in gym_id:
        module, gym_id = gym_id.split(":", 1)
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(
                f"env {env_id!r}: cannot import {module!r}, the module that registers "
                f"{gym_id!r} with gymnasium: {exc}; install the package that provides it"
            ) from exc
    if gym_id in gym.registry:
        return gym_id
    name = re.sub(r"-v\d+$", "", gym_id)
    versions = sorted(g for g in gym.registry if re.sub(r"-v\d+$", "", g) == name)
    if versions:
        hint = (f"; gymnasium {gym.__version__} has "
                f"{', '.join(GYM_PREFIX + g for g in versions)}")
    else:
        hint = _close(gym_id, sorted(gym.registry), prefix=GYM_PREFIX)
    raise UnknownEnvError(
        f"unknown Gymnasium env {gym_id!r} (from {env_id!r}){hint}. List them all with "
        "gymnasium.pprint_registry(); envs of other packages register when imported "
        "('gym:module:Id')"
    )


def make_gym_env(env_id: str, **kwargs: Any) -> GymEnv:
    """``make("gym:<id>", **kwargs)``: adapt the Gymnasium env (also ``"gym/<turnrl id>"``)."""
    import_gymnasium(env_id)
    return GymEnv(resolve_gym_id(env_id), **kwargs)


def gym_env_spec(env_id: str) -> EnvSpec:
    """``spec("gym:<id>")``: the spec of the adapted env with default options."""
    env = make_gym_env(env_id)
    env.close()
    return env.spec


def strip_ansi_codes(text: str) -> str:
    """``text`` without ANSI escape sequences (colours, highlights)."""
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)


def _close(name: str, choices: list[str], *, prefix: str) -> str:
    matches = difflib.get_close_matches(name, choices, n=5, cutoff=0.5)
    if not matches:
        return ""
    return (f"; did you mean {prefix + matches[0]!r}? Close matches: "
            f"{', '.join(prefix + m for m in matches)}")


# -- construction helpers -----------------------------------------------------------------------


def _render_modes(gym_spec: Any) -> list[str]:
    creator = gym_spec.entry_point
    if isinstance(creator, str):
        module, _, attr = creator.partition(":")
        try:
            creator = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            return []  # gymnasium.make will report it
    return list(getattr(creator, "metadata", {}).get("render_modes", []))


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


def _action_names(
    gym_id: str, name: str, action_names: Sequence[str] | None, n: int
) -> tuple[str, ...] | None:
    if action_names is None:
        names = ACTION_NAMES.get(name)
        return names if names is not None and len(names) == n else None
    names = tuple(action_names) if not isinstance(action_names, str) else ()
    lowered = [str(a).strip().lower() for a in names]
    if (
        len(names) != n
        or not all(isinstance(a, str) and a.strip() for a in names)
        or len(set(lowered)) != n
        or any(re.fullmatch(r"[+-]?\d+", a) for a in lowered)
    ):
        raise ValueError(
            f"gym:{gym_id}: action_names must be {n} distinct non-empty strings that are not "
            f"numbers (one per action of Discrete({n}), in order), got {action_names!r}"
        )
    return tuple(a.strip() for a in names)


def _max_turns(gym_id: str, max_turns: int | None, gym_spec: Any) -> int:
    if max_turns is None:
        limit = getattr(gym_spec, "max_episode_steps", None)
        return int(limit) if limit else DEFAULT_MAX_TURNS
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"gym:{gym_id}: max_turns must be an int >= 1, got {max_turns!r}")
    return max_turns


def _transitions(env: Any) -> dict[int, dict[int, list[tuple[Any, ...]]]] | None:
    """The tabular model ``P[state][action] = [(prob, next_state, reward, terminated), ...]``
    of a toy-text env, when it has one that covers every state."""
    table = getattr(env.unwrapped, "P", None)
    space = env.observation_space
    if not isinstance(table, dict) or not hasattr(space, "n") or len(table) != int(space.n):
        return None
    return table


def _model(
    transitions: dict[int, dict[int, list[tuple[Any, ...]]]], actions: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(next_state, reward, terminated)`` arrays of shape (states, actions)."""
    states = sorted(transitions)
    rows = [[transitions[s][a][0] for a in actions] for s in states]
    next_state = np.array([[int(t[1]) for t in row] for row in rows])
    reward = np.array([[float(t[2]) for t in row] for row in rows])
    terminated = np.array([[bool(t[3]) for t in row] for row in rows])
    return next_state, reward, terminated


def _value_iteration(
    next_state: np.ndarray, reward: np.ndarray, terminated: np.ndarray
) -> np.ndarray:
    """Q-values of the deterministic model, discounted by ``ORACLE_DISCOUNT``."""
    values = np.zeros(next_state.shape[0])
    for _ in range(100_000):
        q_values = reward + ORACLE_DISCOUNT * np.where(terminated, 0.0, values[next_state])
        new_values = q_values.max(axis=1)
        if np.max(np.abs(new_values - values)) < 1e-12:
            break
        values = new_values
    return q_values


def _reward_range(
    gym_id: str,
    name: str,
    reward_range: tuple[float, float] | None,
    transitions: dict[int, dict[int, list[tuple[Any, ...]]]] | None,
) -> tuple[float, float]:
    if reward_range is not None:
        bounds = tuple(reward_range) if isinstance(reward_range, (tuple, list)) else ()
        if len(bounds) != 2 or not all(isinstance(b, numbers.Real) for b in bounds) or not (
            bounds[0] <= bounds[1]
        ):
            raise ValueError(f"gym:{gym_id}: reward_range must be (low, high) with low <= high, "
                             f"got {reward_range!r}")
        low, high = float(bounds[0]), float(bounds[1])
    elif transitions is not None:
        rewards = [float(t[2]) for by_action in transitions.values()
                   for outcomes in by_action.values() for t in outcomes]
        low, high = min(rewards), max(rewards)
    else:
        low, high = REWARD_RANGES.get(name, (-float("inf"), float("inf")))
    return low, high


def _discrete(space: Any) -> bool:
    import gymnasium.spaces as spaces

    if isinstance(space, spaces.Tuple):
        return all(_discrete(s) for s in space.spaces)
    return isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary))


def _plain(obs: Any) -> Any:
    """numpy values as Python ones, floats rounded to 4 places (for text and keys)."""
    if isinstance(obs, np.ndarray):
        return _plain(obs.tolist())
    if isinstance(obs, np.generic):
        return _plain(obs.item())
    if isinstance(obs, tuple):
        return tuple(_plain(x) for x in obs)
    if isinstance(obs, list):
        return [_plain(x) for x in obs]
    if isinstance(obs, dict):
        return {k: _plain(v) for k, v in obs.items()}
    if isinstance(obs, float) or (isinstance(obs, numbers.Real) and not isinstance(obs, int)):
        return round(float(obs), 4)
    return obs


def _hashable(obs: Any) -> Hashable:
    value = _plain(obs)
    if isinstance(value, list):
        return tuple(_hashable(x) for x in value)
    if isinstance(value, tuple):
        return tuple(_hashable(x) for x in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value
