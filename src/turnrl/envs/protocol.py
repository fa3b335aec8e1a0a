"""The environment contract: ``EnvSpec`` and the ``Env`` protocol.

An env is any object with ``spec``, ``reset``, ``step`` and ``close`` (no base class needed).
Optional capabilities are declared on the spec, and only there, and implemented as methods
(``CAPABILITIES`` pairs them): ``has_oracle`` with ``oracle_action()`` (``HasOracle``),
``has_state_key`` with ``state_key()`` (``HasStateKey``), ``has_privileged_info`` with
``privileged_info()`` (``HasPrivilegedInfo``), and a non-empty ``tools`` with
``tool_schemas()`` (``HasTools``). Code that uses a capability asks the spec
(``if env.spec.tools:``), never ``isinstance``; ``check_env`` checks that the declarations and
the methods agree. ``sample_action()`` (``HasActionSampler``) is the one exception: it is
detected with ``isinstance``. See ``docs/environments.md``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from turnrl.types import Message, StepResult

# ``name-vN``: a lowercase name (letters, digits, ``_ . -``, optionally ``namespace/``), then
# ``-v`` and a version number. Any change of an env's behaviour bumps N.
ENV_ID_PATTERN = re.compile(
    r"(?P<name>[a-z0-9][a-z0-9_.\-]*(?:/[a-z0-9][a-z0-9_.\-]*)?)-v(?P<version>\d+)"
)


# The optional capabilities: the EnvSpec field that declares each (a true flag, or a non-empty
# ``tools``) and the method that implements it.
CAPABILITIES: dict[str, str] = {
    "has_oracle": "oracle_action",
    "has_state_key": "state_key",
    "has_privileged_info": "privileged_info",
    "tools": "tool_schemas",
}


def parse_env_id(env_id: str) -> tuple[str, int] | None:
    """``"frozenlake-v0"`` -> ``("frozenlake", 0)``; ``None`` when the id is not ``name-vN``."""
    match = ENV_ID_PATTERN.fullmatch(env_id) if isinstance(env_id, str) else None
    if match is None:
        return None
    return match["name"], int(match["version"])


def validate_env_id(env_id: str) -> None:
    """Raise ``ValueError`` saying how to fix an id that is not ``name-vN``."""
    if parse_env_id(env_id) is None:
        stem = re.sub(r"[^a-z0-9_.\-/]+", "_", str(env_id).lower()).strip("_-") or "myenv"
        stem = re.sub(r"-v\d*$", "", stem)
        raise ValueError(
            f"env id {env_id!r} is not of the form 'name-vN' (lowercase name, '-v', version "
            f"number); use e.g. {stem + '-v0'!r}, and bump N whenever the env's behaviour changes"
        )


@dataclass(frozen=True)
class EnvSpec:
    """What the registry knows about an env, and what ``make`` gives each instance.

    ``kwargs`` are the constructor arguments: on a registered spec the registered defaults, on
    an instance's spec every argument the instance was built with (defaults merged with
    overrides). ``max_turns`` is the episode budget: every episode ends (terminated or
    truncated) within ``max_turns`` calls of ``step``.
    """

    id: str  # versioned, "name-vN"
    entry_point: str | Callable[..., Any]  # "package.module:Attr" or a callable returning an env
    max_turns: int  # turn budget: episodes end within this many steps
    description: str = ""
    reward_range: tuple[float, float] = (0.0, 1.0)  # bounds of every per-step reward
    tools: list[str] = field(default_factory=list)  # its tools' names: implements tool_schemas()
    kwargs: dict[str, Any] = field(default_factory=dict)  # constructor arguments
    has_oracle: bool = False  # implements oracle_action()
    has_state_key: bool = False  # implements state_key()
    has_privileged_info: bool = False  # implements privileged_info()
    slow_steps: bool = False  # reset/step block (retrieval, code): the runner uses threads
    # constructor arguments of held-out evaluation, over ``kwargs`` (dataset-v0: its test rows)
    eval_kwargs: dict[str, Any] = field(default_factory=dict)
    # SFT demonstrations may take a random action instead of the oracle's (sft.random_action_
    # prob), to show other states; False where a random reply only teaches a wrong answer
    demo_random_actions: bool = True
    # the agents of a multi-agent env (turnrl.envs.multi), in seat order; empty for an env of
    # one agent. A non-empty tuple declares the multi-agent contract (MultiAgentEnv)
    agents: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        validate_env_id(self.id)
        agents = tuple(self.agents)
        if any(not isinstance(a, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+", a)
               for a in agents) or len(set(agents)) != len(agents) or len(agents) == 1:
            raise ValueError(f"env {self.id!r}: agents {self.agents!r} must be two or more "
                             "distinct names of letters, digits, '_' or '-' (or empty for an "
                             "env of one agent)")
        object.__setattr__(self, "agents", agents)
        if isinstance(self.entry_point, str):
            if not re.fullmatch(r"[\w.]+:[\w.]+", self.entry_point):
                raise ValueError(
                    f"env {self.id!r}: entry_point {self.entry_point!r} must be "
                    "'package.module:Attribute' or a callable"
                )
        elif not callable(self.entry_point):
            raise TypeError(
                f"env {self.id!r}: entry_point must be a 'module:attr' string or a callable"
            )
        if (
            isinstance(self.max_turns, bool)
            or not isinstance(self.max_turns, int)
            or self.max_turns < 1
        ):
            raise ValueError(
                f"env {self.id!r}: max_turns must be an int >= 1, got {self.max_turns!r}"
            )
        low, high = self.reward_range
        if not low <= high:
            raise ValueError(f"env {self.id!r}: reward_range {self.reward_range!r} has low > high")
        object.__setattr__(self, "reward_range", (float(low), float(high)))
        object.__setattr__(self, "tools", list(self.tools))
        object.__setattr__(self, "kwargs", dict(self.kwargs))

    @property
    def name(self) -> str:
        """The id without its version: ``"frozenlake"``."""
        return self.id.rsplit("-v", 1)[0]

    @property
    def version(self) -> int:
        return int(self.id.rsplit("-v", 1)[1])

    @property
    def capabilities(self) -> tuple[str, ...]:
        """The capability methods this spec declares, in ``CAPABILITIES`` order:
        ``("oracle_action", "state_key")`` for an env with an oracle and state keys."""
        return tuple(method for name, method in CAPABILITIES.items() if getattr(self, name))


@runtime_checkable
class Env(Protocol):
    """A text environment: messages in, messages out.

    ``reset`` is the only place randomness is seeded (each env owns a ``random.Random``);
    the same seed and the same actions give the same transcript. ``step`` takes the agent's
    reply as text and never raises on a malformed reply: it answers with an observation that
    says what was wrong. ``terminated`` means the task ended (solved or failed), ``truncated``
    that a budget ran out (``spec.max_turns``).
    """

    spec: EnvSpec

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]: ...

    def step(self, action: str) -> StepResult: ...

    def close(self) -> None: ...


@runtime_checkable
class HasOracle(Protocol):
    """Declared by ``spec.has_oracle``: an expert's next action (``None`` once it is over)."""

    def oracle_action(self) -> str | None: ...


@runtime_checkable
class HasActionSampler(Protocol):
    """A random valid action from the caller's RNG: imperfect demonstrations, random baselines.

    Detected by ``isinstance(env, HasActionSampler)`` rather than declared on the spec.
    """

    def sample_action(self, rng: random.Random) -> str: ...


@runtime_checkable
class HasStateKey(Protocol):
    """Declared by ``spec.has_state_key``: identical states share a key (step-level grouping)."""

    def state_key(self) -> Hashable: ...


@runtime_checkable
class HasTools(Protocol):
    """Declared by a non-empty ``spec.tools``: the JSON schemas of the env's tools."""

    def tool_schemas(self) -> list[dict]:
        """JSON tool schemas for ``apply_chat_template(tools=...)``; an env that asks for the
        compact ``name[arg]`` format may return ``[]`` and describe its tools in its prompt."""
        ...


@runtime_checkable
class HasPrivilegedInfo(Protocol):
    """Declared by ``spec.has_privileged_info``: hidden facts a critic may see, never the policy."""

    def privileged_info(self) -> str: ...
