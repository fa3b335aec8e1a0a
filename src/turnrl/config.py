"""The typed config tree: YAML loading, dotted overrides, validation with clear errors.

One pydantic model per section, one documented field per knob; the field descriptions are
the documentation (`turnrl train --help` prints them through :func:`config_help`).

>>> cfg = load_config(None, ["train.steps=3", "eval.pass_k=[1]"])
>>> cfg.train.steps, cfg.algo.preset
(3, 'grpo')

A user's mistake raises :class:`ConfigError`, whose message says what is wrong, where
(file, line, dotted key or the override) and how to fix it, e.g.
``configs/x.yaml:12: train.group_size: must be >= 1, got 0``.
"""

from __future__ import annotations

import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from turnrl.io import atomic_write_text
from turnrl.registry import closest_name, unknown_name_message

__all__ = [
    "AlgoConfig",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "EnvConfig",
    "EvalConfig",
    "LogConfig",
    "LoraConfig",
    "ModelConfig",
    "RolloutConfig",
    "RunConfig",
    "SFTConfig",
    "TinyConfig",
    "TrainConfig",
    "config_help",
    "dump_config",
    "load_config",
    "save_config",
    "validate_names",
]


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in a config: the dotted key, where it was set, and what is wrong."""

    key: str | None  # dotted key, e.g. "train.group_size"; None for file-level problems
    message: str  # what is wrong and how to fix it, without the location
    where: str | None = None  # "configs/x.yaml:12", "configs/x.yaml", "override 'a.b=1'"
    line: int | None = None  # 1-based line in the YAML file, when known

    def __str__(self) -> str:
        head = f"{self.where}: " if self.where else ""
        return head + self.message


class ConfigError(ValueError):
    """A user's mistake in a config file or an override; the message is meant to be shown as is.

    ``issues`` lists every problem found (all are reported at once, one per line).
    """

    def __init__(self, message: str | Sequence[ConfigIssue]) -> None:
        if isinstance(message, str):
            self.issues: list[ConfigIssue] = [ConfigIssue(key=None, message=message)]
        else:
            self.issues = list(message)
        super().__init__("\n".join(str(issue) for issue in self.issues))


class _FieldError(ValueError):
    """Raised by cross-field validators to blame one field (``related`` may be blamed too)."""

    def __init__(self, field_name: str, message: str, related: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.field_name = field_name
        self.related = tuple(related)


# --------------------------------------------------------------------------------------
# The config tree
# --------------------------------------------------------------------------------------


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunConfig(_Section):
    """Run identity, output folder, seeding and compute placement."""

    name: str = Field("default", description="Run name; outputs go to <out_dir>/<name>/.")
    out_dir: str = Field("runs", description="Folder that holds one sub-folder per run.")
    seed: int = Field(0, ge=0, description="Global seed for Python, NumPy and torch.")
    threads: int = Field(2, ge=1, description="torch CPU threads (torch.set_num_threads).")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="Where to train: auto (cuda when available, else cpu), cpu or cuda."
    )
    deterministic: bool = Field(
        False, description="Use deterministic torch kernels (slower; bitwise reproducible runs)."
    )


class LoraConfig(_Section):
    """Low-rank adapters (peft) instead of full fine-tuning."""

    enabled: bool = Field(False, description="Train LoRA adapters instead of all weights.")
    r: int = Field(8, gt=0, description="Adapter rank.")
    alpha: float = Field(16, description="LoRA scaling numerator (scale = alpha / r).")
    dropout: float = Field(0.0, ge=0, le=1, description="Dropout on the adapter input.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        description="Names of the linear modules that get adapters.",
    )


class TinyConfig(_Section):
    """Shape of the built-in tiny model (used when model.path is 'tiny')."""

    hidden_size: int = Field(128, gt=0, description="Width of the residual stream.")
    num_layers: int = Field(4, gt=0, description="Number of transformer blocks.")
    num_heads: int = Field(4, gt=0, description="Attention (query) heads; divides hidden_size.")
    num_kv_heads: int = Field(2, gt=0, description="Key/value heads (GQA); divides num_heads.")
    intermediate_size: int = Field(384, gt=0, description="Width of the MLP hidden layer.")
    max_position_embeddings: int = Field(2048, gt=0, description="Longest sequence in tokens.")
    seed: int = Field(0, ge=0, description="Seed of the random weight initialisation.")

    @model_validator(mode="after")
    def _check_heads(self) -> TinyConfig:
        if self.hidden_size % self.num_heads:
            raise _FieldError(
                "hidden_size",
                f"must be divisible by model.tiny.num_heads ({self.num_heads}), "
                f"got {self.hidden_size}; pick num_heads that divides hidden_size",
                related=("num_heads",),
            )
        if self.num_heads % self.num_kv_heads:
            raise _FieldError(
                "num_kv_heads",
                f"must divide model.tiny.num_heads ({self.num_heads}), got {self.num_kv_heads}; "
                "pick a divisor of num_heads",
                related=("num_heads",),
            )
        return self


class ModelConfig(_Section):
    """The policy model: which weights, which dtype, tiny-model shape, LoRA."""

    path: str = Field(
        "tiny",
        description="'tiny' builds the built-in model; else a local Hugging Face dir or hub id.",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="Weights dtype; auto = float32 on CPU, bfloat16 on GPU."
    )
    tiny: TinyConfig = Field(default_factory=TinyConfig, description="Built-in tiny model shape.")
    lora: LoraConfig = Field(default_factory=LoraConfig, description="LoRA adapters.")


class LatencyConfig(_Section):
    """Simulated latency of every env step: log-normal, heavy-tailed like tool and search calls."""

    median_s: float = Field(0.0, ge=0, description="Median seconds per env step; 0 = off.")
    sigma: float = Field(1.0, ge=0, description="Log-normal shape: the tail grows with it "
                         "(p99 = median · e^(2.33·sigma)).")
    max_s: float = Field(30.0, gt=0, description="Cap on one step's delay, in seconds.")


class EnvConfig(_Section):
    """The environment and the seeds of training and held-out evaluation tasks."""

    id: str = Field("frozenlake-v0", description="Registered env id (see `turnrl envs`).")
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments passed to make(id, **kwargs)."
    )
    train_seed_start: int = Field(0, ge=0, description="First reset seed of training tasks.")
    eval_seed_start: int = Field(
        1_000_000_000,
        ge=0,
        description="First reset seed of held-out eval tasks; must be > train_seed_start.",
    )
    step_timeout_s: float | None = Field(
        None, gt=0, description="Limit on each env call (reset, step) in seconds; a call past "
        "it fails its episode. None: no limit (calls of fast envs then run inline)."
    )
    on_error: Literal["exclude", "score"] = Field(
        "exclude", description="A failed episode (env or reward function raised, timed out or "
        "returned garbage) is left out of the batch (exclude) or trained on with total reward "
        "error_reward (score)."
    )
    error_reward: float = Field(0.0, description="Total reward of a failed episode (on_error: "
                                "score).")
    max_failed_batches: int = Field(
        3, ge=1, description="Stop with an error after this many consecutive batches in which "
        "every episode failed."
    )
    latency: LatencyConfig = Field(
        default_factory=lambda: LatencyConfig(), description="Simulated env-step latency "
        "(a slow tool or search backend), for trying out asynchronous training."
    )

    @model_validator(mode="after")
    def _check_seeds(self) -> EnvConfig:
        if self.eval_seed_start <= self.train_seed_start:
            raise _FieldError(
                "eval_seed_start",
                f"must be > env.train_seed_start ({self.train_seed_start}), got "
                f"{self.eval_seed_start}, so that evaluation tasks are held out; raise it "
                "(default 1000000000)",
                related=("train_seed_start",),
            )
        return self


class RolloutConfig(_Section):
    """Sampling of the agent's turns."""

    max_new_tokens: int = Field(16, gt=0, description="Most tokens the agent emits per turn.")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature; 0 = greedy.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass.")
    max_batch_size: int = Field(256, gt=0, description="Most sequences per generate call.")
    max_context_tokens: int = Field(
        2048, gt=0, description="Episode token budget; an episode past it is truncated."
    )


class SFTConfig(_Section):
    """Supervised warm-up on demonstrations before RL."""

    enabled: bool = Field(True, description="Run SFT before RL.")
    source: Literal["oracle", "jsonl"] = Field(
        "oracle", description="oracle = the env's expert (oracle_action); jsonl = a file."
    )
    path: str | None = Field(
        None, description="JSONL file of demonstrations; required when source is jsonl."
    )
    episodes: int = Field(2000, ge=1, description="Oracle episodes to generate.")
    random_action_prob: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Chance the oracle demo takes a random action (imperfect demonstrations).",
    )
    train_random_actions: bool = Field(
        True, description="Learn the random actions too; false = they only steer the demo to "
        "off-oracle states and the oracle's actions there are learned (DART noise injection)."
    )
    epochs: int = Field(2, ge=1, description="Passes over the demonstrations.")
    batch_size: int = Field(32, ge=1, description="Episodes per optimizer step.")
    lr: float = Field(2e-3, gt=0, description="AdamW learning rate (cosine decay to 0).")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient-norm clip.")

    @model_validator(mode="after")
    def _check_path(self) -> SFTConfig:
        if self.source == "jsonl" and not self.path:
            raise _FieldError(
                "path",
                "required when sft.source is 'jsonl'; set sft.path to a JSONL file of "
                "demonstrations, or use sft.source: oracle",
                related=("source",),
            )
        return self


class AlgoConfig(_Section):
    """The RL algorithm: a named preset plus optional per-axis overrides (None = preset's)."""

    preset: str = Field("grpo", description="Named bundle of the keys below (grpo, ppo, ...).")
    advantage: str | None = Field(None, description="Advantage estimator name.")
    adv_kwargs: dict[str, Any] | None = Field(
        None, description="Hyperparameters of the advantage estimator."
    )
    policy_loss: str | None = Field(None, description="Policy loss name.")
    loss_kwargs: dict[str, Any] | None = Field(None, description="Policy loss hyperparameters.")
    loss_agg: str | None = Field(
        None,
        description="Loss aggregation: token_mean, seq_mean_token_mean, seq_mean_token_sum, "
        "seq_mean_token_sum_norm.",
    )
    kl_coef: float | None = Field(None, ge=0, description="Weight of the KL penalty.")
    kl_estimator: str | None = Field(None, description="KL estimator: k1, k2 or k3.")
    kl_mode: Literal["loss", "reward"] | None = Field(
        None, description="KL to the reference as a loss term or as a per-token reward penalty."
    )
    kl_target: float | None = Field(
        None, gt=0, description="Adapt kl_coef each step towards this per-token KL (None: fixed)."
    )
    entropy_coef: float | None = Field(None, description="Weight of the entropy bonus.")
    is_correction: Literal["none", "tis", "mask"] | None = Field(
        None, description="Behaviour-policy correction: recompute old log-probs with the "
        "learner and weight the loss by the truncated (tis) or masked (mask) ratio to the "
        "sampling log-probs."
    )
    is_threshold: float | None = Field(None, gt=0, description="Truncation threshold C.")
    value_clip: float | None = Field(
        None, gt=0, description="Critic presets: clip the new value to old ± this (PPO)."
    )
    dynamic_sampling: bool | None = Field(
        None, description="DAPO: drop groups whose rewards are all equal and sample more "
        "(up to train.max_sampling_tries collections per step)."
    )
    overlong_cache: int | None = Field(
        None, ge=0, description="DAPO soft overlong penalty: turns longer than "
        "rollout.max_new_tokens minus this many tokens are penalised; 0 = off."
    )
    mask_truncated: bool | None = Field(
        None, description="Truncated episodes (turn or context budget) contribute no loss."
    )
    bootstrap_truncated: bool | None = Field(
        None, description="Critic estimators (gae, turn_gae): bootstrap a truncated episode "
        "from the critic's value of its last state (Gymnasium time-limit semantics) instead "
        "of ending it with value 0. Off by default: an env's turn budget is part of the task "
        "(running out of turns fails it), and bootstrapping it pays a stalling policy the "
        "critic's estimate."
    )


class RewardConfig(_Section):
    """Reward functions (``turnrl.rewards``) added to the env's own rewards."""

    env_weight: float = Field(1.0, description="Weight of the env's own per-turn rewards.")
    terms: list[dict[str, Any] | str] = Field(
        default_factory=list, description="Reward functions added on the last turn: names "
        "(exact_match, f1, math_verify, format, tool_cost, length_penalty, grounded) or "
        "{name, weight, kwargs, label}; name may be 'package.module:function'."
    )


class CriticConfig(_Section):
    """The critic of the critic presets (advantages gae, turn_gae); ignored by the others."""

    lr: float = Field(1e-3, gt=0, description="AdamW learning rate of the critic.")
    shared: bool = Field(
        False, description="A value head on the policy's body (one model, joint loss "
        "policy + vf_coef * value) instead of a separate copy of the body."
    )
    vf_coef: float = Field(0.5, gt=0, description="Weight of the value loss when shared.")
    privileged: bool = Field(
        False, description="Give the critic the env's privileged_info() ahead of the "
        "episode (asymmetric actor-critic); the policy never sees it. Needs shared=false."
    )
    warmup_steps: int = Field(
        0, ge=0, description="First RL steps that train only the critic (the policy waits)."
    )

    @model_validator(mode="after")
    def _check_privileged(self) -> CriticConfig:
        if self.privileged and self.shared:
            raise _FieldError(
                "privileged",
                "a privileged critic needs its own body: with critic.shared=true the policy's "
                "weights would learn from the privileged input; set critic.shared=false or "
                "critic.privileged=false",
                related=("shared",),
            )
        return self


class TrainConfig(_Section):
    """The RL loop: steps, batch shape, optimizer, evaluation and checkpoint cadence."""

    steps: int = Field(30, ge=0, description="RL steps (collect, score, update).")
    n_groups: int = Field(16, ge=1, description="Tasks (groups) per step.")
    max_sampling_tries: int = Field(
        3, ge=1, description="With algo dynamic_sampling: most collections per step."
    )
    group_size: int = Field(8, ge=1, description="Episodes sampled per task.")
    epochs: int = Field(1, ge=1, description="PPO epochs over each batch.")
    mini_batch_size: int = Field(64, ge=1, description="Trajectories per optimizer step.")
    micro_batch_size: int = Field(
        16, ge=1, description="Trajectories per forward pass (gradient accumulation)."
    )
    micro_batch_tokens: int | None = Field(
        None, ge=1, description="Token budget of a forward pass (rows x longest row), on top "
        "of micro_batch_size; None: rows only."
    )
    packing: bool = Field(
        False, description="Pack each forward pass's trajectories end to end into shared rows "
        "(position ids restart per trajectory, attention stays within it) instead of "
        "right-padding them; same log-probs, less padding."
    )
    share_prefix: bool = Field(
        True, description="In padded passes, encode the prompt the rows of a group share once "
        "and run each row's remainder on its KV cache (same log-probs and gradient, fewer "
        "tokens through the model); not used with packing."
    )
    lr: float = Field(5e-4, gt=0, description="AdamW learning rate of the policy.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient-norm clip.")
    eval_every: int = Field(0, ge=0, description="Evaluate every N steps; 0 = only at the end.")
    checkpoint_every: int = Field(
        10, ge=0, description="Checkpoint every N steps; 0 = only at the end."
    )
    keep_last: int = Field(3, ge=1, description="Checkpoints kept on disk (the newest ones).")
    save_samples: int = Field(8, ge=0, description="Trajectories saved to samples/ per step.")
    norm_len: int | None = Field(
        None, ge=1, description="Constant length for seq_mean_token_sum_norm; None = max length."
    )
    mode: Literal["sync", "async"] = Field(
        "sync", description="sync: collect, then update; async: rollout workers keep sampling "
        "while the learner updates (needs distributed.backend=ray)."
    )
    max_staleness: int = Field(
        1, ge=0, description="async: most learner updates between a trajectory's oldest token "
        "and the update that trains on it; older ones are dropped (0 = synchronous)."
    )

    @model_validator(mode="after")
    def _check_batches(self) -> TrainConfig:
        if self.micro_batch_size > self.mini_batch_size:
            raise _FieldError(
                "micro_batch_size",
                f"must be <= train.mini_batch_size ({self.mini_batch_size}), got "
                f"{self.micro_batch_size}; lower micro_batch_size or raise mini_batch_size",
                related=("mini_batch_size",),
            )
        per_step = self.n_groups * self.group_size
        if self.mini_batch_size > per_step:
            raise _FieldError(
                "mini_batch_size",
                f"must be <= train.n_groups * train.group_size = {self.n_groups} * "
                f"{self.group_size} = {per_step} trajectories per step, got "
                f"{self.mini_batch_size}; lower mini_batch_size or raise n_groups/group_size",
                related=("n_groups", "group_size"),
            )
        return self


class EvalConfig(_Section):
    """Held-out evaluation."""

    episodes: int = Field(256, ge=1, description="Held-out tasks (seeds) to evaluate.")
    samples_per_task: int = Field(1, ge=1, description="Episodes sampled per task.")
    pass_k: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [1], description="k values of pass@k; each <= samples_per_task."
    )
    temperature: float = Field(1.0, ge=0, description="Sampling temperature; 0 = greedy.")
    before_training: bool = Field(True, description="Also evaluate before the first step.")

    @model_validator(mode="after")
    def _check_pass_k(self) -> EvalConfig:
        too_big = [k for k in self.pass_k if k > self.samples_per_task]
        if too_big:
            raise _FieldError(
                "pass_k",
                f"pass@{too_big[0]} needs at least {too_big[0]} samples per task but "
                f"eval.samples_per_task is {self.samples_per_task}; raise "
                f"eval.samples_per_task to >= {max(too_big)} or drop {too_big} from eval.pass_k",
                related=("samples_per_task",),
            )
        return self


class LogConfig(_Section):
    """Where metrics go (metrics.jsonl is always written)."""

    tensorboard: bool = Field(True, description="Write TensorBoard events.")
    wandb: bool = Field(False, description="Log to Weights & Biases (turnrl[wandb]).")
    mlflow: bool = Field(False, description="Log to MLflow (turnrl[mlflow]).")
    progress: bool = Field(True, description="Show a progress bar on the terminal.")


@dataclass(frozen=True)
class _Origin:
    """Where each value of a loaded config came from, for error messages."""

    source: str | None = None  # the YAML file, as the user named it
    lines: dict[str, int] = field(default_factory=dict)  # dotted key -> 1-based line
    overrides: dict[str, str] = field(default_factory=dict)  # dotted key -> "key=value"

    def locate(self, key: str, related: Sequence[str] = ()) -> tuple[str | None, int | None]:
        """``(where, line)`` of ``key``: its override, its line, else a related key or parent."""
        for candidate in (key, *related):
            if candidate in self.overrides:
                return f"override {self.overrides[candidate]!r}", None
            if candidate in self.lines:
                return self._at(self.lines[candidate])
        parts = key.split(".")
        for end in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:end])
            if prefix in self.overrides:
                return f"override {self.overrides[prefix]!r}", None
            if prefix in self.lines:
                return self._at(self.lines[prefix])
        return self.source, None

    def _at(self, line: int) -> tuple[str | None, int | None]:
        return (f"{self.source}:{line}" if self.source else None), line


class AlarmsConfig(_Section):
    """Collapse alarms: rules over each RL step's metrics (see turnrl.train.alarms)."""

    on_alarm: Literal["warn", "stop", "rollback"] = Field(
        "warn", description="warn: log and show it; stop: checkpoint and exit with an error; "
        "rollback: reload the newest checkpoint from before the alarm and scale the learning "
        "rates by rollback_lr_factor."
    )
    patience: int = Field(2, ge=1, description="Consecutive steps a rule must hold to fire.")
    min_entropy: float = Field(0.01, ge=0, description="entropy_collapse: mean per-token "
                               "policy entropy (nats) below this.")
    max_zero_std_groups: float = Field(
        1.0, ge=0, le=1, description="reward_std_zero: fraction of groups whose rewards are "
        "all equal at least this."
    )
    max_kl: float = Field(1.0, gt=0, description="kl_blowup: KL to the reference above this.")
    grad_spike: float = Field(10.0, gt=1, description="grad_norm_spike: gradient norm above "
                              "this times the median of the previous steps.")
    min_length_ratio: float = Field(
        0.2, ge=0, le=1, description="length_collapse: sampled tokens per episode below this "
        "fraction of the first RL step's."
    )
    max_repeated: float = Field(
        1.0, ge=0, le=1, description="repeated_outputs: fraction of episodes repeating another "
        "episode of their group at least this."
    )
    rollback_lr_factor: float = Field(0.5, gt=0, le=1, description="Learning-rate scale per "
                                      "rollback.")
    max_rollbacks: int = Field(3, ge=0, description="Rollbacks before the run stops instead.")


class DistributedConfig(_Section):
    """Scaling out on Ray and torch.distributed (docs/scaling.md)."""

    backend: Literal["none", "ray"] = Field(
        "none", description="none: one process; ray: env, rollout and learner workers on Ray."
    )
    ray_address: str | None = Field(
        None, description="Ray cluster to join ('auto', 'ray://host:10001', 'host:6379'); "
        "None starts a local Ray instance that stops with the run."
    )
    num_cpus: int | None = Field(
        None, ge=1, description="CPUs of the local Ray instance (None: all of this machine's)."
    )
    num_env_workers: int = Field(
        0, ge=0, description="Env worker actors; 0 = envs live in the rollout workers."
    )
    num_rollout_workers: int = Field(
        1, ge=1, description="Rollout worker actors (one engine each).")
    num_learners: int = Field(
        1, ge=1, description="Data-parallel learner processes (torch.distributed); the driver "
        "is learner 0."
    )
    cpus_per_env_worker: float = Field(0.25, ge=0, description="Ray CPUs per env worker.")
    cpus_per_rollout_worker: float = Field(1.0, ge=0, description="Ray CPUs per rollout worker.")
    gpus_per_rollout_worker: float = Field(0.0, ge=0, description="Ray GPUs per rollout worker.")
    cpus_per_learner: float = Field(1.0, ge=0, description="Ray CPUs per extra learner.")
    gpus_per_learner: float = Field(0.0, ge=0, description="Ray GPUs per extra learner.")
    worker_threads: int = Field(1, ge=1, description="torch CPU threads in each worker.")
    learner_strategy: Literal["ddp", "fsdp"] = Field(
        "ddp", description="ddp: every learner holds the whole model, gradients all-reduced; "
        "fsdp: FSDP2 shards parameters, gradients and optimizer states over the learners."
    )
    learner_backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto", description="torch.distributed backend: auto = nccl on GPU, else gloo."
    )


class Config(_Section):
    """The whole run: every knob of `turnrl train`, with defaults, so ``Config()`` is valid."""

    run: RunConfig = Field(default_factory=RunConfig, description="Run identity and compute.")
    model: ModelConfig = Field(default_factory=ModelConfig, description="The policy model.")
    env: EnvConfig = Field(default_factory=EnvConfig, description="The environment.")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="Sampling.")
    sft: SFTConfig = Field(default_factory=SFTConfig, description="Supervised warm-up.")
    reward: RewardConfig = Field(default_factory=RewardConfig, description="Extra rewards.")
    algo: AlgoConfig = Field(default_factory=AlgoConfig, description="The RL algorithm.")
    critic: CriticConfig = Field(default_factory=CriticConfig, description="The critic.")
    train: TrainConfig = Field(default_factory=TrainConfig, description="The RL loop.")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Held-out evaluation.")
    alarms: AlarmsConfig = Field(default_factory=AlarmsConfig, description="Collapse alarms.")
    distributed: DistributedConfig = Field(default_factory=DistributedConfig,
                                           description="Ray workers and data-parallel learners.")
    log: LogConfig = Field(default_factory=LogConfig, description="Metric sinks.")

    _origin: _Origin = PrivateAttr(default_factory=_Origin)

    def __eq__(self, other: object) -> bool:
        """Configs are equal when their values are; where they were loaded from does not count."""
        if not isinstance(other, Config):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in type(self).model_fields)

    def origin_of(self, key: str) -> str | None:
        """Where a dotted key was set: ``"configs/x.yaml:12"``, ``"override 'a.b=1'"`` or None.

        Lets later checks (env kwargs, registry names) point the user at the right line.
        """
        where, _ = self._origin.locate(key)
        return where


# --------------------------------------------------------------------------------------
# YAML with line numbers
# --------------------------------------------------------------------------------------


def _key_lines(node: yaml.Node, prefix: str = "") -> Iterator[tuple[str, int, bool]]:
    """Yield ``(dotted key, 1-based line, is_duplicate)`` for every mapping key and list item."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            name = str(key_node.value)
            dotted = f"{prefix}{name}"
            yield dotted, key_node.start_mark.line + 1, name in seen
            seen.add(name)
            yield from _key_lines(value_node, dotted + ".")
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield f"{prefix}{index}", item.start_mark.line + 1, False
            yield from _key_lines(item, f"{prefix}{index}.")


def _read_yaml(path: Path, source: str) -> tuple[dict[str, Any], dict[str, int]]:
    """Read a YAML mapping and the line of each key; any problem is a ConfigError."""
    if not path.exists():
        raise ConfigError(
            f"{source}: config file not found; check the path (try configs/default.yaml)"
        )
    if not path.is_file():
        raise ConfigError(f"{source}: is not a file; pass a YAML config file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read the file: {exc}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_error_message(exc, source)) from None
    lines: dict[str, int] = {}
    issues = []
    if node is not None:
        for dotted, line, duplicate in _key_lines(node):
            if duplicate:
                issues.append(
                    ConfigIssue(
                        key=dotted,
                        message=f"{dotted}: duplicate key (first at line {lines[dotted]}); "
                        "keep only one",
                        where=f"{source}:{line}",
                        line=line,
                    )
                )
            else:
                lines[dotted] = line
    if issues:
        raise ConfigError(issues)
    if data is None:
        return {}, lines
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}:1: the top level must be a mapping of sections "
            f"({', '.join(Config.model_fields)}), got {_kind(data)}"
        )
    return data, lines


def _yaml_error_message(exc: yaml.YAMLError, source: str) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f"{source}:{mark.line + 1}" if mark is not None else source
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    detail = f"{problem} ({context})" if context else problem
    return f"{where}: invalid YAML: {detail}; fix the syntax at this line"


# --------------------------------------------------------------------------------------
# Overrides
# --------------------------------------------------------------------------------------

_FREE_FORM = object()  # marker: a dict field, any sub-key is allowed


def _child(model: type[BaseModel], name: str) -> Any:
    """The annotation of ``model.name``: a section class, a dict field, or a leaf type."""
    annotation = model.model_fields[name].annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if _is_mapping_type(annotation):
        return _FREE_FORM
    return annotation


def _is_mapping_type(annotation: Any) -> bool:
    if get_origin(annotation) is dict:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        return any(get_origin(arg) is dict for arg in get_args(annotation))
    return False


def _unknown_key_message(name: str, parent: str, valid: Sequence[str]) -> str:
    close = [c] if (c := closest_name(name, list(valid))) else []
    hint = f"; did you mean {close[0]!r}?" if close else "."
    where = f"in {parent!r}" if parent else "at top level"
    return f"unknown key {name!r} {where}{hint} Valid keys: {', '.join(sorted(valid))}"


def _resolve_key(dotted: str) -> Any:
    """Check a dotted key against the schema; return its leaf annotation (or _FREE_FORM)."""
    current: Any = Config
    parts = dotted.split(".")
    for index, part in enumerate(parts):
        parent = ".".join(parts[:index])
        if current is _FREE_FORM:
            return _FREE_FORM
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            raise ValueError(f"{parent!r} is a value, not a section; it has no key {part!r}")
        if part not in current.model_fields:
            raise ValueError(_unknown_key_message(part, parent, list(current.model_fields)))
        current = _child(current, part)
    return current


def _is_str_type(annotation: Any) -> bool:
    if annotation is str or get_origin(annotation) is Literal:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        return str in get_args(annotation)
    return False


def _apply_override(data: dict[str, Any], text: str, origin: _Origin) -> None:
    if "=" not in text:
        raise ConfigError(
            [ConfigIssue(None, "expected key.sub=value, e.g. train.lr=1e-4", f"override {text!r}")]
        )
    dotted, raw = (part.strip() for part in text.split("=", 1))
    where = f"override {text!r}"
    if not dotted or any(not part for part in dotted.split(".")):
        raise ConfigError([ConfigIssue(None, "expected key.sub=value, e.g. train.lr=1e-4", where)])
    try:
        leaf = _resolve_key(dotted)
        value = yaml.safe_load(raw)
    except ValueError as exc:  # unknown key, or a key below a value
        raise ConfigError([ConfigIssue(dotted, str(exc), where)]) from None
    except yaml.YAMLError as exc:
        message = f"{dotted}: cannot parse value {raw!r}: {getattr(exc, 'problem', exc)}"
        raise ConfigError([ConfigIssue(dotted, message, where)]) from None
    if _is_str_type(leaf) and isinstance(value, (int, float, bool)):
        value = raw  # run.name=2024 means the string "2024"
    *parents, last = dotted.split(".")
    target = data
    for part in parents:
        if not isinstance(target.get(part), dict):
            target[part] = {}
        target = target[part]
    target[last] = value
    # This override now owns the key and everything below it.
    for key in [k for k in origin.lines if k == dotted or k.startswith(dotted + ".")]:
        del origin.lines[key]
    for key in [k for k in origin.overrides if k.startswith(dotted + ".")]:
        del origin.overrides[key]
    origin.overrides[dotted] = text


# --------------------------------------------------------------------------------------
# Pydantic errors -> ConfigIssues
# --------------------------------------------------------------------------------------

_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping (key: value lines)",
    "model_type": "a mapping (a section of key: value lines)",
    "model_attributes_type": "a mapping (a section of key: value lines)",
}

_BOUNDS = {
    "greater_than": (">", "gt"),
    "greater_than_equal": (">=", "ge"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 1e15 else repr(value)
    return repr(value)


def _literal_choices(loc: tuple[Any, ...]) -> list[str]:
    current: Any = Config
    for part in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        current = current.model_fields[str(part)].annotation
    return [str(choice) for choice in get_args(current)] if get_origin(current) is Literal else []


def _valid_keys(loc: tuple[Any, ...]) -> list[str]:
    current: Any = Config
    for part in loc:
        current = current.model_fields[str(part)].annotation
    return list(current.model_fields)


def _describe(error: Mapping[str, Any]) -> tuple[tuple[Any, ...], str, tuple[str, ...]]:
    """``(loc, message, related keys)`` of one pydantic error, in the user's words."""
    loc = tuple(error["loc"])
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        parent = loc[:-1]
        name = str(loc[-1])
        return loc, _unknown_key_message(name, _dotted(parent), _valid_keys(parent)), ()
    if kind == "value_error" and isinstance(ctx.get("error"), _FieldError):
        exc = ctx["error"]
        related = tuple(_dotted((*loc, name)) for name in exc.related)
        return (*loc, exc.field_name), str(exc), related
    if kind in _EXPECTED:
        message = f"expected {_EXPECTED[kind]}, got {_show(value)} ({_kind(value)})"
        if kind == "string_type" and isinstance(value, (int, float, bool)):
            message += f"; quote it: '{value}'"
        return loc, message, ()
    if kind in _BOUNDS:
        symbol, name = _BOUNDS[kind]
        return loc, f"must be {symbol} {_show(ctx.get(name))}, got {_show(value)}", ()
    if kind == "literal_error":
        return loc, _choice_message(value, _literal_choices(loc)), ()
    if kind == "value_error" and "error" in ctx:
        return loc, str(ctx["error"]), ()
    return loc, f"{error['msg']}, got {_show(value)}", ()


def _choice_message(value: Any, choices: Sequence[str]) -> str:
    close = [c] if (c := closest_name(str(value), list(choices))) else []
    hint = f"; did you mean {close[0]!r}?" if close else "."
    return f"unknown value {_show(value)}{hint} Valid choices: {', '.join(choices)}"


def _dotted(loc: Sequence[Any]) -> str:
    return ".".join(str(part) for part in loc)


def _issues_from(exc: ValidationError, origin: _Origin) -> list[ConfigIssue]:
    issues = []
    for error in exc.errors():
        loc, message, related = _describe(error)
        key = _dotted(loc)
        where, line = origin.locate(key, related)
        if error["type"] != "extra_forbidden":
            message = f"{key}: {message}"
        issues.append(ConfigIssue(key=key, message=message, where=where, line=line))
    # In file order; overrides and keys without a line come last.
    return sorted(issues, key=lambda issue: (issue.line is None, issue.line or 0))


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Read a YAML config (None = defaults only), apply ``key.sub=value`` overrides, validate.

    Override values are parsed as YAML: ``train.lr=1e-4``, ``log.wandb=false``,
    ``eval.pass_k=[1,2]``, ``env.kwargs.max_turns=12``. Later overrides win.
    Raises :class:`ConfigError` with file, line, key and fix for any mistake.
    """
    if isinstance(overrides, str):
        overrides = [overrides]
    if path is None:
        data: dict[str, Any] = {}
        origin = _Origin()
    else:
        source = str(path)
        data, lines = _read_yaml(Path(path), source)
        origin = _Origin(source=source, lines=lines)
    for text in overrides:
        _apply_override(data, text, origin)
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_issues_from(exc, origin)) from None
    cfg._origin = origin
    return cfg


def validate_names(cfg: Config, choices: Mapping[str, Sequence[str]]) -> None:
    """Check names against registries: ``{"algo.preset": [...], "env.id": [...], ...}``.

    A value that is None (not set) is skipped. Raises :class:`ConfigError` naming the key,
    where it was set, the closest valid name and all valid names.
    """
    issues = []
    for key, valid in choices.items():
        value: Any = cfg
        for part in key.split("."):
            if not isinstance(value, BaseModel) or part not in type(value).model_fields:
                raise ValueError(f"validate_names: {key!r} is not a config key")
            value = getattr(value, part)
        if value is None or value in valid:
            continue
        kind = _NAME_KINDS.get(key.rsplit(".", 1)[-1], key.rsplit(".", 1)[-1].replace("_", " "))
        where, line = cfg._origin.locate(key)
        message = f"{key}: {unknown_name_message(kind, str(value), sorted(valid))}"
        issues.append(ConfigIssue(key=key, message=message, where=where, line=line))
    if issues:
        raise ConfigError(issues)


_NAME_KINDS = {
    "id": "env",
    "loss_agg": "loss aggregation",
    "kl_estimator": "KL estimator",
    "policy_loss": "policy loss",
}


def dump_config(cfg: Config) -> str:
    """YAML of the fully resolved config, keys in declaration order; load_config reads it back."""
    return yaml.safe_dump(
        cfg.model_dump(mode="json"), sort_keys=False, default_flow_style=False, allow_unicode=True
    )


def save_config(cfg: Config, path: str | Path) -> None:
    """Write :func:`dump_config` to ``path`` atomically (temp file in the same folder + rename)."""
    atomic_write_text(path, dump_config(cfg))


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return "|".join(str(arg) for arg in args)
    if origin is Annotated:
        return _type_name(args[0])
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in args)
    if origin is list:
        return f"list[{_type_name(args[0])}]"
    if origin is dict:
        return "mapping"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _constraints(metadata: Sequence[Any]) -> str:
    parts = []
    for item in metadata:
        for name, symbol in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            bound = getattr(item, name, None)
            if bound is not None:
                parts.append(f"{symbol} {_show(bound)}")
    return f", {' and '.join(parts)}" if parts else ""


def _yaml_inline(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return text.removesuffix("...").strip()


def _help_lines(model: type[BaseModel], prefix: str) -> Iterator[str]:
    defaults = model().model_dump(mode="json")
    for name, info in model.model_fields.items():
        annotation = info.annotation
        dotted = f"{prefix}{name}"
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield ""
            yield f"{dotted}: {(annotation.__doc__ or '').strip()}"
            yield from _help_lines(annotation, dotted + ".")
            continue
        kind = _type_name(annotation) + _constraints(info.metadata)
        yield f"  {dotted} ({kind}) = {_yaml_inline(defaults[name])}"
        yield f"      {info.description}"


def config_help() -> str:
    """Every config key with its type, default and description (for ``turnrl train --help``)."""
    head = [
        "Config keys (set them in the YAML file or as key.sub=value overrides):",
    ]
    return "\n".join([*head, *_help_lines(Config, "")]).rstrip() + "\n"
