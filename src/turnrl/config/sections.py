"""The sections of the config tree that say where and how a run executes: run identity and
compute, the policy model (tiny shape, LoRA), the env (seeds, failures, simulated latency),
rollout sampling, metric sinks, collapse alarms and distributed placement.

One pydantic model per section, one documented field per knob; the descriptions are the
documentation (:func:`turnrl.config.config_help` renders them). The learning sections and
the root :class:`~turnrl.config.Config` are in :mod:`turnrl.config.schema`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from turnrl.config.errors import FieldError


class Section(BaseModel):
    """Base of every section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class RunConfig(Section):
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


class LoraConfig(Section):
    """Low-rank adapters (peft) instead of full fine-tuning."""

    enabled: bool = Field(False, description="Train LoRA adapters instead of all weights.")
    r: int = Field(8, gt=0, description="Adapter rank.")
    alpha: float = Field(16, description="LoRA scaling numerator (scale = alpha / r).")
    dropout: float = Field(0.0, ge=0, le=1, description="Dropout on the adapter input.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        description="Names of the linear modules that get adapters.",
    )


class TinyConfig(Section):
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
            raise FieldError(
                "hidden_size",
                f"must be divisible by model.tiny.num_heads ({self.num_heads}), "
                f"got {self.hidden_size}; pick num_heads that divides hidden_size",
                related=("num_heads",),
            )
        if self.num_heads % self.num_kv_heads:
            raise FieldError(
                "num_kv_heads",
                f"must divide model.tiny.num_heads ({self.num_heads}), got {self.num_kv_heads}; "
                "pick a divisor of num_heads",
                related=("num_heads",),
            )
        return self


class ModelConfig(Section):
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


class LatencyConfig(Section):
    """Simulated latency of every env step: log-normal, heavy-tailed like tool and search calls."""

    median_s: float = Field(0.0, ge=0, description="Median seconds per env step; 0 = off.")
    sigma: float = Field(1.0, ge=0, description="Log-normal shape: the tail grows with it "
                         "(p99 = median · e^(2.33·sigma)).")
    max_s: float = Field(30.0, gt=0, description="Cap on one step's delay, in seconds.")


class EnvConfig(Section):
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
            raise FieldError(
                "eval_seed_start",
                f"must be > env.train_seed_start ({self.train_seed_start}), got "
                f"{self.eval_seed_start}, so that evaluation tasks are held out; raise it "
                "(default 1000000000)",
                related=("train_seed_start",),
            )
        return self


class RolloutConfig(Section):
    """Sampling of the agent's turns."""

    max_new_tokens: int = Field(16, gt=0, description="Most tokens the agent emits per turn.")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature; 0 = greedy.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass.")
    max_batch_size: int = Field(256, gt=0, description="Most sequences per generate call.")
    max_context_tokens: int = Field(
        2048, gt=0, description="Episode token budget; an episode past it is truncated."
    )


class LogConfig(Section):
    """Where metrics go (metrics.jsonl is always written)."""

    tensorboard: bool = Field(True, description="Write TensorBoard events.")
    wandb: bool = Field(False, description="Log to Weights & Biases (turnrl[wandb]).")
    mlflow: bool = Field(False, description="Log to MLflow (turnrl[mlflow]).")
    progress: bool = Field(True, description="Show a progress bar on the terminal.")


class AlarmsConfig(Section):
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


class DistributedConfig(Section):
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
