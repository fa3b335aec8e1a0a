"""Setup: the pieces of a run, each built once from a validated config.

:func:`open_run` makes the run directory and loads the model (tokenizer, policy, engine),
the metrics logger and the progress display; :func:`build_learner` the learner (critic and
frozen reference when the algorithm needs them); :func:`build_collector` the collector, on
this process or on Ray workers (:func:`start_distributed`). ``turnrl train``, ``turnrl sft``
and ``turnrl eval`` all build from these functions; the loop in :mod:`turnrl.train.loop`
only calls them.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from turnrl import envs
from turnrl.agents.job import AGENT_ENV_ID, AgentJob
from turnrl.agents.runner import AgentRunner
from turnrl.algos import needs_critic
from turnrl.algos.correction import AdaptiveKLController
from turnrl.algos.presets import AlgoPreset
from turnrl.config import Config, ConfigError, save_config
from turnrl.config.checks import Validated, env_kwargs
from turnrl.envs.latency import with_latency
from turnrl.envs.protocol import Env
from turnrl.eval.evaluate import evaluate
from turnrl.io import RunDirLock, lock_run_dir, new_run_dir, run_write
from turnrl.models.base import BUILTIN, write_builtin
from turnrl.models.policy import (
    ValueModel,
    load_policy,
    load_tokenizer,
    peft_lora_kwargs,
    resolve_device,
    resolve_dtype,
    share_frozen_weights,
)
from turnrl.rewards import CombinedReward, RewardSpecError, combine
from turnrl.rollout.engine import Engine, SamplingParams, TrainingEngine
from turnrl.rollout.engines import build_engine
from turnrl.rollout.multi import MultiRunner
from turnrl.rollout.runner import Runner
from turnrl.train import multi, preflight, sft
from turnrl.train.checkpoint import (
    POLICIES,
    checkpoint_step,
    drop_checkpoints_after,
    resume_checkpoint,
)
from turnrl.train.collect import Collector
from turnrl.train.layout import privileged_prefix
from turnrl.train.learner import GradientSync, Learner
from turnrl.train.meta import record_session
from turnrl.train.players import Players
from turnrl.train.progress import Progress
from turnrl.train.samples import save_eval_samples
from turnrl.train.scoring import Shaping
from turnrl.train.tracking import MetricsLogger
from turnrl.types import Trajectory

if TYPE_CHECKING:
    from peft import PeftModel

log = logging.getLogger("turnrl")

SFT_SEED_OFFSET = 500_000_000  # SFT demonstrations use seeds disjoint from RL tasks


@dataclass
class Model:
    """The tokenizer, the trainable policy and the engine that samples from it."""

    tokenizer: PreTrainedTokenizerBase
    policy: PreTrainedModel | PeftModel  # a peft model with LoRA
    engine: TrainingEngine
    agent: AgentJob | None = None  # an agent program's job (agent.entry_point), else None


@dataclass
class Run:
    """What one training run is built from (a rollback reloads ``model`` from a
    checkpoint; everything else stays)."""

    checked: Validated
    run_dir: Path
    device: torch.device
    make_env: Callable[[], Env]
    rewards: CombinedReward | None
    model: Model
    logger: MetricsLogger
    progress: Progress
    resume_from: Path | None  # the checkpoint a resumed run continues from
    lock: RunDirLock  # this process's hold on run_dir, for the run's lifetime
    players: Players | None = None  # a multi-agent run's frozen players (frozen, pool)
    policies: dict[str, Model] = field(default_factory=dict)  # multi.policies, by name

    @property
    def cfg(self) -> Config:
        return self.checked.cfg

    def close(self) -> None:
        """Close the engine and the metrics logger, and let other processes use the run
        dir."""
        try:
            if self.model.agent is not None:
                self.model.agent.close()
            self.model.engine.close()
            for model in self.policies.values():
                model.engine.close()
            if self.players is not None:
                self.players.close()
            self.logger.close()
        finally:
            self.lock.release()

    @property
    def algo(self) -> AlgoPreset:
        return self.checked.algo


def setup_torch(cfg: Config) -> torch.device:
    """Threads, seeds and determinism; returns the device to run on."""
    torch.set_num_threads(cfg.run.threads)
    random.seed(cfg.run.seed)
    np.random.seed(cfg.run.seed)
    torch.manual_seed(cfg.run.seed)
    if cfg.run.deterministic:
        torch.use_deterministic_algorithms(True)
    return resolve_device(cfg.run.device)


def build_rewards(cfg: Config) -> CombinedReward | None:
    """``reward.terms`` as one weighted sum (None when there are none)."""
    if not cfg.reward.terms:
        return None
    origin = cfg.origin_of("reward.terms")
    try:
        return combine(cfg.reward.terms,
                       where=f"{origin}: reward.terms" if origin else "reward.terms")
    except RewardSpecError as error:
        raise ConfigError(str(error)) from None


def env_factory(cfg: Config, *, evaluation: bool = False) -> Callable[[], Env]:
    """Builds one env of the config (picklable: Ray workers build their envs with it), with
    the evaluation's kwargs when ``evaluation`` (:func:`~turnrl.config.checks.env_kwargs`);
    an agent program's run has none (:func:`no_env`)."""
    if cfg.agent.entry_point is not None:
        return no_env
    kwargs = env_kwargs(cfg, evaluation=evaluation)
    make = (functools.partial(envs.make_imported, cfg.env.imports, os.getcwd(), cfg.env.id,
                              **kwargs)
            if cfg.env.imports else functools.partial(envs.make, cfg.env.id, **kwargs))
    lat = cfg.env.latency
    if lat.median_s > 0:
        return functools.partial(with_latency, make, lat.median_s, lat.sigma, lat.max_s)
    return make


def no_env() -> Env:
    """The env factory of an agent program's run, which plays no env."""
    raise RuntimeError("an agent program's run (agent.entry_point) plays no env")


def model_source(cfg: Config, run_dir: Path) -> str:
    """The model dir to load: a built-in model (``tiny``, ``tiny-random``) is written into
    the run dir first."""
    if cfg.model.path not in BUILTIN:
        return cfg.model.path
    return str(write_builtin(cfg.model.path, run_dir.resolve() / "base_model", cfg.model.tiny))


def engine_options(cfg: Config) -> dict[str, Any]:
    """The engine's options from ``rollout.*`` (:func:`turnrl.rollout.engines.build_engine`;
    they pickle, for Ray rollout workers)."""
    r = cfg.rollout
    options: dict[str, Any] = {"kind": r.engine, "max_batch_size": r.max_batch_size,
                               "seed": cfg.run.seed}
    if r.engine == "vllm":
        on_gpu = resolve_device(cfg.run.device).type == "cuda"
        options.update(
            max_model_len=r.max_context_tokens, kv_cache_gib=r.kv_cache_gib,
            gpu_memory_utilization=r.gpu_memory_utilization,
            tensor_parallel_size=r.tensor_parallel_size, block_size=r.block_size,
            sleep_mode=on_gpu if r.sleep_mode is None else r.sleep_mode,
            lora_rank=cfg.model.lora.r if cfg.model.lora.enabled else None)
    return options


def load_model(cfg: Config, source: str | Path, device: torch.device, *,
               fresh_lora: bool, engine: TrainingEngine | None = None,
               agent: AgentJob | None = None) -> Model:
    """The tokenizer, the policy and its engine from a model dir or a checkpoint (which
    holds LoRA adapters already: ``fresh_lora=False``). ``engine``: an engine to keep (a
    rollback) instead of starting one; it takes the loaded weights, unless it is the hf
    engine, which is rebuilt around the new policy. ``agent``: the agent program's job to
    keep (a rollback); else a new one when ``agent.entry_point`` is set."""
    dtype = resolve_dtype(cfg.model.dtype, device)
    lora = peft_lora_kwargs(cfg.model.lora) if cfg.model.lora.enabled and fresh_lora else None
    tokenizer = load_tokenizer(source)
    policy = load_policy(source, dtype=dtype, device=device, lora=lora)
    if engine is not None and cfg.rollout.engine == "vllm":
        engine.load_weights(policy)
    else:
        engine = build_engine(policy, tokenizer, engine_options(cfg))
    if agent is None and cfg.agent.entry_point is not None:
        agent = AgentJob.from_config(cfg)
    return Model(tokenizer, policy, engine, agent)


def policy_source(source: str, name: str) -> str:
    """Where separate policy ``name`` loads from: ``policies/<name>`` of a checkpoint or an
    SFT model dir that has one, else the run's model source (the base: a fresh start)."""
    own = Path(source) / POLICIES / name
    return str(own) if own.is_dir() else source


def check_inputs(cfg: Config, *, resume: Path | None) -> list | None:
    """What can be checked before the run dir exists (:mod:`turnrl.train.preflight`): the
    env serves what the reward terms read; the model (files whole, context length, LoRA
    targets) and its tokenizer; and a user's SFT dataset (returned, read once)."""
    preflight.check_rewards(cfg, build_rewards(cfg))
    if resume is None:
        preflight.check_model(cfg)
    else:
        preflight.check_resumed_context(cfg, resume)
    if resume is None and cfg.model.path not in BUILTIN:
        load_tokenizer(cfg.model.path)  # e.g. no chat template: said before any work
    if resume is None and cfg.sft.enabled and cfg.sft.source == "jsonl" \
            and cfg.sft.path is not None:
        return sft.load_conversations(cfg.sft.path)
    return None


def open_run(checked: Validated, *, resume: Path | None = None,
             resume_from: str | None = None) -> Run:
    """The run directory (new, or ``resume``; locked for this process), its resolved
    ``config.yaml``, the model (from the checkpoint it resumes from: ``resume_from``, else
    the newest, checked before anything is written) and the metrics logger."""
    cfg = checked.cfg
    rewards = build_rewards(cfg)
    run_dir = resume if resume is not None else new_run_dir(cfg.run.out_dir, cfg.run.name)
    lock = lock_run_dir(run_dir)
    try:
        checkpoint = resume_checkpoint(run_dir, resume_from) if resume is not None else None
        with run_write("config.yaml", run_dir / "config.yaml"):
            save_config(cfg, run_dir / "config.yaml")
        run = _open(checked, run_dir, rewards, checkpoint, lock, resuming=resume is not None)
        if checkpoint is not None:  # going on from an earlier one: the newer are void
            for dropped in drop_checkpoints_after(run_dir, checkpoint_step(checkpoint)):
                log.warning("resuming from %s: deleted the newer %s", checkpoint.name,
                            dropped.name)
        return run
    except BaseException:
        lock.release()
        raise


def _open(checked: Validated, run_dir: Path, rewards: CombinedReward | None,
          resume_from: Path | None, lock: RunDirLock, *, resuming: bool) -> Run:
    """:func:`open_run` after the run dir is locked and its checkpoint checked."""
    cfg = checked.cfg
    device = setup_torch(cfg)
    record_session(run_dir, device)
    source = str(resume_from) if resume_from else model_source(cfg, run_dir)
    model = load_model(cfg, source, device, fresh_lora=resume_from is None)
    resume_at = None
    if resume_from is not None:
        saved = json.loads((resume_from / "state.json").read_text())
        if "metrics_lines" in saved:
            resume_at = (saved["metrics_lines"], saved["step"])
    elif resuming:  # killed before its first checkpoint: the run starts over
        resume_at = (0, -1)
    logger = MetricsLogger(run_dir, tensorboard=cfg.log.tensorboard, wandb=cfg.log.wandb,
                           mlflow=cfg.log.mlflow, run_name=run_dir.name,
                           config=json.loads(json.dumps(cfg.model_dump())), resume_at=resume_at)
    players = multi.players_for(cfg, run_dir, model.tokenizer, device, engine_options(cfg))
    policies = {name: load_model(cfg, policy_source(source, name), device,
                                 fresh_lora=not (Path(source) / POLICIES / name).is_dir())
                for name in cfg.multi.policies}
    for other in policies.values():  # LoRA: one frozen base in memory for every adapter
        share_frozen_weights(model.policy, other.policy)
    return Run(checked, run_dir, device, env_factory(cfg), rewards, model, logger,
               Progress(enabled=cfg.log.progress), resume_from, lock, players, policies)


def sampling(cfg: Config, temperature: float, max_turns: int | None = None
             ) -> tuple[SamplingParams, dict[str, Any]]:
    """The sampling parameters of every agent turn and the runner's keyword arguments
    (``max_turns``: the cap on agent turns, None for the env's own)."""
    r = cfg.rollout
    params = SamplingParams(max_new_tokens=r.max_new_tokens, temperature=temperature,
                            top_p=r.top_p)
    return params, {"max_context_tokens": r.max_context_tokens,
                    "step_timeout_s": cfg.env.step_timeout_s, "sampling_seed": cfg.run.seed,
                    "max_turns": max_turns}


def runner(cfg: Config, model: Model, temperature: float, *, evaluation: bool = False,
           max_turns: int | None = None, policies: dict[str, Model] | None = None
           ) -> Runner | AgentRunner | MultiRunner:
    """The runner of the run's episodes: the env runner (capped at ``max_turns`` agent
    turns, or ``eval.max_turns`` when ``evaluation``), an agent program's runner (on its
    held-out tasks when ``evaluation``), or for a multi-agent env the runner of its seats
    (``multi.agents``); an agent program's calls that name a separate policy of
    ``policies`` are answered by it."""
    if model.agent is not None:
        return model.agent.runner(model.engine, model.tokenizer, temperature,
                                  evaluation=evaluation, policies=engines(policies))
    cap = cfg.eval.max_turns if evaluation else max_turns
    params, kwargs = sampling(cfg, temperature, cap)
    agents = envs.spec(cfg.env.id).agents
    if agents:
        return multi.multi_runner(cfg, model.engine, model.tokenizer, params,
                                  multi.seats(cfg, agents))
    return Runner(model.engine, model.tokenizer, params, **kwargs)


def run_eval(cfg: Config, model: Model, make_env: Callable[[], Env], progress: Progress,
             label: str, players: Players | None = None,
             policies: dict[str, Model] | None = None
             ) -> tuple[dict[str, float], list[Trajectory]]:
    """Held-out evaluation (``eval.*`` on seeds from ``env.eval_seed_start``; ``policies``:
    the separate policies of ``multi.policies``): the summary and the episodes."""
    e = cfg.eval
    seeds = range(cfg.env.eval_seed_start, cfg.env.eval_seed_start + e.episodes)
    agents = envs.spec(cfg.env.id).agents if cfg.agent.entry_point is None else ()
    if agents:  # against each of multi.eval_opponents
        return multi.run_eval(cfg, model.engine, model.tokenizer, sampling(cfg, e.temperature)[0],
                              make_env, agents, progress, label, players, engines(policies))
    with progress.task(f"eval ({label})", e.episodes * e.samples_per_task) as advance:
        summary, episodes = evaluate(
            runner(cfg, model, e.temperature, evaluation=True, policies=policies), make_env,
            seeds,
            samples_per_task=e.samples_per_task, pass_k=e.pass_k, on_done=lambda: advance(""),
            tools=cfg.agent.entry_point is not None or bool(envs.spec(cfg.env.id).tools))
    progress.note(f"eval ({label}): success {summary['success']:.3f} "
                  f"[{summary['success_lo']:.3f}, {summary['success_hi']:.3f}] over "
                  f"{summary['episodes']:.0f} episodes")
    return summary, episodes


def evaluate_run(run: Run, step: int, label: str) -> dict[str, float]:
    """:func:`run_eval` on the run's current model, logged as ``eval/*`` at ``step`` with
    its wall time (``perf/eval_s``); its episodes go to ``samples/eval_<step>.jsonl``."""
    start = time.perf_counter()
    summary, episodes = run_eval(run.cfg, run.model, env_factory(run.cfg, evaluation=True),
                                 run.progress, label, run.players, run.policies)
    run.logger.log(step, {**{f"eval/{k}": v for k, v in summary.items()},
                          "perf/eval_s": time.perf_counter() - start}, phase="eval")
    save_eval_samples(run.run_dir, step, episodes)
    return summary


def frozen_reference(run: Run, policy: str | None = None) -> torch.nn.Module | None:
    """The KL reference (None when ``algo.kl_coef`` is 0): the policy as RL first started,
    saved once to ``run_dir/reference`` (a separate policy's: ``reference_<policy>``; LoRA
    merged in) so that a resumed run keeps comparing against the same model; a fresh start
    (or a restart of a run killed before its first checkpoint) replaces an old copy."""
    if not run.algo.kl_coef:
        return None
    path = run.run_dir / ("reference" if policy is None else f"reference_{policy}")
    if run.resume_from is None:
        shutil.rmtree(path, ignore_errors=True)
    if not path.is_dir():
        model = copy.deepcopy((run.model if policy is None else run.policies[policy]).policy)
        if hasattr(model, "merge_and_unload"):  # a peft policy: save a full model
            model = cast("PeftModel", model).merge_and_unload()  # PreTrainedModel has none
        tmp = run.run_dir / ".tmp_reference"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            with run_write("the KL reference model", tmp):
                model.save_pretrained(str(tmp))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        os.replace(tmp, path)
    dtype = resolve_dtype(run.cfg.model.dtype, run.device)
    return load_policy(path, dtype=dtype, device=run.device).eval().requires_grad_(False)


def build_learner(run: Run, *, source: Path | None, reference: torch.nn.Module | None,
                  sync: GradientSync | None = None, policy: str | None = None) -> Learner:
    """The learner of the run's current policy (``policy``: a separate policy of
    ``multi.policies``, its critic under ``source/policies/<policy>``); its critic loaded
    from checkpoint ``source`` (None: a new critic), and ``reference`` the frozen KL
    reference (None when the algorithm has no KL term)."""
    cfg, algo = run.cfg, run.algo
    model = run.model if policy is None else run.policies[policy]
    if policy is not None and source is not None:
        source = source / POLICIES / policy
    critic = (ValueModel.from_policy(model.policy, source=source, shared=cfg.critic.shared)
              if needs_critic(algo.advantage) else None)
    norm_len = cfg.train.norm_len or run.checked.env_spec.max_turns * cfg.rollout.max_new_tokens
    return Learner(model.policy, algo, cfg.train, critic_cfg=cfg.critic, critic=critic,
                   reference=reference, norm_len=float(norm_len),
                   temperature=cfg.rollout.temperature, seed=cfg.run.seed, sync=sync)


def kl_controller(algo: AlgoPreset) -> AdaptiveKLController | None:
    """The adaptive KL coefficient's controller (``algo.kl_target``), or None."""
    return (AdaptiveKLController(coef=algo.kl_coef, target=algo.kl_target)
            if algo.kl_target else None)


def shaping(cfg: Config, algo: AlgoPreset) -> Shaping:
    return Shaping(env_weight=cfg.reward.env_weight, score_failures=cfg.env.on_error == "score",
                   error_reward=cfg.env.error_reward, max_len=cfg.rollout.max_new_tokens,
                   overlong_cache=algo.overlong_cache)


def build_collector(run: Run, play: Callable[[int, int], list[Trajectory]], *,
                    source: Any = None, cursor: int = 0) -> Collector:
    """The collector of RL episodes: ``play(first, n)`` plays groups ``first..first+n−1``
    (here or on Ray workers); ``source`` are asynchronous groups (``train.mode=async``)."""
    cfg, t = run.cfg, run.cfg.train
    return Collector(play, rewards=run.rewards, shaping=shaping(cfg, run.algo),
                     filters=run.algo.filters, n_groups=t.n_groups, group_size=t.group_size,
                     max_tries=t.max_sampling_tries,
                     max_failed_batches=cfg.env.max_failed_batches,
                    env_id=AGENT_ENV_ID if cfg.agent.entry_point else cfg.env.id,
                     source=source, cursor=cursor)


def local_play(run: Run, step: Callable[[], int] = lambda: 0
               ) -> Callable[[int, int], list[Trajectory]]:
    """Play groups in this process: group ``i`` has task seed ``env.train_seed_start + i``,
    capped at ``rollout.max_turns`` of the current RL ``step()`` (a horizon curriculum)."""
    def play(first: int, n: int) -> list[Trajectory]:
        seeds = [run.cfg.env.train_seed_start + first + i for i in range(n)]
        if run.model.agent is None and (run.players is not None or run.policies
                                        or run.cfg.multi.seatings):
            return multi.play_groups(run.cfg, run.model.engine, run.model.tokenizer,
                                     sampling(run.cfg, run.cfg.rollout.temperature)[0],
                                     run.make_env, seeds, first, run.players,
                                     engines(run.policies))  # players, policies, seatings
        return runner(run.cfg, run.model, run.cfg.rollout.temperature, policies=run.policies,
                      max_turns=run.cfg.rollout.turn_cap(step())).collect(
            run.make_env, seeds, run.cfg.train.group_size, first_group_id=first)

    return play


def engines(policies: dict[str, Model] | None) -> dict[str, Engine]:
    """The engine of each separate policy, by name."""
    return {name: model.engine for name, model in (policies or {}).items()}


def stamp_version(run: Run, version: int) -> None:
    """Every engine of the run (its model's, each separate policy's) stamps ``version`` on
    the tokens it samples."""
    for model in [run.model, *run.policies.values()]:
        model.engine.version = version


def critic_prefixes(run: Run, learner: Learner,
                    trajectories: list[Trajectory]) -> list[list[int]] | None:
    """A privileged critic's extra input per trajectory (``critic.privileged``), else None."""
    if not (run.cfg.critic.privileged and learner.critic is not None):
        return None
    return [privileged_prefix(run.model.tokenizer, t) for t in trajectories]
