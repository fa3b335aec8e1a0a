"""Register envs by versioned id and build them with ``make``.

>>> env = make("frozenlake-v0", max_turns=20)
>>> env.spec.max_turns
20

A module of your own registers its envs when imported: name it in ``env.imports`` (or
``--import``) and :func:`import_modules` imports it before the env is made. Third-party
packages register through the ``turnrl.envs`` entry-point group::

    # pyproject.toml of the plugin
    [project.entry-points."turnrl.envs"]
    mazes = "my_mazes.register:register_envs"   # a function calling turnrl.envs.register(...)

The group is read once, lazily, on the first ``make``/``spec``/``registered_ids``: each entry
point is loaded (importing its module may itself register envs) and, if the loaded object is
callable, called with no arguments.

A family of ids can need no registration: ``register_prefix(prefix, resolver)`` hands every
id that starts with ``prefix`` and is not registered to a ``PrefixResolver`` (the longest
matching prefix wins), which gives its spec and builds its env. ``turnrl.envs`` registers
``turnrl.envs.gym`` this way for ``gym:<id>`` and ``gym/<id>``: ``make("gym:FrozenLake-v1",
is_slippery=False)`` adapts Gymnasium's env. ``registered_ids`` lists no resolved ids.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib import metadata
from typing import Any, Protocol

from turnrl.envs.protocol import Env, EnvSpec, parse_env_id
from turnrl.registry import UnknownNameError
from turnrl.wording import unknown_name_message

ENTRY_POINT_GROUP = "turnrl.envs"

_SPECS: dict[str, EnvSpec] = {}
_PREFIXES: dict[str, PrefixResolver] = {}  # register_prefix
_loaded_plugins: set[str] = set()  # "name = value" of entry points already loaded
_plugins_scanned = False


class UnknownEnvError(UnknownNameError):
    """An env id that is not registered (a ``KeyError``); the message lists the valid ids."""


class EnvPluginError(RuntimeError):
    """A ``turnrl.envs`` entry point failed to load or register."""


class PrefixResolver(Protocol):
    """Gives the spec and builds the env of any id of a family that needs no registration."""

    def spec(self, id: str) -> EnvSpec:
        """The spec of ``id`` with default options; ``UnknownEnvError`` if it names nothing."""
        ...

    def make(self, id: str, **kwargs: Any) -> Any:
        """The env ``id`` names, built with ``kwargs``, its ``spec`` set: an ``Env``, or a
        ``turnrl.envs.multi.MultiAgentEnv`` when the spec names agents (typed as an entry
        point's result is: ``make`` returns either)."""
        ...


def register(
    id: str,
    entry_point: str | Callable[..., Any],
    *,
    max_turns: int,
    description: str,
    reward_range: tuple[float, float] = (0.0, 1.0),
    tools: list[str] | tuple[str, ...] = (),
    has_oracle: bool = False,
    has_state_key: bool = False,
    has_privileged_info: bool = False,
    slow_steps: bool = False,
    agents: tuple[str, ...] | list[str] = (),
    **kwargs: Any,
) -> EnvSpec:
    """Register an env under a versioned id and return its spec.

    ``entry_point`` is ``"package.module:Class"`` (imported on the first ``make``) or a
    callable returning an env. ``kwargs`` are constructor defaults that ``make`` overrides.
    If the constructor takes ``max_turns``, it receives the spec's ``max_turns``.
    ``slow_steps=True`` declares that ``reset``/``step`` block (a search engine, a sandbox,
    a game compiler), so the runner calls them in worker threads. ``agents`` names the
    agents of a multi-agent env (``turnrl.envs.multi``), in seat order.
    """
    env_spec = EnvSpec(
        id=id,
        entry_point=entry_point,
        max_turns=max_turns,
        description=description,
        reward_range=reward_range,
        tools=list(tools),
        kwargs=kwargs,
        has_oracle=has_oracle,
        has_state_key=has_state_key,
        has_privileged_info=has_privileged_info,
        slow_steps=slow_steps,
        agents=tuple(agents),
    )
    register_spec(env_spec)
    return env_spec


def register_spec(env_spec: EnvSpec) -> None:
    """Register a ready-made ``EnvSpec`` (what ``register`` does after building one)."""
    if env_spec.id in _SPECS:
        raise ValueError(
            f"env {env_spec.id!r} is already registered; register the changed env under a new "
            f"version (e.g. {env_spec.name}-v{env_spec.version + 1}) instead of replacing it"
        )
    _SPECS[env_spec.id] = env_spec


def register_prefix(prefix: str, resolver: PrefixResolver) -> None:
    """Resolve every unregistered id that starts with ``prefix`` with ``resolver``.

    ``spec(id)`` and ``make(id, **kwargs)`` call ``resolver.spec(id)`` and
    ``resolver.make(id, **kwargs)`` for such ids; a registered id always wins, and among
    prefixes the longest match. Registering the same resolver again is a no-op.
    """
    if not isinstance(prefix, str) or not prefix:
        raise ValueError(f"register_prefix: the prefix must be a non-empty str, got {prefix!r}")
    for method in ("spec", "make"):
        if not callable(getattr(resolver, method, None)):
            raise TypeError(f"register_prefix({prefix!r}): the resolver {resolver!r} has no "
                            f"{method}() method (see turnrl.envs.registry.PrefixResolver)")
    current = _PREFIXES.get(prefix)
    if current is not None and current is not resolver:
        raise ValueError(f"prefix {prefix!r} is already resolved by {current!r}; pick another "
                         "prefix for your ids")
    _PREFIXES[prefix] = resolver


def registered_ids() -> list[str]:
    """Every registered id, sorted (built-ins and plugins)."""
    load_plugins()
    return sorted(_SPECS)


def spec(id: str) -> EnvSpec:
    """The registered spec of ``id`` (a copy: editing it changes nothing).

    For an id of a registered prefix (``gym:<id>``) it is the resolver's spec: that of the env
    with default options.
    """
    load_plugins()
    resolver = _resolver(id)
    if resolver is not None:
        return resolver.spec(id)
    return _copy(_lookup(id))


def constructor(id: str) -> Callable[..., Any] | None:
    """The class or factory ``make(id)`` calls (its entry point, imported), or None for an id
    a prefix resolver builds (``gym:<id>``)."""
    load_plugins()
    return None if _resolver(id) is not None else _load_entry_point(_lookup(id))


def import_modules(names: Sequence[str], *, search: str | None = None) -> None:
    """Import each module of ``names`` (a module that calls :func:`register` when imported:
    ``env.imports``, ``--import``), looking in ``search`` (a directory, default the current
    one) too; a module that cannot be imported is an :class:`EnvPluginError` saying why."""
    folder = os.path.abspath(search or os.getcwd())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name and not name.startswith(f"{error.name}."):
                raise EnvPluginError(f"env.imports: importing {name!r} failed: {error}; "
                                     "install what it imports") from None
            raise EnvPluginError(
                f"env.imports: no module {name!r}; give a module importable from {folder} "
                "or from PYTHONPATH, e.g. my_envs for my_envs.py or my_envs/__init__.py"
            ) from None
        except Exception as error:  # whatever the user's module raised
            raise EnvPluginError(f"env.imports: importing {name!r} raised "
                                 f"{type(error).__name__}: {error}; fix the module") from None


def make_imported(names: Sequence[str], search: str, id: str, **overrides: Any) -> Env:
    """:func:`import_modules`, then :func:`make` (picklable: a Ray worker imports the
    modules before it builds its env)."""
    import_modules(names, search=search)
    return make(id, **overrides)


def make(id: str, **overrides: Any) -> Env:
    """Build the env registered as ``id``; ``overrides`` replace its constructor defaults.

    The instance's ``spec`` carries every constructor argument it was built with, and
    ``max_turns`` reflects an override when the constructor takes ``max_turns``.
    An id of a registered prefix is built by its resolver (``make("gym:<id>", **kwargs)``
    adapts a Gymnasium env, see ``turnrl.envs.gym``).
    """
    load_plugins()
    resolver = _resolver(id)
    if resolver is not None:
        return resolver.make(id, **overrides)
    registered = _lookup(id)
    factory = _load_entry_point(registered)
    params = _keyword_params(factory)
    if params is not None:
        _check_kwargs(registered, {**registered.kwargs, **overrides}, params)
    kwargs = dict(registered.kwargs)
    if params is not None and "max_turns" in params:
        kwargs["max_turns"] = registered.max_turns
    kwargs.update(overrides)
    env = factory(**kwargs)
    if params is not None:
        kwargs = {**{n: p.default for n, p in params.items() if p.default is not p.empty}, **kwargs}
    max_turns = kwargs.get("max_turns", registered.max_turns)
    env.spec = replace(registered, kwargs=kwargs, max_turns=max_turns)
    return env


def load_plugins() -> None:
    """Load the ``turnrl.envs`` entry points once (called by ``make``, ``spec``, ...)."""
    global _plugins_scanned
    if _plugins_scanned:
        return
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        label = f"{entry_point.name} = {entry_point.value}"
        if label in _loaded_plugins:
            continue
        try:
            hook = entry_point.load()
            if callable(hook):
                hook()
        except Exception as exc:
            raise EnvPluginError(
                f"env plugin {label!r} (entry-point group {ENTRY_POINT_GROUP!r}) failed: "
                f"{type(exc).__name__}: {exc}. Fix or uninstall the package that declares it."
            ) from exc
        _loaded_plugins.add(label)
    _plugins_scanned = True


def resolves(id: str) -> bool:
    """Whether a prefix resolver (``register_prefix``) handles ``id`` (e.g. ``gym:<id>``):
    such ids need no registration, so a name check lets them through to ``make``."""
    return _resolver(id) is not None


def _resolver(id: str) -> PrefixResolver | None:
    """The resolver of the longest registered prefix of ``id``, unless ``id`` is registered."""
    if not isinstance(id, str) or id in _SPECS:
        return None
    matches = [prefix for prefix in _PREFIXES if id.startswith(prefix)]
    return _PREFIXES[max(matches, key=len)] if matches else None


def _lookup(id: str) -> EnvSpec:
    if id in _SPECS:
        return _SPECS[id]
    choices = sorted(_SPECS)
    parsed = parse_env_id(id)
    name = parsed[0] if parsed else str(id)
    versions = sorted((s for s in _SPECS.values() if s.name == name), key=lambda s: s.version)
    if versions and parsed is None:
        message = (
            f"env id {id!r} has no version; did you mean {versions[-1].id!r}? "
            f"Valid choices: {', '.join(choices)}"
        )
    elif versions:
        message = (
            f"unknown env {id!r}; registered versions of {name!r}: "
            f"{', '.join(s.id for s in versions)}"
        )
    else:
        message = (unknown_name_message("env", id, choices) + "; an env of your own is "
                   "registered by importing its module: --import my_envs, or env.imports")
    raise UnknownEnvError(message)


def _load_entry_point(env_spec: EnvSpec) -> Callable[..., Any]:
    if callable(env_spec.entry_point):
        return env_spec.entry_point
    module_name, _, attr_path = env_spec.entry_point.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for attr in attr_path.split("."):
            obj = getattr(obj, attr)
    except (ImportError, AttributeError) as exc:
        raise ImportError(
            f"env {env_spec.id!r}: cannot load entry point {env_spec.entry_point!r}: {exc}"
        ) from exc
    return obj


@functools.lru_cache(maxsize=256)
def _keyword_params(factory: Callable[..., Any]) -> dict[str, inspect.Parameter] | None:
    """Parameters that can be passed by keyword; ``None`` when anything goes (``**kwargs``).
    Cached per factory: ``make`` runs once per episode, and reading a signature cost about
    half of an arithmetic env's ``make``. (The dict is shared: read it, never change it.)"""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    params = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name: p for p in params if p.kind in kinds}


def _check_kwargs(
    env_spec: EnvSpec, kwargs: dict[str, Any], params: dict[str, inspect.Parameter]
) -> None:
    unknown = [name for name in kwargs if name not in params]
    if unknown:
        accepted = ", ".join(sorted(params)) or "none"
        raise TypeError(
            f"make({env_spec.id!r}) got unknown keyword argument(s) {', '.join(unknown)}; "
            f"{env_spec.id} accepts: {accepted}"
        )


def _copy(env_spec: EnvSpec) -> EnvSpec:
    return replace(env_spec, kwargs=dict(env_spec.kwargs), tools=list(env_spec.tools))
