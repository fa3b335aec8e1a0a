"""The training loop: SFT warm start → evaluate → RL steps → evaluate, with logs and checkpoints.

One RL step reads top to bottom as in docs/design.md: collect episodes, lay them out as
tensors, estimate advantages, update, push weights to the engine, log, evaluate, checkpoint.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
import logging
import os
import random
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from rich.markup import escape

from turnrl import envs
from turnrl.algos import ADVANTAGES, AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES, PRESETS
from turnrl.algos import needs_critic as advantage_needs_critic
from turnrl.algos import needs_groups as advantage_needs_groups
from turnrl.algos.correction import (
    AdaptiveKLController,
    behaviour_correction,
    kl_token_penalty,
)
from turnrl.algos.filters import informative_groups, overlong_penalty, turn_lengths, turn_sums
from turnrl.algos.functional import masked_mean
from turnrl.algos.presets import AlgoPreset
from turnrl.config import (
    AlgoConfig,
    Config,
    ConfigError,
    dump_config,
    save_config,
    validate_names,
)
from turnrl.distributed.ray_backend import (
    AsyncCollector,
    GroupStream,
    LearnerGroup,
    RayCluster,
    check_resources,
)
from turnrl.envs.latency import with_latency
from turnrl.envs.protocol import Env, HasTools
from turnrl.envs.registry import GYM_PREFIX, UnknownEnvError
from turnrl.eval.evaluate import evaluate
from turnrl.io import atomic_write_text
from turnrl.models.chat import encode, render
from turnrl.models.policy import (
    ValueModel,
    check_model_path,
    load_policy,
    load_tokenizer,
    peft_lora_kwargs,
    resolve_device,
    resolve_dtype,
)
from turnrl.models.tiny import init_tiny_model
from turnrl.rewards import CombinedReward, RewardSpecError, combine
from turnrl.rollout.engine import SamplingParams
from turnrl.rollout.hf import HFEngine
from turnrl.rollout.runner import Runner
from turnrl.rollout.stats import rollout_metrics
from turnrl.train import sft
from turnrl.train.alarms import ACTIONABLE, AlarmMonitor, default_rules
from turnrl.train.batch import layout, turn_start_values, with_critic_prefix
from turnrl.train.checkpoint import (
    checkpoint_step,
    checkpoints,
    latest_checkpoint,
    load_training_state,
    prune_checkpoints,
    save_checkpoint,
)
from turnrl.train.learner import Learner, OptimConfig, state_values
from turnrl.train.progress import Progress
from turnrl.train.tracking import MetricsLogger
from turnrl.types import AdvantageInputs, Batch, Trajectory

SFT_SEED_OFFSET = 500_000_000  # SFT demonstrations use seeds disjoint from RL tasks

log = logging.getLogger("turnrl")


@dataclass
class RunResult:
    """What a finished run reports (also written to ``eval.json``)."""

    run_dir: Path
    before: dict[str, float] | None
    after: dict[str, float] | None
    history: list[dict[str, float]] = field(default_factory=list)
    wall_time_s: float = 0.0


def check_names(cfg: Config) -> None:
    """Every registry name in the config exists (before any heavy work)."""
    validate_names(cfg, {
        "algo.preset": sorted(PRESETS),
        "algo.advantage": ADVANTAGES.names(),
        "algo.policy_loss": POLICY_LOSSES.names(),
        "algo.loss_agg": AGGREGATIONS.names(),
        "algo.kl_estimator": KL_ESTIMATORS.names(),
        # gym:<id> names any Gymnasium env; check_env_kwargs checks it exists
        "env.id": envs.registered_ids() + ([cfg.env.id]
                                           if cfg.env.id.startswith(GYM_PREFIX) else []),
    })


def check_env_kwargs(cfg: Config) -> envs.EnvSpec:
    """Build the env once so a bad ``env.kwargs`` entry fails before any heavy work; returns
    that instance's spec (``max_turns`` and the capabilities can depend on the kwargs; the
    registered spec has the defaults)."""
    try:
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
    return env.spec


def check_algo(cfg: Config, algo: AlgoPreset) -> None:
    """Cross-key checks of the resolved algorithm that the config tree cannot see alone."""
    if algo.kl_target is not None and not algo.kl_coef:
        raise ConfigError("algo.kl_target: the adaptive controller scales kl_coef, so it needs "
                          "a starting algo.kl_coef > 0 (e.g. algo.kl_coef=0.05)")
    if advantage_needs_groups(algo.advantage) and cfg.train.group_size < 2:
        raise ConfigError(f"train.group_size: advantage {algo.advantage!r} compares episodes "
                          "of one task, so it needs group_size >= 2; got 1")
    c = cfg.critic
    if not advantage_needs_critic(algo.advantage):
        used = [f"critic.{key}={getattr(c, key)}" for key in ("shared", "privileged")
                if getattr(c, key)] + ([f"critic.warmup_steps={c.warmup_steps}"]
                                       if c.warmup_steps else [])
        if used:
            raise ConfigError(
                f"{', '.join(used)}: advantage {algo.advantage!r} (preset {cfg.algo.preset!r}) "
                "trains no critic; use a critic preset (ppo, turn_ppo) or drop the key")
    if (cfg.distributed.learner_strategy == "fsdp" and c.shared
            and advantage_needs_critic(algo.advantage)):
        raise ConfigError(
            "critic.shared=true with distributed.learner_strategy=fsdp: a value head on the "
            "sharded policy is not supported; set critic.shared=false (a separate critic, "
            "sharded too) or use learner_strategy=ddp")
    if c.privileged and not envs.spec(cfg.env.id).has_privileged_info:
        raise ConfigError(
            f"critic.privileged: env {cfg.env.id!r} has no privileged_info() (its spec does "
            "not declare has_privileged_info); set critic.privileged=false or use an env "
            "that provides it")


def check_distributed(cfg: Config) -> None:
    """``distributed.*`` and ``train.mode`` agree, and Ray is installed when it is asked for."""
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
    try:
        import ray  # noqa: F401
    except ImportError:
        where = cfg.origin_of("distributed.backend")
        raise ConfigError(f"{where + ': ' if where else ''}distributed.backend=ray needs Ray, "
                          "which is not installed: pip install 'turnrl[ray]' (or set "
                          "distributed.backend=none)") from None
    if d.ray_address is None:  # the local instance this run will start: check it now
        check_resources(d, {"CPU": float(d.num_cpus or os.cpu_count() or 1),
                            "GPU": float(torch.cuda.device_count())})


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


def apply_rewards(trajectories: list[Trajectory], rewards: CombinedReward | None, *,
                  env_weight: float) -> None:
    """Turn rewards become ``env_weight · r_k``, plus ``Σ_i w_i f_i(trajectory)`` on the
    last turn; each term's unweighted value is kept in ``info["reward_terms"]``."""
    for traj in trajectories:
        traj.turn_rewards = [env_weight * r for r in traj.turn_rewards]
        if rewards is None or not traj.turn_rewards or "error" in traj.info:
            continue
        try:
            total, parts = rewards.score(traj)
        except Exception as error:  # a reward function failed: this episode only
            traj.info["error"] = (f"reward function raised {type(error).__name__}: {error} "
                                  f"(env {traj.env_id}, seed {traj.seed})")
            log.warning("episode failed: %s", traj.info["error"])
            continue
        traj.turn_rewards[-1] += total
        traj.info["reward_terms"] = parts


class RolloutError(RuntimeError):
    """Every episode of ``env.max_failed_batches`` consecutive batches failed."""


class Interrupted(RuntimeError):
    """SIGINT or SIGTERM stopped the RL loop after a step; a checkpoint was saved."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum


@contextlib.contextmanager
def stop_signals(trainer: Trainer) -> Iterator[None]:
    """While the RL loop runs, SIGINT and SIGTERM ask it to stop after the current step
    (``trainer.stop_signal``) instead of killing it mid-update; a second one stops at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def request(signum: int, _frame: object) -> None:
        if trainer.stop_signal is not None:  # asked twice: the user means it
            raise KeyboardInterrupt
        trainer.stop_signal = signum
        log.warning("%s: stopping after this step (a checkpoint will be saved)",
                    signal.Signals(signum).name)

    previous = {s: signal.signal(s, request) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


class AlarmStop(RuntimeError):
    """A collapse alarm stopped the run (``alarms.on_alarm=stop``, or too many rollbacks)."""


def handle_failures(trajectories: list[Trajectory], *, on_error: str,
                    error_reward: float) -> tuple[list[Trajectory], list[Trajectory]]:
    """Split failed episodes (``info["error"]``) from the batch: ``exclude`` leaves them out;
    ``score`` keeps those with sampled tokens, their total reward set to ``error_reward`` (on
    the last turn). Returns (kept, failed)."""
    failed = [t for t in trajectories if "error" in t.info]
    if on_error == "score":
        for traj in failed:
            if traj.num_sampled_tokens:
                traj.turn_rewards = [0.0] * (traj.num_turns - 1) + [error_reward]
    kept = [t for t in trajectories if "error" not in t.info
            or (on_error == "score" and t.num_sampled_tokens)]  # in the batch's order
    return kept, failed


def reward_term_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """``reward/<label>``: each term's mean over the scored episodes."""
    sums: dict[str, list[float]] = {}
    for traj in trajectories:
        for label, value in traj.info.get("reward_terms", {}).items():
            sums.setdefault(f"reward/{label}", []).append(value)
    return {key: sum(values) / len(values) for key, values in sums.items()}


def resolve_algo(algo: AlgoConfig) -> AlgoPreset:
    """The preset named by ``algo.preset`` with every key the config sets overridden."""
    overrides = {f.name: getattr(algo, f.name) for f in dataclasses.fields(AlgoPreset)
                 if f.name in AlgoConfig.model_fields and getattr(algo, f.name) is not None}
    return dataclasses.replace(PRESETS[algo.preset], **overrides)


def setup_torch(cfg: Config) -> torch.device:
    torch.set_num_threads(cfg.run.threads)
    random.seed(cfg.run.seed)
    np.random.seed(cfg.run.seed)
    torch.manual_seed(cfg.run.seed)
    if cfg.run.deterministic:
        torch.use_deterministic_algorithms(True)
    return resolve_device(cfg.run.device)


def new_run_dir(cfg: Config) -> Path:
    """``<out_dir>/<name>``, or ``<name>-2``, ``-3``... if taken."""
    root = Path(cfg.run.out_dir)
    run_dir, n = root / cfg.run.name, 1
    while run_dir.exists():
        n += 1
        run_dir = root / f"{cfg.run.name}-{n}"
    run_dir.mkdir(parents=True)
    return run_dir


def model_source(cfg: Config, run_dir: Path) -> str:
    """The model dir to load: the built-in tiny model is written into the run dir first."""
    if cfg.model.path != "tiny":
        return cfg.model.path
    return str(init_tiny_model(run_dir.resolve() / "base_model", cfg.model.tiny))


def env_factory(cfg: Config) -> Callable[[], Env]:
    """Builds one env of the config (picklable: Ray workers build their envs with it)."""
    make = functools.partial(envs.make, cfg.env.id, **cfg.env.kwargs)
    lat = cfg.env.latency
    if lat.median_s > 0:
        return functools.partial(with_latency, make, lat.median_s, lat.sigma, lat.max_s)
    return make


def save_samples(run_dir: Path, step: int, trajectories: list[Trajectory], batch: Batch,
                 n: int) -> None:
    """``samples/step_<step>.jsonl``: the first ``n`` trajectories with their advantages."""
    if n <= 0:
        return
    (run_dir / "samples").mkdir(exist_ok=True)
    lines = []
    for row, traj in enumerate(trajectories[:n]):
        record = traj.to_dict()
        if batch.adv is not None:
            used = [round(a, 6) for a in batch.adv[row, : len(traj.token_ids)].tolist()]
            record["advantages"] = used + [0.0] * (len(traj.token_ids) - len(used))
        lines.append(json.dumps(record))
    atomic_write_text(run_dir / "samples" / f"step_{step}.jsonl", "\n".join(lines) + "\n")


class Trainer:
    """Builds every part from a :class:`Config` and runs the stages of a training job."""

    def __init__(self, cfg: Config, *, resume: Path | None = None) -> None:
        check_names(cfg)
        check_distributed(cfg)
        env_spec = check_env_kwargs(cfg)
        self.cfg = cfg
        self.algo = resolve_algo(cfg.algo)
        check_algo(cfg, self.algo)
        if cfg.train.mode == "async" and cfg.train.max_staleness > 0 \
                and self.algo.is_correction == "none":
            # trajectories come from older policies: weight by the learner's own old log-probs
            self.algo = dataclasses.replace(self.algo, is_correction="tis")
            log.info("train.mode=async: algo.is_correction=tis (behaviour-policy correction)")
        self.rewards = build_rewards(cfg)
        self.device = setup_torch(cfg)
        self.make_env = env_factory(cfg)
        self.env_spec = env_spec  # built with env.kwargs (e.g. max_turns)
        if resume is None and cfg.model.path != "tiny":
            check_model_path(cfg.model.path)  # before the run dir exists
            load_tokenizer(cfg.model.path)  # e.g. no chat template: said before any work
        self.sft_conversations = (  # a user's dataset is checked before any work, too
            sft.load_conversations(cfg.sft.path)
            if resume is None and cfg.sft.enabled and cfg.sft.source == "jsonl"
            and cfg.sft.path is not None else None)
        self.run_dir = resume if resume is not None else new_run_dir(cfg)
        save_config(cfg, self.run_dir / "config.yaml")
        self.resume_from = latest_checkpoint(self.run_dir) if resume is not None else None
        source = str(self.resume_from) if self.resume_from else model_source(cfg, self.run_dir)
        self.load_model(source, fresh_lora=self.resume_from is None)
        self.progress = Progress(enabled=cfg.log.progress)
        resume_at = None
        if self.resume_from is not None:
            saved = json.loads((self.resume_from / "state.json").read_text())
            if "metrics_lines" in saved:
                resume_at = (saved["metrics_lines"], saved["step"])
        elif resume is not None:  # killed before its first checkpoint: the run starts over
            resume_at = (0, -1)
        self.logger = MetricsLogger(self.run_dir, tensorboard=cfg.log.tensorboard,
                                    wandb=cfg.log.wandb, mlflow=cfg.log.mlflow,
                                    run_name=self.run_dir.name,
                                    config=json.loads(json.dumps(cfg.model_dump())),
                                    resume_at=resume_at)
        a = cfg.alarms
        self.monitor = AlarmMonitor(default_rules(
            min_entropy=a.min_entropy, max_zero_std_groups=a.max_zero_std_groups,
            max_kl=a.max_kl, grad_spike=a.grad_spike, min_length_ratio=a.min_length_ratio,
            max_repeated=a.max_repeated, max_grad_norm=cfg.train.max_grad_norm),
            patience=a.patience)
        self.stop_signal: int | None = None  # SIGINT/SIGTERM received during RL
        self.learner: Learner | None = None
        self.start_step = 0
        self.seed_cursor = 0  # next RL task seed offset (and group id)
        self.failed_batches = 0  # consecutive batches in which every episode failed
        self.rollbacks = 0  # alarms.on_alarm=rollback: rollbacks so far
        self.last_error = ""
        self.kl_controller: AdaptiveKLController | None = None
        # distributed.backend=ray: the workers, the data-parallel learners, async collection
        self.cluster: RayCluster | None = None
        self.stream: GroupStream | None = None
        self.collector: AsyncCollector | None = None
        self.learner_group: LearnerGroup | None = None
        self.policy_version = 0  # learner updates so far (stamped on sampled tokens)
        self._worker_stats: list[dict[str, float]] = []

    # ------------------------------------------------------------------ helpers
    def load_model(self, source: str, *, fresh_lora: bool) -> None:
        """(Re)build the tokenizer, the policy and its engine from a model dir or a
        checkpoint (which holds LoRA adapters already: ``fresh_lora=False``)."""
        cfg = self.cfg
        dtype = resolve_dtype(cfg.model.dtype, self.device)
        lora = peft_lora_kwargs(cfg.model.lora) if cfg.model.lora.enabled and fresh_lora else None
        self.tokenizer = load_tokenizer(source)
        self.policy = load_policy(source, dtype=dtype, device=self.device, lora=lora)
        self.engine = HFEngine(self.policy, eos_token_id=self.tokenizer.eos_token_id,
                               pad_token_id=self.tokenizer.pad_token_id,
                               max_batch_size=cfg.rollout.max_batch_size, seed=cfg.run.seed)

    def frozen_reference(self) -> torch.nn.Module:
        """The KL reference: the policy as RL first started, saved once to
        ``run_dir/reference`` (LoRA merged in) so that a resumed run keeps comparing against
        the same model."""
        path = self.run_dir / "reference"
        if self.resume_from is None and self.rollbacks == 0:  # a fresh start (or a restart
            shutil.rmtree(path, ignore_errors=True)  # of a run killed before its checkpoint)
        if not path.is_dir():
            model = copy.deepcopy(self.policy)
            if hasattr(model, "merge_and_unload"):  # a peft policy: save a full model
                model = model.merge_and_unload()
            tmp = self.run_dir / ".tmp_reference"
            shutil.rmtree(tmp, ignore_errors=True)
            model.save_pretrained(str(tmp))
            os.replace(tmp, path)
        dtype = resolve_dtype(self.cfg.model.dtype, self.device)
        return load_policy(path, dtype=dtype, device=self.device).eval().requires_grad_(False)

    def sampling(self, temperature: float) -> tuple[SamplingParams, dict]:
        """The sampling parameters of every agent turn and the runner's keyword arguments."""
        r = self.cfg.rollout
        params = SamplingParams(max_new_tokens=r.max_new_tokens, temperature=temperature,
                                top_p=r.top_p)
        return params, {"max_context_tokens": r.max_context_tokens,
                        "step_timeout_s": self.cfg.env.step_timeout_s,
                        "sampling_seed": self.cfg.run.seed}

    def runner(self, temperature: float) -> Runner:
        params, kwargs = self.sampling(temperature)
        return Runner(self.engine, self.tokenizer, params, **kwargs)

    def start_distributed(self) -> None:
        """``distributed.backend=ray``: start the workers with the current policy, and the
        data-parallel learners and asynchronous collection when configured."""
        cfg, d = self.cfg, self.cfg.distributed
        if d.backend != "ray":
            return
        params, runner_kwargs = self.sampling(cfg.rollout.temperature)
        self.cluster = RayCluster(
            d, policy=self.policy, tokenizer=self.tokenizer, make_env=self.make_env,
            params=params, runner_kwargs=runner_kwargs,
            engine_kwargs={"max_batch_size": cfg.rollout.max_batch_size, "seed": cfg.run.seed})
        self.engine.version = self.policy_version = self.start_step
        self.cluster.push_weights(self.policy, self.policy_version, wait=True)
        first_seed = cfg.env.train_seed_start
        self.stream = GroupStream(self.cluster, cfg.train.group_size,
                                  seed_of=lambda index: first_seed + index)
        if cfg.train.mode == "async":
            self.collector = AsyncCollector(
                self.stream, cfg.train.n_groups, cfg.train.max_staleness,
                start=self.seed_cursor,
                max_rejected=cfg.train.n_groups * cfg.train.max_sampling_tries)
        if d.num_learners > 1:
            self.learner_group = LearnerGroup(d, self.device)

    def stop_distributed(self) -> None:
        for part in (self.learner_group, self.cluster):
            if part is not None:
                part.close()
        self.cluster = self.stream = self.collector = self.learner_group = None

    def play_groups(self, first: int, n: int) -> list[Trajectory]:
        """Groups ``first .. first + n − 1`` (task seed ``env.train_seed_start + index``), on
        the Ray workers or in this process."""
        if self.stream is not None:
            return self.stream.collect(list(range(first, first + n)))
        seeds = [self.cfg.env.train_seed_start + first + i for i in range(n)]
        return self.runner(self.cfg.rollout.temperature).collect(
            self.make_env, seeds, self.cfg.train.group_size, first_group_id=first)

    def push_weights(self) -> None:
        """The learner's weights to the local engine and the rollout workers (a new
        version; in async mode the workers take it between two decoding steps)."""
        assert self.learner is not None
        self.engine.load_weights(self.learner.policy)
        self.policy_version += 1
        self.engine.version = self.policy_version
        if self.cluster is not None:
            self.cluster.push_weights(self.learner.policy, self.policy_version,
                                      wait=self.cfg.train.mode == "sync")

    def worker_metrics(self) -> dict[str, float]:
        """``perf/``: each rollout worker's episodes/s, sampled tokens/s and busy fraction
        since the last step, the restarts so far and the policy version."""
        if self.cluster is None:
            return {}
        now = self.cluster.worker_stats()
        before = self._worker_stats or [dict.fromkeys(now[0], 0.0) for _ in now]
        self._worker_stats = now
        metrics = {"perf/worker_restarts": float(self.cluster.restarts),
                   "perf/policy_version": float(self.policy_version)}
        total = 0.0
        for i, (a, b) in enumerate(zip(now, before, strict=True)):
            dt = max(a["wall_s"] - b["wall_s"], 1e-9)
            episodes = (a["episodes"] - b["episodes"]) / dt
            total += episodes
            metrics[f"perf/rollout-{i}/episodes_per_s"] = episodes
            metrics[f"perf/rollout-{i}/tokens_per_s"] = (a["sampled_tokens"]
                                                         - b["sampled_tokens"]) / dt
            metrics[f"perf/rollout-{i}/busy_frac"] = (a["busy_s"] - b["busy_s"]) / dt
        metrics["perf/episodes_per_s"] = total
        return metrics

    def build_learner(self, *, source: Path | None = None,
                      reference: torch.nn.Module | None = None) -> Learner:
        """The learner of the current policy; its critic loaded from checkpoint ``source``
        (default: the checkpoint resumed from) and its frozen reference ``reference`` (default:
        a copy of the policy as it is now)."""
        t, r = self.cfg.train, self.cfg.rollout
        c = self.cfg.critic
        source = source if source is not None else self.resume_from
        critic = (ValueModel.from_policy(self.policy, source=source, shared=c.shared)
                  if advantage_needs_critic(self.algo.advantage) else None)
        if self.algo.kl_coef and reference is None:
            reference = self.frozen_reference()
        norm_len = t.norm_len or self.env_spec.max_turns * r.max_new_tokens
        optim = OptimConfig(lr=t.lr, weight_decay=t.weight_decay, max_grad_norm=t.max_grad_norm,
                            epochs=t.epochs, mini_batch_size=t.mini_batch_size,
                            micro_batch_size=t.micro_batch_size, critic_lr=c.lr, vf_coef=c.vf_coef,
                            micro_batch_tokens=t.micro_batch_tokens, pack=t.packing,
                            share_prefix=t.share_prefix,
                            norm_len=float(norm_len), temperature=r.temperature)
        self.kl_controller = (AdaptiveKLController(coef=self.algo.kl_coef,
                                                   target=self.algo.kl_target)
                              if self.algo.kl_target else None)
        return Learner(self.policy, self.algo, optim, critic=critic, reference=reference,
                       seed=self.cfg.run.seed)

    def collect(self) -> tuple[list[Trajectory], dict[str, float]]:
        """``n_groups`` groups of fresh tasks, scored with ``reward.terms``; with dynamic
        sampling, groups whose (final) rewards are all equal (no group signal) are dropped and
        more are collected, at most ``train.max_sampling_tries`` times. Task seeds and group
        ids come from one cursor."""
        if self.collector is not None:
            return self.collect_async()
        t, e = self.cfg.train, self.cfg.env
        kept: list[Trajectory] = []
        tries = dropped = errors = episodes = 0
        while tries < t.max_sampling_tries:
            first = self.seed_cursor
            self.seed_cursor += t.n_groups
            collected = self.play_groups(first, t.n_groups)
            apply_rewards(collected, self.rewards, env_weight=self.cfg.reward.env_weight)
            episodes += len(collected)
            collected, failed = handle_failures(collected, on_error=e.on_error,
                                                error_reward=e.error_reward)
            errors += len(failed)
            if failed:
                self.last_error = failed[-1].info["error"]
            tries += 1
            if not self.algo.dynamic_sampling:
                kept = collected
                break
            keep = informative_groups(torch.tensor([x.total_reward for x in collected]),
                                      torch.tensor([x.group_id for x in collected])).tolist()
            kept += [x for x, k in zip(collected, keep, strict=True) if k]
            dropped += len({x.group_id for x in collected}) - len(
                {x.group_id for x, k in zip(collected, keep, strict=True) if k})
            if len(kept) >= t.n_groups * t.group_size:
                break
        metrics = {"rollout/env_errors": float(errors),
                   "rollout/env_error_rate": errors / max(episodes, 1)}
        if self.algo.dynamic_sampling:
            # whole groups: the first n_groups groups that were kept
            first_groups = list(dict.fromkeys(x.group_id for x in kept))[: t.n_groups]
            kept = [x for x in kept if x.group_id in set(first_groups)] or collected
            metrics.update({"rollout/dropped_groups": float(dropped),
                            "rollout/sampling_tries": float(tries)})
        return kept, {**reward_term_metrics(kept), **metrics}

    def collect_async(self) -> tuple[list[Trajectory], dict[str, float]]:
        """The next batch from the rollout workers that kept sampling during the last
        update (``train.mode=async``): groups are scored as they arrive; failed episodes are
        handled as in :meth:`collect`; with dynamic sampling a group without reward spread
        is dropped and replaced."""
        assert self.collector is not None
        e = self.cfg.env
        counts = {"episodes": 0, "errors": 0, "dropped": 0}

        def accept(group: list[Trajectory]) -> list[Trajectory]:
            apply_rewards(group, self.rewards, env_weight=self.cfg.reward.env_weight)
            counts["episodes"] += len(group)
            kept, failed = handle_failures(group, on_error=e.on_error,
                                           error_reward=e.error_reward)
            counts["errors"] += len(failed)
            if failed:
                self.last_error = failed[-1].info["error"]
            if kept and self.algo.dynamic_sampling and not bool(informative_groups(
                    torch.tensor([x.total_reward for x in kept]),
                    torch.tensor([x.group_id for x in kept])).any()):
                counts["dropped"] += 1
                return []
            return kept

        kept, metrics = self.collector.next_batch(self.policy_version, accept)
        self.seed_cursor = self.collector.next_index
        metrics.update({"rollout/env_errors": float(counts["errors"]),
                        "rollout/env_error_rate": counts["errors"] / max(counts["episodes"], 1)})
        if self.algo.dynamic_sampling:
            metrics["rollout/dropped_groups"] = float(counts["dropped"])
        return kept, {**reward_term_metrics(kept), **metrics}

    # ------------------------------------------------------------------ stages
    def warm_start(self) -> None:
        """SFT on oracle demonstrations (imperfect by ``random_action_prob``) or a JSONL file."""
        c = self.cfg.sft
        if c.source == "jsonl":
            assert c.path is not None
            conversations = self.sft_conversations or sft.load_conversations(c.path)
        else:
            start = self.cfg.env.train_seed_start + SFT_SEED_OFFSET
            conversations = sft.oracle_demonstrations(
                self.make_env, range(start, start + c.episodes),
                random_action_prob=c.random_action_prob,
                train_random_actions=c.train_random_actions, seed=self.cfg.run.seed)
        probe = self.make_env()
        tools = probe.tool_schemas() if isinstance(probe, HasTools) else None
        probe.close()
        trajectories = sft.conversations_to_trajectories(self.tokenizer, conversations,
                                                         tools=tools)
        total = c.epochs * -(-len(trajectories) // c.batch_size)
        with self.progress.task("SFT", total) as advance:
            for i, metrics in enumerate(sft.sft_steps(
                    self.policy, trajectories, pad_token_id=self.tokenizer.pad_token_id,
                    epochs=c.epochs, batch_size=c.batch_size, lr=c.lr,
                    max_grad_norm=c.max_grad_norm, seed=self.cfg.run.seed)):
                self.logger.log(i, metrics, phase="sft")
                advance(f"loss {metrics['sft/loss']:.3f}")

    def evaluate(self, step: int, label: str) -> dict[str, float]:
        e = self.cfg.eval
        seeds = range(self.cfg.env.eval_seed_start, self.cfg.env.eval_seed_start + e.episodes)
        with self.progress.task(f"eval ({label})", None) as advance:
            summary, _ = evaluate(self.runner(e.temperature), self.make_env, seeds,
                                  samples_per_task=e.samples_per_task, pass_k=e.pass_k)
            advance(f"success {summary['success']:.3f}")
        self.logger.log(step, {f"eval/{k}": v for k, v in summary.items()}, phase="eval")
        return summary

    def rl_step(self, step: int) -> dict[str, float]:
        """collect → layout → scoring passes → advantages → update → sync weights."""
        assert self.learner is not None
        t0 = time.perf_counter()
        trajectories, metrics = self.collect()
        if not trajectories or metrics["rollout/env_error_rate"] == 1.0:  # all failed
            self.failed_batches += 1
            if self.failed_batches >= self.cfg.env.max_failed_batches:
                raise RolloutError(
                    f"every episode of the last {self.failed_batches} batches failed "
                    f"(env {self.cfg.env.id}); the last error: {self.last_error}. Fix the env "
                    "or raise env.max_failed_batches")
            return {**metrics, "loss/skipped_steps": 1.0, "reward/mean": 0.0,
                    "rollout/success": 0.0}
        self.failed_batches = 0
        t1 = time.perf_counter()
        batch = layout(trajectories, self.tokenizer.pad_token_id, bootstrap_truncated=(
            self.algo.bootstrap_truncated and self.learner.critic is not None))
        if self.cfg.critic.privileged and self.learner.critic is not None:
            with_critic_prefix(batch, [self.privileged_prefix(x) for x in trajectories],
                               self.tokenizer.pad_token_id)
        metrics.update(self.score(batch))
        advantage = ADVANTAGES[self.algo.advantage](
            estimator_inputs(batch.adv_inputs, self.algo), **self.algo.adv_kwargs)
        batch.adv, batch.ret = advantage.advantages, advantage.returns
        if self.algo.mask_truncated:
            truncated = ~batch.adv_inputs.terminated
            batch.loss_mask = batch.loss_mask * (~truncated)[:, None]
            metrics["rollout/masked_truncated"] = float(truncated.float().mean())
        warming_up = step < self.cfg.critic.warmup_steps  # train the critic alone
        if self.learner_group is not None:  # data-parallel: every learner runs its share
            metrics.update(self.learner_group.update(self.learner, batch,
                                                     train_policy=not warming_up))
        else:
            metrics.update(self.learner.update(batch, train_policy=not warming_up))
        metrics["loss/critic_warmup"] = float(warming_up)
        self.push_weights()
        t2 = time.perf_counter()
        save_samples(self.run_dir, step + 1, trajectories, batch, self.cfg.train.save_samples)
        tokens = float(batch.attention_mask.sum())
        return {**rollout_metrics(trajectories), **metrics, **advantage.metrics,
                **self.worker_metrics(), "perf/rollout_s": t1 - t0,
                "perf/update_s": t2 - t1, "perf/step_s": t2 - t0,
                "perf/tokens_per_s": tokens / max(t2 - t0, 1e-9)}

    def privileged_prefix(self, trajectory: Trajectory) -> list[int]:
        """The privileged critic's extra input: the env's ``privileged_info()`` (recorded
        after reset) as a system message in the chat template."""
        info = trajectory.info.get("privileged_info", "")
        text = render(self.tokenizer, [{"role": "system", "content":
                                        f"Privileged information (critic only): {info}"}],
                      add_generation_prompt=False)
        return encode(self.tokenizer, text)

    def score(self, batch: Batch) -> dict[str, float]:
        """Everything the advantages and the loss read besides the ledger: the overlong
        penalty, critic values, reference log-probs (and the KL terms), behaviour weights."""
        assert self.learner is not None
        inputs = batch.adv_inputs
        filter_metrics: dict[str, float] = {}
        if self.algo.overlong_cache:
            penalty = overlong_penalty(
                turn_lengths(inputs.token_mask, inputs.turn_index, inputs.turn_mask.shape[1]),
                inputs.turn_mask, max_len=self.cfg.rollout.max_new_tokens,
                cache=self.algo.overlong_cache)
            inputs.turn_rewards = inputs.turn_rewards + penalty
            filter_metrics["reward/overlong_penalty"] = float(penalty.sum(-1).mean())
        if self.learner.critic is not None:
            values = self.learner.critic_values(batch)
            batch.adv_inputs.values = values
            batch.adv_inputs.turn_values = turn_start_values(values, batch.adv_inputs)
            batch.old_values = state_values(values)
        if self.learner.reference is not None:
            batch.ref_logprobs = self.learner.reference_logprobs(batch)
            filter_metrics.update(self.apply_kl(batch))
        if self.algo.is_correction != "none":
            learner_old = self.learner.policy_logprobs(batch)
            batch.is_weights, is_metrics = behaviour_correction(
                learner_old, batch.old_logprobs, batch.loss_mask,
                mode=self.algo.is_correction, threshold=self.algo.is_threshold)
            batch.old_logprobs = learner_old
            filter_metrics.update(is_metrics)
        return filter_metrics

    def apply_kl(self, batch: Batch) -> dict[str, float]:
        """Measure KL(behaviour ‖ reference); in reward mode subtract ``kl_coef·KL`` per token
        from the turn rewards; with ``kl_target`` adapt the coefficient."""
        assert self.learner is not None and batch.ref_logprobs is not None
        inputs, algo = batch.adv_inputs, self.algo
        kl = KL_ESTIMATORS[algo.kl_estimator](batch.old_logprobs, batch.ref_logprobs)
        kl_now = float(masked_mean(kl, inputs.token_mask))
        metrics = {"rollout/kl_ref": kl_now, "loss/kl_coef": self.learner.kl_coef}
        if algo.kl_mode == "reward":
            penalty = kl_token_penalty(batch.old_logprobs, batch.ref_logprobs, inputs.token_mask,
                                       estimator=algo.kl_estimator, coef=self.learner.kl_coef)
            per_turn = turn_sums(penalty, inputs.token_mask, inputs.turn_index,
                                 inputs.turn_mask.shape[1])
            inputs.turn_rewards = inputs.turn_rewards + per_turn
            metrics["reward/kl_penalty"] = float(per_turn.sum(-1).mean())
        if self.kl_controller is not None:
            self.learner.kl_coef = self.kl_controller.update(kl_now, batch.size)
        return metrics

    def checkpoint(self, step: int, before: dict[str, float] | None) -> None:
        assert self.learner is not None
        if self.learner_group is not None:  # fsdp: the sharded optimizer states, gathered
            self.learner_group.sync_states(self.learner)
        save_checkpoint(self.run_dir, step, policy=self.policy, tokenizer=self.tokenizer,
                        optimizers={"policy": self.learner.optimizer,
                                    "critic": self.learner.critic_optimizer},
                        critic=self.learner.critic,
                        extra_state={"eval_before": before, "seed_cursor": self.seed_cursor,
                                     "kl_coef": self.learner.kl_coef,
                                     "metrics_lines": self.logger.lines,
                                     "alarms": self.monitor.state(),
                                     "rollbacks": self.rollbacks,
                                     "generators": {
                            "engine": self.engine.generator.get_state().tolist(),
                            "learner": self.learner.generator.get_state().tolist()}})
        prune_checkpoints(self.run_dir, self.cfg.train.keep_last)

    def restore_state(self, checkpoint: Path) -> dict:
        """Optimizers, RNG states, the task-seed cursor, the KL coefficient and the engine's
        and learner's generators from ``checkpoint``; returns its ``state.json``."""
        assert self.learner is not None
        state = load_training_state(checkpoint, {
            "policy": self.learner.optimizer, "critic": self.learner.critic_optimizer})
        self.seed_cursor = state.get("seed_cursor", state["step"] * self.cfg.train.n_groups)
        self.learner.kl_coef = state.get("kl_coef", self.learner.kl_coef)
        if self.kl_controller is not None:
            self.kl_controller.coef = self.learner.kl_coef
        for name, generator in (("engine", self.engine.generator),
                                ("learner", self.learner.generator)):
            generator.set_state(torch.tensor(state["generators"][name], dtype=torch.uint8))
        if "alarms" in state:
            self.monitor.load_state(state["alarms"])
        return state

    def on_alarm(self, done: int, fired: list[str], metrics: dict[str, float],
                 monitor: AlarmMonitor, before: dict[str, float] | None) -> int | None:
        """Act on alarms raised at step ``done`` (``alarms.on_alarm``): warn; stop (after a
        checkpoint); or roll back to the newest checkpoint from before the alarms' streak,
        with the learning rates scaled by ``alarms.rollback_lr_factor``. Returns the step
        to continue from after a rollback, else None."""
        a = self.cfg.alarms
        message = f"step {done}: {alarm_details(fired, metrics)}"
        log.warning("%s", message)
        self.progress.console.print(f"[yellow]warning[/yellow]: {escape(message)}")
        if a.on_alarm == "warn" or not any(ACTIONABLE[name] for name in fired):
            return None  # the warn-only alarms may mean the task is solved
        if a.on_alarm == "stop" or self.rollbacks >= a.max_rollbacks:
            self.checkpoint(done, before)
            why = (f"after {self.rollbacks} rollbacks " if a.on_alarm == "rollback" else "")
            raise AlarmStop(f"{message}; stopped {why}(alarms.on_alarm={a.on_alarm}); the "
                            f"last state is checkpointed in {self.run_dir / 'checkpoints'}")
        good = [p for p in checkpoints(self.run_dir)
                if checkpoint_step(p) <= done - a.patience]
        if not good:
            self.checkpoint(done, before)
            raise AlarmStop(f"{message}; no checkpoint from before the alarm to roll back to "
                            f"(keep more with train.keep_last or checkpoint more often with "
                            f"train.checkpoint_every); the last state is checkpointed")
        target = good[-1]
        for newer in checkpoints(self.run_dir):  # written during the collapse: never resume
            if checkpoint_step(newer) > checkpoint_step(target):
                shutil.rmtree(newer)
        reference = self.learner.reference if self.learner is not None else None
        self.load_model(str(target), fresh_lora=False)
        self.learner = self.build_learner(source=target, reference=reference)
        optimizers = [o for o in (self.learner.optimizer, self.learner.critic_optimizer) if o]
        configured = [[group["lr"] for group in o.param_groups] for o in optimizers]
        state = self.restore_state(target)  # (also restores the checkpoint's learning rates)
        self.rollbacks += 1
        scale = a.rollback_lr_factor ** self.rollbacks
        for optimizer, lrs in zip(optimizers, configured, strict=True):
            for group, lr in zip(optimizer.param_groups, lrs, strict=True):
                group["lr"] = lr * scale
        monitor.reset_streaks()
        if self.cluster is not None:  # the workers sample with the rolled-back weights
            self.push_weights()
        self.logger.log(done, {"alarm/rollback_to": float(state["step"]),
                               "alarm/lr_scale": scale}, phase="alarm")
        log.warning("rolled back to %s with learning rates x%g", target.name, scale)
        return int(state["step"])

    def run(self) -> RunResult:
        try:
            return self._run()
        finally:
            self.stop_distributed()

    def _run(self) -> RunResult:
        start = time.perf_counter()
        cfg = self.cfg
        before: dict[str, float] | None = None
        if self.resume_from is None:
            if cfg.sft.enabled:
                self.warm_start()
            if cfg.eval.before_training:
                before = self.evaluate(0, "before RL")
        self.learner = self.build_learner()
        if self.resume_from is not None:
            state = self.restore_state(self.resume_from)
            self.start_step, before = state["step"], state.get("eval_before")
            self.rollbacks = state.get("rollbacks", 0)
        self.start_distributed()
        monitor = self.monitor
        if cfg.alarms.on_alarm == "rollback" and latest_checkpoint(self.run_dir) is None:
            self.checkpoint(self.start_step, before)  # something to roll back to
        history = []
        step = self.start_step
        with self.progress.task("RL", cfg.train.steps, completed=self.start_step) as advance, \
                stop_signals(self):
            while step < cfg.train.steps:
                metrics = self.rl_step(step)
                fired, flags = monitor.check(metrics)
                metrics.update(flags)
                self.logger.log(step + 1, metrics)
                history.append(metrics)
                advance(f"reward {metrics['reward/mean']:.3f} "
                        f"success {metrics['rollout/success']:.3f}"
                        + (f" [red]{' '.join(fired)}[/red]" if fired else ""))
                done = step + 1
                if fired:
                    rolled_back = self.on_alarm(done, fired, metrics, monitor, before)
                    if rolled_back is not None and self.stop_signal is None:
                        step = rolled_back
                        continue
                    if rolled_back is not None:  # rolled back, and asked to stop: stop there
                        done = rolled_back
                if cfg.train.eval_every and done % cfg.train.eval_every == 0 \
                        and done < cfg.train.steps:
                    self.evaluate(done, f"step {done}")
                saved = bool(cfg.train.checkpoint_every
                             and done % cfg.train.checkpoint_every == 0)
                if saved:
                    self.checkpoint(done, before)
                step = done
                if self.stop_signal is not None:  # SIGINT/SIGTERM: save, then stop cleanly
                    if not saved:
                        self.checkpoint(done, before)
                    name = signal.Signals(self.stop_signal).name
                    raise Interrupted(self.stop_signal,
                                      f"stopped by {name} after step {done}; checkpoint "
                                      f"saved: resume with `turnrl train --resume "
                                      f"{self.run_dir}`")
        every = cfg.train.checkpoint_every
        if not (every and cfg.train.steps and cfg.train.steps % every == 0):
            self.checkpoint(cfg.train.steps, before)  # the final state, unless just saved
        after = self.evaluate(cfg.train.steps, "after RL")
        result = RunResult(self.run_dir, before, after, history, time.perf_counter() - start)
        atomic_write_text(self.run_dir / "eval.json", json.dumps(
            {"before": before, "after": after, "wall_time_s": result.wall_time_s,
             "config": dump_config(cfg)}, indent=2) + "\n")
        self.logger.close()
        return result


def estimator_inputs(inputs: AdvantageInputs, algo: AlgoPreset) -> AdvantageInputs:
    """What the advantage estimator reads: without ``algo.bootstrap_truncated`` every episode
    counts as terminated, so critic estimators end truncated ones with value 0."""
    if algo.bootstrap_truncated:
        return inputs
    return dataclasses.replace(inputs, terminated=torch.ones_like(inputs.terminated))


def alarm_details(fired: list[str], metrics: dict[str, float]) -> str:
    """``alarm/entropy_collapse (loss/entropy 0.0031)``, ... for the alarms that fired."""
    by_name = {f"alarm/{rule.name}": rule.metric for rule in default_rules()}
    return ", ".join(f"{name} ({by_name[name]} {metrics[by_name[name]]:.4g})" for name in fired)


def train(cfg: Config, *, resume: Path | None = None) -> RunResult:
    """Run a whole training job (see :class:`Trainer`)."""
    return Trainer(cfg, resume=resume).run()
