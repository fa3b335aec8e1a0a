"""The reward registry, user reward functions by import path, and weighted combinations.

A reward function scores one finished episode: ``fn(trajectory, **kwargs) -> float``. The
keyword arguments are its settings, given in the config next to its name and weight::

    rewards:
      - {name: exact_match, weight: 1.0}
      - {name: tool_cost, weight: 1.0, kwargs: {cost: 0.05}}
      - {name: my_package.rewards:brevity, weight: 0.2, label: brevity}

:func:`combine` validates such a list (names, keys, weights, and kwargs against each
function's signature) and returns a :class:`CombinedReward`: total = Σ weight·value.
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from turnrl.registry import Registry, UnknownNameError, setting_type_problem
from turnrl.types import Trajectory
from turnrl.wording import did_you_mean

__all__ = [
    "REWARDS",
    "CombinedReward",
    "RewardFn",
    "RewardSpecError",
    "RewardTerm",
    "combine",
    "load_reward",
    "register_reward",
]


class RewardFn(Protocol):
    """``fn(trajectory, **kwargs) -> float``: the score of one finished episode."""

    def __call__(self, trajectory: Trajectory, /, *args: Any, **kwargs: Any) -> float: ...


REWARDS: Registry[RewardFn] = Registry("reward")

RewardF = TypeVar("RewardF", bound=RewardFn)


_CHECKS: dict[str, Callable[..., Any]] = {}
_NEEDS_REFERENCE: set[str] = set()


def register_reward(name: str, *, check: Callable[..., Any] | None = None,
                    needs_reference: bool = False) -> Callable[[RewardF], RewardF]:
    """Decorator: store a reward function under ``name`` (its settings are keyword-only).

    ``check(**kwargs)``, if given, raises ``ValueError`` for bad settings (``ImportError``
    for a missing package); :func:`combine` runs it when the config is loaded, so a bad
    regex or a negative budget fails before any rollout instead of at the first score.
    ``needs_reference=True`` declares that the function compares against a reference
    answer, ``trajectory.info["answer"]`` unless its ``answer`` setting is given
    (:attr:`RewardTerm.needs_reference`), so an env without one is refused before a run.
    """

    def add(fn: RewardF) -> RewardF:
        REWARDS.register(name)(fn)
        if check is not None:
            _CHECKS[name] = check
        if needs_reference:
            _NEEDS_REFERENCE.add(name)
        return fn

    return add


class RewardSpecError(ValueError):
    """A reward configuration that cannot be used; the message says where and how to fix it."""


_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_SPEC_KEYS = ("name", "weight", "kwargs", "label")


def load_reward(path: str) -> RewardFn:
    """Import a user's reward function given as ``"package.module:function"``.

    ``function`` may be dotted (``module:Class.method``). Every failure raises
    :class:`RewardSpecError` naming the path and the problem: a malformed path, a module that
    is not found or fails to import, a missing attribute (with the closest name), or an
    object that is not callable.
    """
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        raise RewardSpecError(
            f"reward {path!r} is not a registered name nor an import path "
            "'package.module:function'"
        )
    module_name, _, attr_path = path.partition(":")
    module = _import(path, module_name)
    obj: Any = module
    where = module_name
    for attr in attr_path.split("."):
        if not hasattr(obj, attr):
            public = [name for name in dir(obj) if not name.startswith("_")]
            raise RewardSpecError(f"reward {path!r}: {where!r} has no attribute {attr!r}"
                                  f"{did_you_mean(attr, public)}")
        obj = getattr(obj, attr)
        where = f"{where}.{attr}" if where != module_name else f"{module_name}:{attr}"
    if not callable(obj):
        raise RewardSpecError(
            f"reward {path!r} is a {type(obj).__name__}, not a function; point it at a "
            "function fn(trajectory, **kwargs) -> float"
        )
    return cast(RewardFn, obj)


def _import(path: str, module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        parts = module_name.split(".")
        prefixes = {".".join(parts[: i + 1]) for i in range(len(parts))}
        if error.name in prefixes:
            raise RewardSpecError(
                f"reward {path!r}: cannot import module {module_name!r} ({error}); check the "
                "spelling, and that its package is installed or on PYTHONPATH"
            ) from None
        raise RewardSpecError(
            f"reward {path!r}: importing module {module_name!r} failed because it needs "
            f"{error.name!r}, which is not installed ({error})"
        ) from None
    except Exception as error:  # a broken user module: show what it raised
        raise RewardSpecError(
            f"reward {path!r}: importing module {module_name!r} raised "
            f"{type(error).__name__}: {error}"
        ) from None


@dataclass(frozen=True)
class RewardTerm:
    """One weighted reward of a combination."""

    label: str  # metric name: ``reward/<label>``
    name: str  # registry name or "package.module:function"
    fn: RewardFn
    weight: float = 1.0
    kwargs: dict[str, Any] = field(default_factory=dict)
    # reads the env's reference answer, info["answer"] (registered with needs_reference and
    # no ``answer`` setting given)
    needs_reference: bool = False

    def __call__(self, trajectory: Trajectory) -> float:
        """The unweighted value; raises ``ValueError`` if it is not a finite number."""
        value = self.fn(trajectory, **self.kwargs)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                value = float(value)  # numpy / torch scalars
            except (TypeError, ValueError):
                raise ValueError(
                    f"reward {self.label!r} returned {value!r} ({type(value).__name__}) for "
                    f"episode {trajectory.env_id!r} seed {trajectory.seed}; a reward function "
                    "must return a float"
                ) from None
        if not math.isfinite(value):
            raise ValueError(
                f"reward {self.label!r} returned {value} for episode {trajectory.env_id!r} "
                f"seed {trajectory.seed}; rewards must be finite"
            )
        return float(value)


@dataclass(frozen=True)
class CombinedReward:
    """A weighted sum of rewards; itself a reward function (``__call__``)."""

    terms: tuple[RewardTerm, ...]

    def __call__(self, trajectory: Trajectory) -> float:
        """``Σ weight_i · value_i``."""
        return self.score(trajectory)[0]

    def score(self, trajectory: Trajectory) -> tuple[float, dict[str, float]]:
        """The total and each term's unweighted value by label (for ``reward/<label>``)."""
        values = {term.label: term(trajectory) for term in self.terms}
        total = sum(term.weight * values[term.label] for term in self.terms)
        return float(total), values

    @property
    def labels(self) -> list[str]:
        return [term.label for term in self.terms]


def combine(spec: Sequence[Mapping[str, Any] | str] | Mapping[str, Any] | str, *,
            where: str = "rewards") -> CombinedReward:
    """Build a :class:`CombinedReward` from a config-like list.

    Each entry is a reward name (``"exact_match"``) or a mapping with keys ``name``
    (registered name or ``"package.module:function"``), ``weight`` (default 1.0),
    ``kwargs`` (default ``{}``) and ``label`` (the metric name; default the registered name,
    or the function's name for an import path). A single entry may be given without the list.

    Args:
        spec: the entries.
        where: how error messages name the list (e.g. ``"config.yaml: rewards"``).

    Raises:
        RewardSpecError: saying which entry and key is wrong and how to fix it.
    """
    entries = [spec] if isinstance(spec, (str, Mapping)) else list(spec)
    if not entries:
        raise RewardSpecError(f"{where}: no rewards are configured; add at least one, e.g. "
                              "[{name: exact_match, weight: 1.0}]")
    terms: list[RewardTerm] = []
    for index, entry in enumerate(entries):
        term = _term(entry, f"{where}[{index}]")
        if term.label in {t.label for t in terms}:
            raise RewardSpecError(
                f"{where}[{index}]: two rewards are labelled {term.label!r}; give one a "
                "distinct 'label' (it names the metric reward/<label>)"
            )
        terms.append(term)
    return CombinedReward(tuple(terms))


def _term(entry: Mapping[str, Any] | str, where: str) -> RewardTerm:
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, Mapping):
        raise RewardSpecError(f"{where}: expected a reward name or a mapping with 'name', "
                              f"'weight' and 'kwargs', got {entry!r}")
    for key in entry:
        if key not in _SPEC_KEYS:
            raise RewardSpecError(f"{where}: unknown key {key!r}"
                                  f"{did_you_mean(str(key), _SPEC_KEYS)} Valid keys: "
                                  f"{', '.join(_SPEC_KEYS)}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise RewardSpecError(f"{where}: 'name' must be a reward name or "
                              f"'package.module:function', got {name!r}")
    fn = _lookup(name, where)
    weight = entry.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(
            weight):
        raise RewardSpecError(f"{where} ({name}): 'weight' must be a finite number, got "
                              f"{weight!r}")
    kwargs = entry.get("kwargs") or {}
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise RewardSpecError(f"{where} ({name}): 'kwargs' must be a mapping of setting names "
                              f"to values, got {kwargs!r}")
    _check_kwargs(fn, dict(kwargs), f"{where} ({name})")
    if name in _CHECKS:
        try:
            _CHECKS[name](**kwargs)
        except (TypeError, ValueError, ImportError) as error:
            raise RewardSpecError(f"{where} ({name}): {error}") from None
    label = entry.get("label", name.rpartition(":")[2].rpartition(".")[2])
    if not isinstance(label, str) or not label:
        raise RewardSpecError(f"{where} ({name}): 'label' must be a non-empty string")
    needs_reference = name in _NEEDS_REFERENCE and kwargs.get("answer") is None
    return RewardTerm(label=label, name=name, fn=fn, weight=float(weight), kwargs=dict(kwargs),
                      needs_reference=needs_reference)


def _lookup(name: str, where: str) -> RewardFn:
    if ":" in name:
        try:
            return load_reward(name)
        except RewardSpecError as error:
            raise RewardSpecError(f"{where}: {error}") from None
    try:
        return REWARDS[name]
    except UnknownNameError as error:
        raise RewardSpecError(f"{where}: {error}; or give a function as "
                              "'package.module:function'") from None


def _check_kwargs(fn: RewardFn, kwargs: dict[str, Any], where: str) -> None:
    """The kwargs must bind to ``fn(trajectory, **kwargs)``: nothing unknown, nothing missing."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin or C callable: cannot check
        return
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or params[0].kind not in (*positional, inspect.Parameter.VAR_POSITIONAL):
        raise RewardSpecError(f"{where}: a reward function must take the trajectory as its "
                              "first positional argument: fn(trajectory, **kwargs) -> float")
    rest = params[1:] if params[0].kind in positional else params
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in rest):
        names = [p.name for p in rest if p.kind is not inspect.Parameter.VAR_POSITIONAL]
        for key in kwargs:
            if key not in names:
                raise RewardSpecError(f"{where}: unknown kwarg {key!r}{did_you_mean(key, names)} "
                                      f"Accepted: {', '.join(names) or '(none)'}")
    problem = setting_type_problem(fn, kwargs, owner="this reward")
    if problem:
        raise RewardSpecError(f"{where}: {problem}")
    missing = [p.name for p in rest if p.default is inspect.Parameter.empty
               and p.kind in (inspect.Parameter.KEYWORD_ONLY,
                              inspect.Parameter.POSITIONAL_OR_KEYWORD)
               and p.name not in kwargs]
    if missing:
        raise RewardSpecError(f"{where}: missing required kwarg(s) "
                              f"{', '.join(map(repr, missing))}; add them under 'kwargs'")
